// The scheduler duty (spec: Singleton duties, `scheduler`): every tick it evaluates each
// schedule of the active company and fires what fell due, as a `schedule` trigger in the
// seat's inbox. Exactly once per instant, fleet-wide, from three layers:
//   1. the fire claim: `fire.{id}.{instant}` created in crewlet_fires — two nodes racing
//      one fire (the duty moving between them) lose to one write;
//   2. the inbox message id is the trigger's event id, so a claim taken over from a node
//      that died between publishing and marking it published publishes into the agent
//      stream's duplicate window rather than twice;
//   3. the trigger type is ledgered, so a redelivery of the inbox message runs no turn twice.
// A claim marked published is done; one still `claimed` is in flight, and is taken over
// once it is older than FIRE_STALE_MS (its node died mid-fire).
//
// Catch-up: the cursor (`cursor.{id}` in crewlet_schedules, a bucket with no age: a weekly
// cursor must outlive any age a fire claim has) records the last instant handled. Instants missed
// while no node ran the duty are fired ONCE, for the latest of them, and logged
// (schedule_catch_up) — a schedule that woke a seat daily must not wake it thirty times
// after a month off. A schedule seen for the first time starts from now (no past to fire).
// A schedule the fleet's revision no longer has loses its cursor (checked once per revision
// a scheduler sees), so re-adding the id later starts it fresh and the bucket holds only
// the company's schedules.
//
// Why not nats-server's own message schedules (2.14 cron schedules with time zones): they
// publish a fixed payload on a fixed subject, so the trigger could not carry the instant it
// fired for (the event id the ledger and the inbox dedupe key on); what a server does with
// ticks missed during a quorum loss is the server's choice, not the one-catch-up rule; the
// company's schedules would need copying into stream messages on every revision (a second
// source of truth for enabled/cron/zone); GET /schedules could not say how a fire went; and
// a fleet on external NATS older than 2.14 would have no scheduler at all. The KV claim
// costs one create per fire and keeps every guarantee in code the tests can reach.
import type { Clock } from "../clock.ts";
import type { Company } from "../config/company.ts";
import { CasConflict, type KvSlot } from "../coord/contract.ts";
import type { Logger } from "../log.ts";
import { encodeTrigger } from "../org/trigger.ts";
import type { Queue } from "../queue/contract.ts";
import { mailboxSubject } from "../queue/topics.ts";
import { SCHEDULER_TICK_MS, SCHEDULER_TTL_MS } from "./duties.ts";
import type { DutyContext, DutyWork } from "./runner.ts";
import { bounded } from "./bound.ts";
import {
  CronCache,
  CURSOR_PREFIX,
  cursorKey,
  cursorSchema,
  decodeJson,
  dueBetween,
  effectiveSchedules,
  encodeJson,
  fireKey,
  fireRecordSchema,
  nextFire,
  scheduleTrigger,
  type Cursor,
  type EffectiveSchedule,
  type FireRecord,
} from "./schedule.ts";

/**
 * A fire claimed and not marked published for this long is taken over: its node died
 * between the claim and the mark. A live fire is a publish and two KV writes (milliseconds),
 * and a publish waits at most ~10 s for its ack on a leader election; 30 s (the duty's own
 * TTL) is well past both, and the inbox's 35-minute duplicate window still covers a second
 * publish of a fire whose first one did land.
 */
export const FIRE_STALE_MS = 30_000;
/** Wake a little after the due instant, never before it: a clock read a hair early would
 * find nothing due and wait another full tick. */
const DUE_SLACK_MS = 5;
/** Cursors looked at per prune: bounds one tick's work (a company's schedules are a few
 * dozen; a prune that left some deletes them on the next revision or scheduler). */
const CURSOR_PRUNE_MAX = 10_000;

/** The fleet's current revision as the store has it: the activation pointer's epoch and its company. */
export interface CurrentRevision {
  epoch: number;
  company: Company;
}

