// The retention duty (spec: Singleton duties, `retention`): every tick, per estate domain,
// gather the facts — the log's extent, every data node's applied position from presence,
// the copies heard from before (crewlet_estate `copies`), the operator's hold, the wake
// feed's ack floor — let the pure rule (estate/trim-floor.ts) decide, and act: make sure a
// snapshot that joins the log from the new first position is stored (a copy below the log
// restores from it), purge, and publish the conclusion (`trim.{domain}`, shown by GET
// /estate) with the term holding the log and since when. One node's series of ticks, so
// "how long has this term held" means something.
import type { Clock } from "../clock.ts";
import { CasConflict, type KvSlot, type LeaseStore } from "../coord/contract.ts";
import type { EstateCopy } from "../estate/copy.ts";
import { DOMAINS, type Domain } from "../estate/schema.ts";
import type { SnapshotMeta, SnapshotStore } from "../estate/snapshot.ts";
import type { StateLog } from "../estate/statelog.ts";
import { decideTrim, UNHEARD_COPY_HOLD_MS, type CopyFact, type TrimDecision } from "../estate/trim-floor.ts";
import {
  conclusionSchema,
  COPIES_KEY,
  copiesSchema,
  holdKey,
  holdSchema,
  readRecord,
  trimKey,
  writeRecord,
  type Conclusion,
  type CopiesRecord,
} from "../estate/retention-records.ts";
import type { Logger } from "../log.ts";
import { parsePresence, PRESENCE_PREFIX } from "../seat/presence.ts";
import { bounded } from "./bound.ts";
import { RETENTION_TICK_MS, RETENTION_TTL_MS } from "./duties.ts";
import type { DutyContext, DutyWork } from "./runner.ts";

/** Default per-call bound: a leader election (~4 s) twice over. */
const CALL_BOUND_MS = 10_000;
/**
 * Bound on a snapshot upload (the whole estate), which cannot stamp the watchdog while it
 * streams: at most 40 s and SNAPSHOT_TTL_SHARE of the TTL (the watchdog's threshold). An
 * estate too large for that is a failed tick that says so; nothing is purged without it.
 */
const SNAPSHOT_BOUND_MS = 40_000;
/** The TTL's share the upload may take: a quarter is left to the tick's work around it. */
const SNAPSHOT_TTL_SHARE = 0.75;
/**
 * How long the trim keeps using a stored snapshot that covers only part of what the floor
 * permits (the purge stops at the snapshot's position) before it uploads a fresh one. Each
 * upload is the whole estate over the broker; six hours makes that four a day rather than
 * one every tick, and costs only the records of those hours kept on the log a little longer.
 */
export const SNAPSHOT_MAX_AGE_MS = 6 * 60 * 60 * 1000;

export interface TrimDutyOptions {
  node_id: string;
  /** coord.slot("estate"): holds, conclusions, the copies registry. */
  slot: KvSlot;
  /** The lease store presence rows live in. */
  leases: Pick<LeaseStore, "list">;
  stateLog: Pick<StateLog, "position" | "wakeAckFloor" | "purgeBelow">;
  snapshots: Pick<SnapshotStore, "info" | "take">;
  /** This node's own copy (a workers node holds data): the snapshot is taken of it. */
  copy: () => EstateCopy | null;
  clock: Clock;
  log: Logger;
  call_bound_ms?: () => number;
  /** The seat lease TTL in force: the watchdog's threshold, which the upload stays under. */
  lease_ttl_ms?: () => number;
  tick_ms?: number;
  margin?: number;
  unheard_hold_ms?: number;
  snapshot_max_age_ms?: number;
}

export class TrimDuty implements DutyWork {
  readonly name = "retention";
  readonly ttl_ms = RETENTION_TTL_MS;
  private beat: () => void = () => undefined;

  constructor(private readonly o: TrimDutyOptions) {}

  nextTickIn(): number {
    return this.o.tick_ms ?? RETENTION_TICK_MS;
  }

  private snapshotBound(): number {
    const ttl = this.o.lease_ttl_ms?.();
    return ttl === undefined ? SNAPSHOT_BOUND_MS : Math.min(SNAPSHOT_BOUND_MS, Math.floor(ttl * SNAPSHOT_TTL_SHARE));
  }

  private call<T>(what: string, fn: () => Promise<T>, bound_ms?: number): Promise<T> {
    this.beat();
    return bounded(fn(), bound_ms ?? this.o.call_bound_ms?.() ?? CALL_BOUND_MS, this.o.clock, what);
  }

