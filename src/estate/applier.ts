// One domain's applier: follows the domain's log in order from this copy's applied
// position and applies each record in ONE SQLite transaction together with the new
// position, so the rows and the checkpoint never disagree, whatever kills the process.
// The checkpoint lives in estate.db, not in a broker consumer: the copy says where it is.
//
// It never skips a record. One it cannot decode is held (the copy stays where it is and
// says so); one it cannot apply stops it. Both are facts the soundness check reads.
import type { Database } from "bun:sqlite";
import { eq } from "drizzle-orm";
import { ConsumerEvents, DeliverPolicy, ReplayPolicy, type ConsumerMessages } from "nats";
import type { Clock, Timer } from "../clock.ts";
import type { Logger } from "../log.ts";
import { stateLogStream } from "../queue/topics.ts";
import { applyRecord, type Outcome } from "./apply.ts";
import type { EstateDb } from "./migrate.ts";
import { decodeRecord, RECORD_VERSION } from "./records.ts";
import { checkpoints, ops, type Domain } from "./schema.ts";
import type { StateLog } from "./statelog.ts";

/**
 * Records asked of the broker per pull. Bounds memory held ahead of the applier while a
 * copy catches up; at ~50 µs an apply, 256 is a few ms of work per round trip.
 */
const PULL_BATCH_MSGS = 256;
/**
 * How long one pull waits on the broker. The client sends idle heartbeats at half of it and
 * judges the consumer lost after two missed, so 10 s finds a consumer whose server left in
 * ~10 s (the client's default, 30 s, took up to a minute); a pull renewed every 10 s while
 * idle costs nothing worth counting.
 */
const PULL_EXPIRES_MS = 10_000;
/** The ledger key of a record passed over by a skip marker: one per (domain, position), the same on every copy. */
export function skippedOpId(domain: Domain, seq: number): string {
  return `skipped-${domain}-${seq}`;
}

/** Wait between restarts of a loop the broker ended (reconnect, leader change). */
const RESTART_BACKOFF_MS = 1_000;

export type ApplierStatus =
  | { kind: "starting" }
  | { kind: "running" }
  /** Stopped at a record it could not apply (or a record missing from the log). */
  | { kind: "stopped"; seq: number; error: string }
  /** Holding a record it cannot decode, since `since_ms`. */
  | { kind: "held"; seq: number; error: string; since_ms: number }
  /** Its checkpoint names another stream: a log rebuilt underneath this copy. */
  | { kind: "foreign_checkpoint"; error: string }
  | { kind: "closed" };

export interface ApplierOptions {
  domain: Domain;
  sqlite: Database;
  db: EstateDb;
  stateLog: StateLog;
  clock: Clock;
  log: Logger;
  /** Newest record format this build reads (tests start an older build by lowering it). */
  reads_version?: number;
  /** Called after each applied record, outside the transaction. */
  onApplied?: (seq: number) => void;
}

interface Waiter {
  seq: number;
  resolve: (applied: boolean) => void;
  timer: Timer;
}

export class DomainApplier {
  readonly domain: Domain;
  private appliedSeq = 0;
  private _status: ApplierStatus = { kind: "starting" };
  private waiters: Waiter[] = [];
  private iter: ConsumerMessages | null = null;
  private loop: Promise<void> | null = null;
  private closed = false;
  /** Stopped for a restore from a snapshot: the loop ends and does not start until resume(). */
  private suspended = false;
  /** The record being held and since when: kept across restarts so the grace is not reset. */
  private held: { seq: number; since_ms: number } | null = null;
  /** Clock ms of the last time the position moved (the stall judgement reads it). */
  lastMovedAt: number;

  constructor(private readonly o: ApplierOptions) {
    this.domain = o.domain;
    this.lastMovedAt = o.clock.now();
    this.appliedSeq = this.readCheckpoint()?.applied_seq ?? 0;
  }

  get applied(): number {
    return this.appliedSeq;
  }
  get status(): ApplierStatus {
    return this._status;
  }

  /** Starts following the log (idempotent while a loop runs). */
  start(): void {
    if (this.closed || this.suspended || this.loop) return;
    this.loop = this.run().finally(() => {
      this.loop = null;
    });
  }

  /** Starts again after a stop or a hold: the soundness check's repair attempt. */
  retry(): void {
    if (this._status.kind === "stopped" || this._status.kind === "held" || this._status.kind === "foreign_checkpoint") this.start();
  }

