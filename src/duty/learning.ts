// The `learning` singleton duty: the four passes on one loop behind one lease, so N nodes
// never write N sets of skills. It reads seats' memory from the changelog, decides with the
// pure plan (memory/learning-plan.ts) and tells each holder, who writes (learning-apply.ts).
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import type { Changelog } from "../memory/changelog.ts";
import { encodeLearningDue, learningMsgId, type LearningDue } from "../memory/learning-due.ts";
import { planLearning, type SeatMemorySnapshot } from "../memory/learning-plan.ts";
import type { EpisodeRow, MemoryRecord, MemoryTable, SkillRow, SkillVersionRow } from "../memory/records.ts";
import type { Org } from "../org/org.ts";
import type { Queue } from "../queue/contract.ts";
import { mailboxSubject } from "../queue/topics.ts";
import { bounded } from "./bound.ts";
import { dutyTiming } from "./duties.ts";
import type { DutyContext, DutyWork } from "./runner.ts";

const MINUTE_MS = 60_000;
/**
 * The passes' tick. Skills move on a scale of days (stale after two weeks) and a cluster
 * needs three turns, so an hour is prompt enough; each tick replays every seat's memory,
 * which an hour keeps to a small share of the broker's work.
 */
export const LEARNING_TICK_MS = 60 * MINUTE_MS;
/** Three ticks (the spec's "up to three hours for the learning passes"): a slow tick never
 * moves the duty, and a dead holder's passes resume on a peer within three hours. */
export const LEARNING_TTL_MS = 3 * LEARNING_TICK_MS;
/**
 * An unchanged decision is sent again after this long. The plan only repeats while the
 * changelog lacks what was decided, and past a seat's ordinary wait for a holder that means
 * the wake was lost: a holder that died between applying it and its flush, or an older
 * build's holder that cannot read a learning wake. Six ticks; the holder's apply is idempotent.
 */
export const LEARNING_RESEND_MS = 6 * LEARNING_TICK_MS;
/** What the passes read of a seat: its episodes and skills. Not the diary, nor the vectors,
 * which are most of a seat's bytes on the changelog (bench/vectors.ts). */
export const LEARNING_TABLES = ["episodes", "skills", "skill_versions"] as const satisfies readonly MemoryTable[];
/** Default per-call bound (a node passes its own, a third of the watchdog's threshold, as
 * for every duty): a leader election (~4 s) twice over. A seat whose replay outlasts it is
 * left for the next tick (learning_seat_unread). */
const DEFAULT_CALL_BOUND_MS = 10_000;

export interface LearningDutyOptions {
  changelog: Pick<Changelog, "replay">;
  queue: Pick<Queue, "publish">;
  org: () => Org | null;
  clock: Clock;
  log: Logger;
  call_bound_ms?: () => number;
  /** Test-only shortening (Tier A `testing.learning_tick_seconds`); the shipped tick otherwise. */
  tick_ms?: number;
}

export class LearningDuty implements DutyWork {
  readonly name = "learning";
  readonly ttl_ms: number;
  private readonly tick_ms: number;
  /** The wake last published per seat by this holder: an unchanged decision is not sent
   *  again every tick, only after LEARNING_RESEND_MS. A successor starts afresh and sends
   *  each once (the holder's apply is idempotent). */
  private readonly lastSent = new Map<string, { id: string; at: number }>();

  constructor(private readonly o: LearningDutyOptions) {
    ({ tick_ms: this.tick_ms, ttl_ms: this.ttl_ms } = dutyTiming({ tick_ms: LEARNING_TICK_MS, ttl_ms: LEARNING_TTL_MS }, o.tick_ms));
  }

  nextTickIn(): number {
    return this.tick_ms;
  }

  async tick(ctx: DutyContext): Promise<string> {
    const org = this.o.org();
    if (!org) return "no company";
    const call = <T>(what: string, p: Promise<T>) => {
      ctx.beat();
      return bounded(p, this.o.call_bound_ms?.() ?? DEFAULT_CALL_BOUND_MS, this.o.clock, what);
    };
    const seats: SeatMemorySnapshot[] = [];
    let unread = 0;
    for (const seat of org.agentSeats()) {
      if (ctx.signal.aborted) return "stopped";
      try {
        const replay = await call(`memory replay of ${seat.handle}`, this.o.changelog.replay(seat.handle, LEARNING_TABLES));
        seats.push(snapshotOf(seat.handle, replay.records));
      } catch (err) {
        // One seat's memory the broker cannot replay now waits for the next tick; the rest
        // learn (it is left out of promotion's targets too, as a seat seen with no skills).
        unread += 1;
        this.o.log.warn("learning_seat_unread", { seat: seat.handle, error: err as Error });
      }
    }
    const now = this.o.clock.now();
    const plans = planLearning({ now_ms: now, seats, peers: unitPeers(org) });
    let sent = 0;
    for (const p of plans) {
      if (ctx.signal.aborted) break;
      const decided = { type: "learning_due" as const, seat: p.seat, skills: p.skills, compact_before: p.compact_before };
      const id = learningMsgId(decided);
      const last = this.lastSent.get(p.seat);
      if (last?.id === id && now - last.at < LEARNING_RESEND_MS) continue;
      const due: LearningDue = { ...decided, at: now };
      await call(`learning wake for ${p.seat}`, this.o.queue.publish(mailboxSubject(p.seat, "reflect"), encodeLearningDue(due), { msgId: id }));
      this.lastSent.set(p.seat, { id, at: now });
      sent += 1;
      this.o.log.info("learning_decided", { seat: p.seat, skills: p.skills.length, new_versions: p.skills.filter((c) => c.version !== null).length, compact_before: p.compact_before });
    }
    return `${seats.length} seats read, ${plans.length} with changes, ${sent} woken${unread > 0 ? `, ${unread} unread` : ""}`;
  }
}

/** One seat's rows as the plan reads them, from its changelog replay. */
export function snapshotOf(handle: string, records: readonly MemoryRecord[]): SeatMemorySnapshot {
  const episodes: EpisodeRow[] = [];
  const skills: SkillRow[] = [];
  const versions = new Map<string, SkillVersionRow>();
  for (const r of records) {
    if (r.row.handle !== handle) continue;
    if (r.table === "episodes") episodes.push(r.row);
    else if (r.table === "skills") skills.push(r.row);
    else if (r.table === "skill_versions") versions.set(r.row.id, r.row);
  }
  return { handle, episodes, skills, versions };
}

/** Per agent seat, the other agent seats sharing one of its units (promotion's reach). */
export function unitPeers(org: Org): Record<string, string[]> {
  const agents = org.agentSeats();
  const out: Record<string, string[]> = {};
  for (const a of agents) out[a.handle] = agents.filter((b) => b.handle !== a.handle && b.units.some((u) => a.units.includes(u))).map((b) => b.handle);
  return out;
}