  async tick(ctx: DutyContext): Promise<string> {
    this.beat = () => ctx.beat();
    const now = this.o.clock.now();
    // Who holds a copy: live data nodes from presence, and those heard from before.
    let copies: { live: Map<string, Record<string, number> | null>; registry: { value: CopiesRecord; revision: number | null } } | null = null;
    try {
      const views = await this.call("presence list", () => this.o.leases.list(PRESENCE_PREFIX));
      const live = new Map<string, Record<string, number> | null>();
      for (const v of views) {
        if (!v.live) continue;
        const p = parsePresence(v, this.o.log);
        if (p.roles.includes("data")) live.set(p.node_id, p.estate_applied);
      }
      const reg = await this.call("copies read", () => readRecord(this.o.slot, COPIES_KEY, copiesSchema));
      copies = { live, registry: { value: reg?.value ?? {}, revision: reg?.revision ?? null } };
    } catch (err) {
      this.o.log.warn("estate_trim_facts_unread", { what: "copies", error: err as Error });
    }

    const summaries: string[] = [];
    let failed = 0;
    for (const domain of DOMAINS) {
      if (ctx.signal.aborted) break;
      try {
        summaries.push(`${domain}: ${await this.domainTick(domain, now, copies)}`);
      } catch (err) {
        failed++;
        summaries.push(`${domain}: failed (${(err as Error).message.slice(0, 120)})`);
        this.o.log.error("estate_trim_failed", { domain, error: err as Error });
      }
    }

    // Remember every live copy's positions (a copy that stops publishing holds the log at
    // them for the unheard hold); forget those unheard past it (they return by snapshot).
    if (copies) {
      const next: CopiesRecord = {};
      const hold_ms = this.o.unheard_hold_ms ?? UNHEARD_COPY_HOLD_MS;
      for (const [node, rec] of Object.entries(copies.registry.value)) {
        if (!copies.live.has(node) && now - rec.heard_at < hold_ms) next[node] = rec;
        else if (!copies.live.has(node)) this.o.log.info("estate_copy_forgotten", { copy_node: node, heard_at: rec.heard_at, applied: rec.applied });
      }
      for (const [node, applied] of copies.live) {
        if (applied) next[node] = { applied, heard_at: now };
        else if (copies.registry.value[node]) next[node] = copies.registry.value[node]!;
      }
      try {
        await this.call("copies write", () => writeRecord(this.o.slot, COPIES_KEY, next, copies!.registry.revision));
      } catch (err) {
        if (!(err instanceof CasConflict)) this.o.log.warn("estate_trim_copies_unwritten", { error: err as Error });
      }
    }
    const summary = summaries.join("; ");
    if (failed > 0) throw new Error(summary);
    return summary;
  }

  private async domainTick(domain: Domain, now: number, copies: { live: Map<string, Record<string, number> | null>; registry: { value: CopiesRecord } } | null): Promise<string> {
    const log = await this.call("log position", () => this.o.stateLog.position(domain)).catch(() => null);
    const hold = await this.call("hold read", () => readRecord(this.o.slot, holdKey(domain), holdSchema)).then(
      (r) => (r ? r.value : null),
      () => "unknown" as const,
    );
    const wake = await this.call("wake feed", () => this.o.stateLog.wakeAckFloor(domain)).catch(() => "unknown" as const);
    const prev = await this.call("conclusion read", () => readRecord(this.o.slot, trimKey(domain), conclusionSchema)).catch(() => null);
    let facts: CopyFact[] | null = null;
    if (copies) {
      facts = [];
      for (const [node, applied] of copies.live) facts.push({ node, applied: applied?.[domain] ?? null, live: true, heard_at: now });
      for (const [node, rec] of Object.entries(copies.registry.value)) {
        if (!copies.live.has(node)) facts.push({ node, applied: rec.applied[domain] ?? null, live: false, heard_at: rec.heard_at });
      }
    }
    const decision = decideTrim({
      domain,
      now_ms: now,
      log: log ? { first_seq: log.first_seq, last_seq: log.last_seq } : null,
      copies: facts,
      hold,
      wake_ack_floor: wake,
      previous: prev ? { holding: prev.value.holding, holding_since: prev.value.holding_since } : null,
      ...(this.o.margin !== undefined ? { margin: this.o.margin } : {}),
      ...(this.o.unheard_hold_ms !== undefined ? { unheard_hold_ms: this.o.unheard_hold_ms } : {}),
    });

    let outcome: Conclusion["outcome"] = decision.kind === "purge" ? "trimmed" : decision.kind === "skip" ? "skipped" : "nothing";
    let reason = decision.reason;
    let purged: Conclusion["purged"] = null;
    let snapshot_position: number | null = prev?.value.snapshot_position ?? null;
    if (decision.kind === "purge" && log) {
      try {
        const snap = await this.snapshotJoining(domain, decision.purge_below! - 1, log.created, log.first_seq);
        snapshot_position = snap.positions[domain] ?? null;
        const first_kept = Math.min(decision.purge_below!, (snapshot_position ?? 0) + 1);
        if (first_kept <= log.first_seq) {
          outcome = "nothing";
          reason = `${decision.reason}; but the snapshot is at ${snapshot_position}, so nothing goes yet`;
        } else {
          const n = await this.call("purge", () => this.o.stateLog.purgeBelow(domain, first_kept));
          purged = { from: log.first_seq, to: first_kept - 1 };
          reason = `${decision.reason}; purged ${n} record(s) ${purged.from}–${purged.to}; snapshot at ${snapshot_position}`;
        }
      } catch (err) {
        outcome = "failed";
        reason = `${decision.reason}; not purged: ${(err as Error).message}`;
      }
    }

    const conclusion: Conclusion = {
      domain,
      at: now,
      by_node: this.o.node_id,
      outcome,
      reason: reason.slice(0, 1000),
      floor: decision.floor,
      margin: decision.margin,
      log: log ? { first_seq: purged ? purged.to + 1 : log.first_seq, last_seq: log.last_seq } : null,
      terms: decision.terms,
      holding: decision.holding,
      holding_since: decision.holding_since,
      released: decision.released,
      purged,
      snapshot_position,
    };
    this.report(decision, conclusion);
    try {
      await this.call("conclusion write", () => writeRecord(this.o.slot, trimKey(domain), conclusion, prev?.revision ?? null));
    } catch (err) {
      if (!(err instanceof CasConflict)) throw err;
      this.o.log.warn("estate_trim_conclusion_conflict", { domain });
    }
    if (outcome === "failed") throw new Error(reason);
    return outcome === "trimmed" ? `trimmed to ${purged!.to + 1}` : `${outcome} (${decision.holding ?? reason.slice(0, 80)})`;
  }