export interface SchedulerOptions {
  owner: string;
  /** crewlet_fires: the per-instant fire claims. */
  fires: KvSlot;
  /** crewlet_schedules: each schedule's cursor. */
  cursors: KvSlot;
  queue: Pick<Queue, "publish">;
  /** The node's applied company: only for when the next tick is due (a hint, never a fire). */
  company: () => Company | null;
  /**
   * The fleet's current revision, read from the store at each tick and again just before a
   * publish. A node behind the fleet's revision (its follower not yet applied) would
   * otherwise fire a schedule the current revision disables or removes. Without it (tests
   * of the fire rules alone) the tick evaluates `company()`.
   */
  current?: () => Promise<CurrentRevision | null>;
  clock: Clock;
  log: Logger;
  /** Bound on each store and broker call (see bound.ts); defaults to 10 s. */
  call_bound_ms?: () => number;
}

/** Default per-call bound: a leader election (~4 s) twice over. */
const CALL_BOUND_MS = 10_000;

export interface ScheduleStatus {
  id: string;
  seat: string;
  cron: string;
  timezone: string;
  enabled: boolean;
  /** ISO instant of the next fire, null when disabled or never again. */
  next_fire: string | null;
  last_fire: (Cursor["last_fire"] & { instant_iso: string; fired_at_iso: string }) | null;
  /** Why the schedule's record could not be read, when it could not. */
  error?: string;
}

export class Scheduler implements DutyWork {
  readonly name = "scheduler";
  readonly ttl_ms = SCHEDULER_TTL_MS;
  private readonly crons = new CronCache();

  private beat: () => void = () => undefined;
  /** The company whose removed schedules' cursors this scheduler last deleted. */
  private pruned: Company | null = null;

  constructor(private readonly o: SchedulerOptions) {}

