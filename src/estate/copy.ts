// This data node's copy of the estate: estate.db, one applier per domain, and the check
// that decides whether the copy may be served (behind is served; wrong is not). It answers
// reads and executes writes for this node's router and for peers asking over rpc.
import type { Database } from "bun:sqlite";
import type { Clock, Timer } from "../clock.ts";
import type { Logger } from "../log.ts";
import { DomainApplier } from "./applier.ts";
import { openEstateDb, type EstateDb } from "./migrate.ts";
import { domainOfQuery, runQuery, type Query, type QueryName, type Results } from "./queries.ts";
import { decodeRecord, RECORD_VERSION, type StateRecord } from "./records.ts";
import type { Floor, ReadAnswer, WriteAnswer } from "./rpc.ts";
import { DOMAINS, type Domain } from "./schema.ts";
import { judgeCopy, type Judgement } from "./soundness.ts";
import type { StateLog } from "./statelog.ts";
import { restoreDomain, type SnapshotStore } from "./snapshot.ts";
import { rmSync } from "node:fs";

/**
 * Between two restore attempts of one domain that failed (no snapshot yet, the bucket
 * unreachable, a snapshot that does not join the log): each attempt downloads the whole
 * snapshot, so not at every 5 s check; half a minute still repairs within a minute or two
 * of the cause clearing.
 */
export const RESTORE_RETRY_MS = 30_000;

/**
 * How long an executor waits for its own applier to reach a record it just appended before
 * answering `pending`. A level copy applies in milliseconds; one still short after five
 * seconds is behind, and `pending` with the position is the honest answer.
 */
export const APPLY_WAIT_MS = 5_000;
/**
 * How long a copy waits to reach an asker's floor before saying it is behind. A record on
 * the log reaches a level copy in milliseconds; past two seconds the asker is better served
 * by the next data node, and two leaves most of the 10 s read budget for it.
 */
export const FLOOR_WAIT_MS = 2_000;
/**
 * How often the copy is judged. Each check is one stream-info call per domain; five seconds
 * keeps detection well inside the 30 s grace and the 60 s stall bound.
 */
export const CHECK_INTERVAL_MS = 5_000;

function stuckAt(status: DomainApplier["status"]): { stuck_at?: number } {
  return status.kind === "held" || status.kind === "stopped" ? { stuck_at: status.seq } : {};
}

const CLOSED_REASON = "this copy is closed (its node is stopping)";

export interface DomainHealth {
  applied: number;
  log_last: number | null;
  lag: number | null;
  state: Judgement["state"];
  in_service: boolean;
  reason?: string;
  /** The log position the applier is held or stopped at (what `crewlet estate skip` names). */
  stuck_at?: number;
}

export interface CopyOptions {
  path: string;
  stateLog: StateLog;
  clock: Clock;
  log: Logger;
  reads_version?: number;
  check_interval_ms?: number;
  undecodable_grace_ms?: number;
  stall_ms?: number;
  /** Called after a record is applied (the wake feed waits on it). */
  onApplied?: (domain: Domain, seq: number) => void;
  /** Where a copy below the log restores from; without it such a copy stays wrong. */
  snapshots?: SnapshotStore;
}