  /** Ends the loop that is following the log, e.g. a stalled one, so retry() can begin afresh. */
  async restart(): Promise<void> {
    this.iter?.stop();
    await this.loop;
    this.start();
  }

  /**
   * Ends the loop following the log and keeps it ended (a restore replaces the domain's rows
   * and checkpoint underneath): resolves once no apply can run.
   */
  async suspend(): Promise<void> {
    this.suspended = true;
    this.iter?.stop();
    await this.loop;
  }

  /** After a restore: the position is the checkpoint's again, and the loop follows the log from it. */
  resume(): void {
    this.suspended = false;
    this.appliedSeq = this.readCheckpoint()?.applied_seq ?? 0;
    this.held = null;
    this._status = { kind: "starting" };
    this.lastMovedAt = this.o.clock.now();
    this.wake();
    this.start();
  }

  /** Resolves true once this copy has applied `seq`, false after `timeout_ms`. */
  waitApplied(seq: number, timeout_ms: number): Promise<boolean> {
    if (this.appliedSeq >= seq) return Promise.resolve(true);
    if (this.closed) return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiter: Waiter = {
        seq,
        resolve,
        timer: this.o.clock.setTimeout(() => {
          this.waiters = this.waiters.filter((w) => w !== waiter);
          resolve(false);
        }, timeout_ms),
      };
      this.waiters.push(waiter);
    });
  }

  /** The outcome the ledger holds for an op id, with its position, or null. */
  outcomeOf(op_id: string): { position: number; outcome: Outcome } | null {
    const row = this.o.sqlite.query<{ position: number; outcome: string }, [string]>("SELECT position, outcome FROM estate_ops WHERE op_id = ?").get(op_id);
    return row ? { position: row.position, outcome: JSON.parse(row.outcome) as Outcome } : null;
  }

  async stop(): Promise<void> {
    this.closed = true;
    this.iter?.stop();
    await this.loop;
    this._status = { kind: "closed" };
    for (const w of this.waiters) {
      w.timer.cancel();
      w.resolve(false);
    }
    this.waiters = [];
  }

  private readCheckpoint() {
    return this.o.db.select().from(checkpoints).where(eq(checkpoints.domain, this.domain)).get();
  }

  private async run(): Promise<void> {
    const stream = stateLogStream(this.domain);
    while (!this.closed && !this.suspended) {
      try {
        if (!(await this.checkStream(stream))) return;
        // A held record stays the copy's state until it is applied, across restarts.
        if (this.held === null) this._status = { kind: "running" };
        const consumer = await this.o.stateLog.jetstream.consumers.get(stream, {
          deliver_policy: DeliverPolicy.StartSequence,
          opt_start_seq: this.appliedSeq + 1,
          replay_policy: ReplayPolicy.Instant,
        });
        const iter = await consumer.consume({ max_messages: PULL_BATCH_MSGS, expires: PULL_EXPIRES_MS });
        this.iter = iter;
        if (this.closed) iter.stop();
        // A consumer that stopped sending heartbeats (its server left the cluster) is given
        // up here and a new one follows the log from this copy's position, instead of the
        // copy waiting out the stall bound (seen: 60 s behind after a member's graceful stop).
        void this.watchHeartbeats(iter);
        for await (const m of iter) {
          if (this.suspended || this.closed) break;
          if (m.seq <= this.appliedSeq) continue;
          if (!this.applyOne(m.seq, m.data) && !(await this.skipIfMarked(m.seq))) {
            iter.stop();
            return;
          }
        }
      } catch (err) {
        if (this.closed) return;
        this.o.log.warn("estate_applier_restarting", { domain: this.domain, error: (err as Error).message });
      } finally {
        this.iter = null;
      }
      if (this.closed || this.suspended) return;
      await this.o.clock.sleep(RESTART_BACKOFF_MS);
    }
  }

  private async watchHeartbeats(iter: ConsumerMessages): Promise<void> {
    try {
      for await (const s of await iter.status()) {
        if (s.type === ConsumerEvents.HeartbeatsMissed && typeof s.data === "number" && s.data >= 2) {
          if (this.iter === iter) {
            this.o.log.warn("estate_applier_restarting", { domain: this.domain, error: `the log's consumer missed ${s.data} heartbeats` });
            iter.stop();
          }
          return;
        }
      }
    } catch {
      // the iterator ended
    }
  }

  /** Records the log this copy follows on first start; refuses a log rebuilt underneath it. */
  private async checkStream(stream: string): Promise<boolean> {
    const pos = await this.o.stateLog.position(this.domain);
    const cp = this.readCheckpoint();
    if (!cp) {
      this.o.db.insert(checkpoints).values({ domain: this.domain, stream, stream_created: pos.created, applied_seq: 0 }).run();
      return true;
    }
    if (cp.stream !== stream || cp.stream_created !== pos.created) {
      const error = `checkpoint names ${cp.stream} created ${cp.stream_created}; the log is ${stream} created ${pos.created}`;
      this._status = { kind: "foreign_checkpoint", error };
      return false;
    }
    return true;
  }

  /** Applies one record; false when the applier must stop here (held or stopped). */
  private applyOne(seq: number, data: Uint8Array): boolean {
    if (seq !== this.appliedSeq + 1) {
      this._status = { kind: "stopped", seq: this.appliedSeq + 1, error: `record ${this.appliedSeq + 1} is gone from the log (next is ${seq})` };
      this.o.log.error("estate_apply_failed", { domain: this.domain, seq: this.appliedSeq + 1, error: this._status.error });
      return false;
    }
    const decoded = decodeRecord(this.domain, data, this.o.reads_version ?? RECORD_VERSION);
    if (!decoded.ok) {
      const first = this.held?.seq !== seq;
      if (first) this.held = { seq, since_ms: this.o.clock.now() };
      this._status = { kind: "held", seq, error: decoded.error, since_ms: this.held!.since_ms };
      if (first) this.o.log.warn("estate_record_undecodable", { domain: this.domain, seq, error: decoded.error });
      return false;
    }
    try {
      this.o.sqlite.transaction(() => {
        applyRecord(this.o.db, decoded.record, seq);
        this.o.db.update(checkpoints).set({ applied_seq: seq }).where(eq(checkpoints.domain, this.domain)).run();
      })();
    } catch (err) {
      this._status = { kind: "stopped", seq, error: (err as Error).message };
      this.o.log.error("estate_apply_failed", { domain: this.domain, seq, op_id: decoded.record.op_id, error: (err as Error).message });
      return false;
    }
    this.appliedSeq = seq;
    this.held = null;
    this.lastMovedAt = this.o.clock.now();
    if (this._status.kind !== "running") this._status = { kind: "running" };
    this.wake();
    this.o.onApplied?.(seq);
    return true;
  }

  /**
   * The record at `seq` could not be applied (held or stopped): when the log holds an
   * operator's skip marker for it, pass it over — its op recorded as skipped at `seq`, the
   * checkpoint moved, no other row touched — exactly as every other copy does, so digests
   * still agree. True when skipped (the loop goes on), false to stay where it is.
   */
  private async skipIfMarked(seq: number): Promise<boolean> {
    if (seq !== this.appliedSeq + 1) return false;
    let found;
    try {
      found = await this.o.stateLog.skipMarker(this.domain, seq);
    } catch (err) {
      this.o.log.warn("estate_skip_lookup_failed", { domain: this.domain, seq, error: (err as Error).message });
      return false;
    }
    if (!found) return false;
    const outcome = { ok: false, code: "skipped", message: found.marker.reason, skipped_by: found.marker.actor, marker_op_id: found.op_id };
    try {
      this.o.sqlite.transaction(() => {
        this.o.db.insert(ops).values({ op_id: skippedOpId(this.domain, seq), domain: this.domain, position: seq, outcome: JSON.stringify(outcome) }).onConflictDoNothing().run();
        this.o.db.update(checkpoints).set({ applied_seq: seq }).where(eq(checkpoints.domain, this.domain)).run();
      })();
    } catch (err) {
      this.o.log.error("estate_skip_failed", { domain: this.domain, seq, error: (err as Error).message });
      return false;
    }
    this.o.log.warn("estate_record_skipped", { domain: this.domain, seq, marker_seq: found.seq, actor: found.marker.actor, reason: found.marker.reason });
    this.appliedSeq = seq;
    this.held = null;
    this.lastMovedAt = this.o.clock.now();
    this._status = { kind: "running" };
    this.wake();
    this.o.onApplied?.(seq);
    return true;
  }

  private wake(): void {
    if (this.waiters.length === 0) return;
    const done = this.waiters.filter((w) => w.seq <= this.appliedSeq);
    if (done.length === 0) return;
    this.waiters = this.waiters.filter((w) => w.seq > this.appliedSeq);
    for (const w of done) {
      w.timer.cancel();
      w.resolve(true);
    }
  }
}