  /** A stored snapshot whose `domain` position is at least `need` on this log generation; takes one of this node's copy when the stored one is older. */
  private async snapshotJoining(domain: Domain, need: number, generation: string, log_first: number): Promise<SnapshotMeta> {
    const stored = await this.call("snapshot info", () => this.o.snapshots.info());
    const usable = stored && stored.generations[domain] === generation && (stored.positions[domain] ?? -1) + 1 > log_first;
    // A stored snapshot that covers the whole purge is used as it is; one that covers part of
    // it (the purge then stops at it) is kept until it is SNAPSHOT_MAX_AGE_MS old.
    if (usable && (stored.positions[domain]! >= need || this.o.clock.now() - stored.taken_at < (this.o.snapshot_max_age_ms ?? SNAPSHOT_MAX_AGE_MS))) return stored;
    const copy = this.o.copy();
    if (!copy) throw new Error("this node holds no copy to snapshot");
    // Never a snapshot behind the stored one: a copy repairing from it would not join the log.
    for (const d of DOMAINS) {
      const mine = copy.applied(d);
      const theirs = stored && stored.generations[d] === generation ? (stored.positions[d] ?? 0) : 0;
      if (mine < theirs) throw new Error(`this node's ${d} copy is at ${mine}, behind the stored snapshot (${theirs}): not replacing it`);
    }
    if (copy.applied(domain) < need && usable) return stored;
    const taken = await this.call("snapshot upload", () => this.o.snapshots.take(copy.sqlite), this.snapshotBound());
    if (taken.generations[domain] !== generation) throw new Error(`this node's copy follows log generation ${taken.generations[domain]}, the log is ${generation}`);
    return taken;
  }

  private report(d: TrimDecision, c: Conclusion): void {
    const fields = { domain: c.domain, floor: c.floor, holding: c.holding, holding_since: c.holding_since, margin: c.margin, log_first: c.log?.first_seq ?? null, log_last: c.log?.last_seq ?? null, reason: c.reason };
    if (c.outcome === "trimmed") this.o.log.info("estate_trimmed", { ...fields, purged_from: c.purged!.from, purged_to: c.purged!.to, snapshot_position: c.snapshot_position });
    else if (c.outcome === "failed") this.o.log.error("estate_trim_skipped", { ...fields, outcome: "failed" });
    else if (d.kind === "skip") this.o.log.warn("estate_trim_skipped", { ...fields, outcome: "skipped" });
    else this.o.log.info("estate_trim_skipped", { ...fields, outcome: "nothing" });
    for (const node of d.released) this.o.log.warn("estate_copy_released", { domain: c.domain, copy_node: node, why: "unheard from past the hold: it restores from a snapshot when it returns" });
  }
}