export class EstateCopy {
  readonly sqlite: Database;
  readonly db: EstateDb;
  readonly appliers: Record<Domain, DomainApplier>;
  private judgements: Record<Domain, Judgement>;
  private outOfService: Record<Domain, string | null> = { tracker: null, pages: null, chat: null };
  private logLast: Record<Domain, number | null> = { tracker: null, pages: null, chat: null };
  /** When each domain was last seen level or moving: a stall is counted from here. */
  private progressAt: Record<Domain, number>;
  private timer: Timer | null = null;
  private checking = false;
  /** A restore under way per domain, and when the last one failed (retried after RESTORE_RETRY_MS). */
  private restoring: Record<Domain, Promise<void> | null> = { tracker: null, pages: null, chat: null };
  private restoreFailedAt: Record<Domain, number | null> = { tracker: null, pages: null, chat: null };
  private restoreChain: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly o: CopyOptions) {
    const opened = openEstateDb(o.path);
    this.sqlite = opened.sqlite;
    this.db = opened.db;
    const mk = (domain: Domain) =>
      new DomainApplier({
        domain,
        sqlite: this.sqlite,
        db: this.db,
        stateLog: o.stateLog,
        clock: o.clock,
        log: o.log,
        reads_version: o.reads_version ?? RECORD_VERSION,
        onApplied: (seq) => o.onApplied?.(domain, seq),
      });
    this.appliers = { tracker: mk("tracker"), pages: mk("pages"), chat: mk("chat") };
    const now = o.clock.now();
    this.progressAt = { tracker: now, pages: now, chat: now };
    this.judgements = { tracker: { state: "unknown", lag: null }, pages: { state: "unknown", lag: null }, chat: { state: "unknown", lag: null } };
  }

  start(): void {
    for (const d of DOMAINS) this.appliers[d].start();
    this.timer = this.o.clock.setInterval(() => void this.check(), this.o.check_interval_ms ?? CHECK_INTERVAL_MS);
    // Judged at once, not after the first interval: a copy below the log (a node back after
    // the trim let it go, or new to a trimmed fleet) goes out of service and starts its
    // restore before the boot's own writes (the seed) are sent to it, so they go to a peer
    // instead of each waiting out APPLY_WAIT_MS on an applier stopped at the gap.
    void this.check();
  }

  async stop(): Promise<void> {
    // Answer "out of service" from here on rather than reach a database being closed.
    this.closed = true;
    this.timer?.cancel();
    await Promise.all(DOMAINS.map((d) => this.restoring[d]?.catch(() => undefined)));
    await Promise.all(DOMAINS.map((d) => this.appliers[d].stop()));
    this.sqlite.close();
  }

  inService(domain: Domain): boolean {
    return !this.closed && this.outOfService[domain] === null;
  }
  outOfServiceReason(domain: Domain): string | null {
    return this.closed ? CLOSED_REASON : this.outOfService[domain];
  }
  applied(domain: Domain): number {
    return this.appliers[domain].applied;
  }

  /** Judges every domain once; takes a wrong copy out of service and a sound one back in. */
  async check(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      await Promise.all(DOMAINS.map((d) => this.checkDomain(d)));
    } finally {
      this.checking = false;
    }
  }

  private async checkDomain(domain: Domain): Promise<void> {
    const applier = this.appliers[domain];
    // A restore owns the domain until it ends: nothing here may restart its applier.
    if (this.restoring[domain]) return;
    let logState: { first_seq: number; last_seq: number; created: string } | null = null;
    try {
      logState = await this.o.stateLog.position(domain);
      this.logLast[domain] = logState.last_seq;
    } catch {
      // The log did not answer: judged on local facts alone this time.
    }
    // Below the log: records this copy never applied were trimmed away, and applying more
    // cannot fix it. With a snapshot store, restore from a healthy copy's snapshot.
    if (logState !== null && logState.first_seq > applier.applied + 1 && logState.last_seq > applier.applied && this.o.snapshots) {
      const failed = this.restoreFailedAt[domain];
      if (failed === null || this.o.clock.now() - failed >= RESTORE_RETRY_MS) {
        // One restore at a time per copy (each downloads the whole snapshot), in turn.
        const run = this.restoreChain.then(() => this.restore(domain, logState));
        this.restoreChain = run.catch(() => undefined);
        this.restoring[domain] = run.finally(() => {
          this.restoring[domain] = null;
        });
      }
      // Nothing else is tried on a copy below the log: its applier cannot help it (a
      // restart would stop at the same gap) and the restore owns the applier from here.
      if (this.outOfService[domain] === null) {
        this.outOfService[domain] = `below the log: it starts at ${logState.first_seq}, this copy applied only to ${applier.applied}`;
        this.o.log.error("estate_copy_not_served", { domain, reason: this.outOfService[domain], applied: applier.applied });
      }
      return;
    }
    const now = this.o.clock.now();
    if (applier.lastMovedAt > this.progressAt[domain]) this.progressAt[domain] = applier.lastMovedAt;
    if (logState !== null && logState.last_seq <= applier.applied) this.progressAt[domain] = now;
    const j = judgeCopy({
      applier: applier.status,
      applied_seq: applier.applied,
      log: logState,
      last_moved_ms: this.progressAt[domain],
      now_ms: now,
      ...(this.o.stall_ms !== undefined ? { stall_ms: this.o.stall_ms } : {}),
      ...(this.o.undecodable_grace_ms !== undefined ? { undecodable_grace_ms: this.o.undecodable_grace_ms } : {}),
    });
    if (j.state === "unknown") return;
    this.judgements[domain] = j;
    if (j.state === "wrong") {
      if (this.outOfService[domain] === null) {
        this.outOfService[domain] = j.reason;
        this.o.log.error("estate_copy_not_served", { domain, reason: j.reason, applied: applier.applied, lag: j.lag });
      }
      // The repair attempt: a stopped or holding applier tries the record again (a
      // transient failure clears; a build that cannot read it holds again); a stalled one
      // starts afresh from its checkpoint.
      if (applier.status.kind === "running") void applier.restart();
      else applier.retry();
      return;
    }
    if (this.outOfService[domain] !== null) {
      this.outOfService[domain] = null;
      this.o.log.info("estate_copy_served", { domain, applied: applier.applied, lag: j.lag });
    }
  }

  /**
   * Restores `domain` from the stored snapshot, then the applier replays the log's tail from
   * the snapshot's position. Nothing is destroyed before the restore is in hand: the
   * snapshot is downloaded (digest checked) and judged first — it must follow this log's
   * generation, join the log (its position at least the log's first record − 1), be ahead
   * of this copy and match this build's schema; only then is the applier stopped and the
   * domain replaced in one immediate transaction. Out of service meanwhile (its callers are
   * served by peers); the check brings it back once it reads sound.
   */
  private async restore(domain: Domain, log: { first_seq: number; last_seq: number; created: string }): Promise<void> {
    const snapshots = this.o.snapshots!;
    const applier = this.appliers[domain];
    const from = applier.applied;
    const reason = `below the log: it starts at ${log.first_seq}, this copy applied only to ${from}; restoring from a snapshot`;
    if (this.outOfService[domain] === null) this.o.log.error("estate_copy_not_served", { domain, reason, applied: from });
    this.outOfService[domain] = reason;
    this.o.log.warn("estate_copy_restore_started", { domain, applied: from, log_first: log.first_seq, log_last: log.last_seq });
    let fetched: Awaited<ReturnType<SnapshotStore["fetch"]>> = null;
    try {
      fetched = await snapshots.fetch();
      if (!fetched) throw new Error("no snapshot is stored yet (the trim uploads one before it purges)");
      const m = fetched.meta;
      const position = m.positions[domain];
      if (position === undefined) throw new Error(`the snapshot holds no ${domain} checkpoint`);
      if (m.generations[domain] !== log.created) throw new Error(`the snapshot follows log generation ${m.generations[domain]}, the log is ${log.created}`);
      if (position + 1 < log.first_seq) throw new Error(`the snapshot is at ${position}, the log starts at ${log.first_seq}: it does not join the log (a newer one is due)`);
      if (position <= from) throw new Error(`the snapshot is at ${position}, not ahead of this copy (${from})`);
      const ours = this.sqlite.query<{ m: number | null }, []>("SELECT MAX(id) AS m FROM estate_migrations").get()?.m ?? 0;
      if (m.migration !== ours) throw new Error(`the snapshot's schema is at migration ${m.migration}, this copy's at ${ours}`);
      if (this.closed) return;
      await applier.suspend();
      try {
        if (this.closed) return;
        restoreDomain(this.sqlite, fetched.path, domain);
      } finally {
        if (!this.closed) applier.resume();
      }
      this.restoreFailedAt[domain] = null;
      this.o.log.info("estate_copy_restored", { domain, from, to: position, log_first: log.first_seq, snapshot_taken_by: m.taken_by, snapshot_taken_at: m.taken_at });
    } catch (err) {
      this.restoreFailedAt[domain] = this.o.clock.now();
      this.o.log.error("estate_copy_restore_failed", { domain, applied: from, error: err as Error, retry_in_ms: RESTORE_RETRY_MS });
    } finally {
      if (fetched) rmSync(fetched.path, { force: true });
    }
  }

  health(): Record<Domain, DomainHealth> {
    const out = {} as Record<Domain, DomainHealth>;
    for (const d of DOMAINS) {
      const applied = this.appliers[d].applied;
      const last = this.logLast[d];
      const j = this.judgements[d];
      out[d] = {
        applied,
        log_last: last,
        lag: last === null ? null : Math.max(0, last - applied),
        state: j.state,
        in_service: this.inService(d),
        ...(this.outOfService[d] !== null ? { reason: this.outOfService[d]! } : {}),
        ...stuckAt(this.appliers[d].status),
      };
    }
    return out;
  }

  // ---- answering ---------------------------------------------------------------------

  async read(query: Query, floor: Floor): Promise<ReadAnswer> {
    const domain = domainOfQuery(query.q);
    const reason = this.outOfServiceReason(domain);
    if (reason !== null) return { status: "out_of_service", reason };
    const applier = this.appliers[domain];
    const need = floor[domain];
    if (applier.applied < need && !(await applier.waitApplied(need, FLOOR_WAIT_MS))) {
      return { status: "behind", applied: applier.applied, floor: need };
    }
    return { status: "ok", result: runQuery(this.db, this.sqlite, query) as Results[QueryName] };
  }

  /** Appends a record and waits for this copy to apply it. */
  async write(raw: unknown): Promise<WriteAnswer> {
    const domain = (raw as { domain?: unknown } | null)?.domain;
    if (domain !== "tracker" && domain !== "pages" && domain !== "chat") return { status: "invalid", message: "record.domain: expected tracker, pages or chat" };
    // The same decoder the applier uses: nothing this build could not apply is appended.
    const decoded = decodeRecord(domain, new TextEncoder().encode(JSON.stringify(raw)), RECORD_VERSION);
    if (!decoded.ok) return { status: "invalid", message: decoded.error, ...(decoded.field ? { field: decoded.field } : {}), code: "invalid_record" };
    return this.writeRecord(decoded.record);
  }

  async writeRecord(record: StateRecord): Promise<WriteAnswer> {
    const domain = record.domain;
    const reason = this.outOfServiceReason(domain);
    if (reason !== null) return { status: "out_of_service", reason };
    const applier = this.appliers[domain];
    const prior = applier.outcomeOf(record.op_id);
    if (prior) return { status: "applied", position: prior.position, outcome: prior.outcome };
    const appended = await this.o.stateLog.append(record);
    if (!appended.ok && "refused" in appended) return { status: "invalid", message: appended.error, ...appended.refused };
    if (!appended.ok && "notSent" in appended) return { status: "out_of_service", reason: `the ${domain} log cannot be reached from here: ${appended.error}` };
    if (!appended.ok) return { status: "unknown", error: `the ${domain} log did not answer: ${appended.error}` };
    if (await applier.waitApplied(appended.seq, APPLY_WAIT_MS)) {
      const done = applier.outcomeOf(record.op_id);
      if (done) return { status: "applied", position: done.position, outcome: done.outcome };
    }
    return { status: "pending", position: appended.seq };
  }
}