  /** Every store and broker call: the watchdog stamped first, the call bounded. Each one is
   *  safe to land late: a create or update is a compare-and-set, a publish carries its
   *  event id as the message id. */
  private call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    this.beat();
    return bounded(fn(), this.o.call_bound_ms?.() ?? CALL_BOUND_MS, this.o.clock, what);
  }

  /** The next tick: when the soonest enabled schedule falls due, at most one tick away. */
  nextTickIn(now_ms: number): number {
    let soonest = now_ms + SCHEDULER_TICK_MS;
    const company = this.o.company();
    if (company) {
      for (const s of effectiveSchedules(company)) {
        if (!s.enabled) continue;
        const next = nextFire(this.crons.get(s), now_ms);
        if (next !== null && next < soonest) soonest = next;
      }
    }
    return Math.max(0, soonest - now_ms) + DUE_SLACK_MS;
  }

  async tick(ctx: DutyContext): Promise<string> {
    this.beat = () => ctx.beat();
    // Judged against the fleet's revision, never this node's applied one: unknown is not
    // an answer (a store that did not answer fails the tick; the next one tries again).
    const current = this.o.current ? await this.call("revision read", () => this.o.current!()) : null;
    const company = this.o.current ? (current?.company ?? null) : this.o.company();
    if (!company) return "no company";
    const revision = current?.epoch ?? null;
    let fired = 0;
    let failed = 0;
    if (this.pruned !== company) {
      try {
        await this.pruneRemoved(company);
        this.pruned = company;
      } catch (err) {
        // The next tick tries again; a stale cursor costs only space until then.
        this.o.log.warn("schedule_cursor_prune_failed", { error: err as Error });
      }
    }
    for (const s of effectiveSchedules(company)) {
      if (ctx.signal.aborted) break;
      ctx.beat();
      try {
        if (await this.evaluate(s, revision)) fired++;
      } catch (err) {
        failed++;
        this.o.log.warn("schedule_evaluate_failed", { schedule: s.id, error: err as Error });
      }
    }
    if (failed > 0) throw new Error(`${failed} schedule(s) could not be evaluated; ${fired} fired`);
    return fired > 0 ? `fired ${fired}` : "nothing due";
  }

  /** One schedule: true when this call fired it. */
  private async evaluate(s: EffectiveSchedule, revision: number | null): Promise<boolean> {
    const now = this.o.clock.now();
    const entry = await this.call("cursor get", () => this.o.cursors.get(cursorKey(s.id)));
    let cursor = entry ? decodeJson(cursorSchema, entry.value) : null;
    if (entry && !cursor) throw new Error(`cursor.${s.id} is unreadable`);
    if (!entry) cursor = await this.legacyCursor(s.id);
    if (!s.enabled) {
      if (!cursor?.disabled) await this.writeCursor(s.id, entry?.revision ?? null, { instant: now, disabled: true, last_fire: cursor?.last_fire ?? null });
      return false;
    }
    if (!cursor || cursor.disabled) {
      // First seen, or enabled again: the schedule's past is not fired.
      await this.writeCursor(s.id, entry?.revision ?? null, { instant: now, disabled: false, last_fire: cursor?.last_fire ?? null });
      if (!cursor) this.o.log.info("schedule_started", { schedule: s.id, seat: s.seat });
      return false;
    }
    const due = dueBetween(this.crons.get(s), cursor.instant, now);
    if (due.latest === null) return false;
    const missed = due.count - 1;
    let fired: Awaited<ReturnType<Scheduler["fire"]>>;
    try {
      fired = await this.fire(s, due.latest, missed, now, revision);
    } catch (err) {
      // The cursor stays where it was, so the next tick fires this instant again; the last
      // fire says how this attempt went.
      const detail = (err as Error).message.slice(0, 300);
      await this.writeCursor(s.id, entry?.revision ?? null, { ...cursor, last_fire: { instant: due.latest, fired_at: now, outcome: "publish_failed", missed, detail } }).catch(() => undefined);
      throw err;
    }
    if (fired === "not_ours" || fired === "revision_moved") return false;
    await this.writeCursor(s.id, entry?.revision ?? null, {
      instant: due.latest,
      disabled: false,
      last_fire: fired.record,
    });
    if (fired.published && missed > 0) {
      this.o.log.info("schedule_catch_up", { schedule: s.id, seat: s.seat, missed: due.capped ? `${missed}+` : missed, fired_for: new Date(due.latest).toISOString() });
    }
    return fired.published;
  }

  private async fire(
    s: EffectiveSchedule,
    instant: number,
    missed: number,
    now: number,
    judged_at: number | null,
  ): Promise<"not_ours" | "revision_moved" | { published: boolean; record: NonNullable<Cursor["last_fire"]> }> {
    const key = fireKey(s.id, instant);
    const mine: FireRecord = { state: "claimed", owner: this.o.owner, claimed_at: now, published_at: null, ...(judged_at !== null ? { revision: judged_at } : {}) };
    let revision: number;
    try {
      revision = await this.call("fire claim", () => this.o.fires.create(key, encodeJson(mine)));
    } catch (err) {
      if (!(err instanceof CasConflict)) throw err;
      const existing = await this.call("fire get", () => this.o.fires.get(key));
      const rec = existing ? decodeJson(fireRecordSchema, existing.value) : null;
      if (!existing || !rec) throw new Error(`${key} exists but cannot be read`);
      if (rec.state === "published") {
        // Fired already (its node's cursor write was lost): only the cursor moves.
        return { published: false, record: { instant, fired_at: rec.published_at ?? rec.claimed_at, outcome: "fired", missed } };
      }
      const stale = rec.owner === this.o.owner || now - rec.claimed_at >= FIRE_STALE_MS;
      if (!stale) return "not_ours";
      revision = await this.call("fire take-over", () => this.o.fires.update(key, encodeJson(mine), existing.revision)).catch((e) => {
        if (e instanceof CasConflict) return -1;
        throw e;
      });
      if (revision < 0) return "not_ours";
      this.o.log.warn("schedule_fire_taken_over", { schedule: s.id, instant: new Date(instant).toISOString(), from: rec.owner });
    }
    // The last look before the trigger leaves: a revision activated since this tick read
    // the fleet's (a schedule disabled or removed a moment ago) is judged again next tick,
    // which takes this claim back (its owner is this incarnation) if the schedule still fires.
    if (judged_at !== null && this.o.current) {
      const now_current = await this.call("revision re-read", () => this.o.current!());
      if (now_current?.epoch !== judged_at) {
        this.o.log.info("schedule_fire_withheld", { schedule: s.id, instant: new Date(instant).toISOString(), judged_at_revision: judged_at, current_revision: now_current?.epoch ?? null });
        return "revision_moved";
      }
    }
    const trigger = scheduleTrigger(s, instant, missed);
    try {
      await this.call("fire publish", () => this.o.queue.publish(mailboxSubject(s.seat, "inbox"), encodeTrigger(trigger), { msgId: trigger.event_id }));
    } catch (err) {
      // The claim stays `claimed` under this owner: the next tick retries it at once.
      this.o.log.error("schedule_fire_failed", { schedule: s.id, seat: s.seat, instant: new Date(instant).toISOString(), error: err as Error });
      throw err;
    }
    const published_at = this.o.clock.now();
    await this.call("fire mark", () => this.o.fires.update(key, encodeJson({ ...mine, state: "published", published_at } satisfies FireRecord), revision))
      .catch((err) => this.o.log.warn("schedule_fire_mark_failed", { schedule: s.id, error: err as Error }));
    this.o.log.info("schedule_fired", {
      schedule: s.id,
      seat: s.seat,
      instant: new Date(instant).toISOString(),
      event_id: trigger.event_id,
      latency_ms: published_at - instant,
      missed,
    });
    return { published: true, record: { instant, fired_at: published_at, outcome: "fired", missed } };
  }

  /**
   * A cursor an older build left in crewlet_fires (where cursors lived before they had their
   * own bucket), so a rolling upgrade neither restarts a schedule nor loses its last fire; the
   * first write puts it in crewlet_schedules. Unreadable reads as absent: that build's record.
   */
  private async legacyCursor(id: string): Promise<Cursor | null> {
    const old = await this.call("legacy cursor get", () => this.o.fires.get(cursorKey(id)));
    return old ? decodeJson(cursorSchema, old.value) : null;
  }

  /** Deletes the cursors of schedules `company` does not have, each at the revision read. */
  private async pruneRemoved(company: Company): Promise<void> {
    const ids = new Set(company.schedules.map((s) => s.id));
    const keys = await this.call("cursor listing", () => this.o.cursors.keys(`${CURSOR_PREFIX}>`));
    for (const key of keys.slice(0, CURSOR_PRUNE_MAX)) {
      const id = key.slice(CURSOR_PREFIX.length);
      if (ids.has(id)) continue;
      const entry = await this.call("cursor get", () => this.o.cursors.get(key));
      if (!entry) continue;
      try {
        await this.call("cursor delete", () => this.o.cursors.delete(key, entry.revision));
        this.o.log.info("schedule_cursor_deleted", { schedule: id });
      } catch (err) {
        // Written since the listing (a scheduler judging a revision that has it again): it stands.
        if (!(err instanceof CasConflict)) throw err;
      }
    }
  }

  private async writeCursor(id: string, revision: number | null, c: Cursor): Promise<void> {
    try {
      if (revision === null) await this.call("cursor create", () => this.o.cursors.create(cursorKey(id), encodeJson(c)));
      else await this.call("cursor update", () => this.o.cursors.update(cursorKey(id), encodeJson(c), revision));
    } catch (err) {
      // A peer moved it first (the duty moving between nodes): its write stands.
      if (!(err instanceof CasConflict)) throw err;
    }
  }
}

/** GET /schedules: every schedule of the company with its next fire and last fire (cursors: crewlet_schedules). */
export async function scheduleStatuses(company: Company, cursors: Pick<KvSlot, "get">, now_ms: number): Promise<ScheduleStatus[]> {
  const crons = new CronCache();
  return Promise.all(
    effectiveSchedules(company).map(async (s): Promise<ScheduleStatus> => {
      const base = { id: s.id, seat: s.seat, cron: s.cron, timezone: s.zone, enabled: s.enabled };
      const next = s.enabled ? nextFire(crons.get(s), now_ms) : null;
      const next_fire = next === null ? null : new Date(next).toISOString();
      try {
        const entry = await cursors.get(cursorKey(s.id));
        const cursor = entry ? decodeJson(cursorSchema, entry.value) : null;
        const lf = cursor?.last_fire ?? null;
        return {
          ...base,
          next_fire,
          last_fire: lf ? { ...lf, instant_iso: new Date(lf.instant).toISOString(), fired_at_iso: new Date(lf.fired_at).toISOString() } : null,
        };
      } catch (err) {
        return { ...base, next_fire, last_fire: null, error: (err as Error).message };
      }
    }),
  );
}
