// Removed-seat mailbox retirement (spec: Seat Ownership § The removed seat). A pure judge
// (one record and what the tick knows in, one action out, table-tested) and the sweep that
// carries the actions out, one maintenance tick at a time.
//
// The rules, in the spec's words where they bind:
//  - Unknown is never absent: the roster is the agent seats of the revision the fleet's
//    activation pointer names, read on a node that has applied it. An unreadable pointer, a
//    node behind the current revision, an unreadable registry or seat lease: the tick stamps
//    nothing and retires nothing, and logs why.
//  - The 24 h clock starts when a sweep first observes the absence, so a retirement is
//    never early.
//  - A seat still held is kept (seat_mailbox_retirement_held, refused: held | protocol).
//  - The retirement claims the seat's own lease under an owner of its own, and never acts
//    for longer than half the lease TTL, so its last delete lands while the claim still
//    excludes every node; the lease is released the moment it finishes.
//  - Every record write is a compare-and-set; a retirement is marked before it deletes; a
//    retirement that cannot delete a subscription is unmarked and retried next tick; a
//    sweep finding its record changed after its deletes (a node took it over) restores the
//    inbox; a mark left by a dead sweep is resumed once 15 minutes old.
//  - The seat's coding runs are ended first, under that same lease (endRuns).
import type { Clock } from "../clock.ts";
import { CasConflict, type KvSlot, type LeaseStore } from "../coord/contract.ts";
import type { Logger } from "../log.ts";
import type { Queue } from "../queue/contract.ts";
import { allSeatMailboxes, seatMailboxes } from "../queue/topics.ts";
import { seatKey } from "../seat/presence.ts";
import type { EventSink } from "../agent/events.ts";
import type { RunStore, RunWriter } from "../sandbox/runs.ts";
import { bounded, CallBoundExceeded } from "./bound.ts";
import { decodeMailboxRecord, encodeRecord, RETIREMENT_BUDGET_MS, type MailboxRecord } from "./mailbox-registry.ts";

const HOUR_MS = 60 * 60 * 1000;
/**
 * Spec: a day. Long enough for a seat restored within a working day to come back to the
 * mail it was sent while it was gone; short enough that mail for a seat nobody runs is not
 * kept for more than a day. Tests shorten it only through the test-only setting.
 */
export const MAILBOX_GRACE_MS = 24 * HOUR_MS;
/** A mark this old was left by a sweep that died: a later sweep resumes it (spec: 15 min —
 * one maintenance tick, far past the 30 s a live retirement may take). */
export const RETIREMENT_RESUME_AFTER_MS = 15 * 60 * 1000;

export type Action =
  | { kind: "none" }
  | { kind: "returned" }
  | { kind: "stamp" }
  | { kind: "retire" }
  | { kind: "resume" };

/** One record's action this tick. `inRoster` is known (an unknown roster never reaches here). */
export function judgeRecord(rec: MailboxRecord, inRoster: boolean, now_ms: number, grace_ms: number): Action {
  if (rec.retiring !== null) {
    // In flight elsewhere, or left by a dead sweep. A seat added back waits on it (the
    // registering node takes it over after twice the budget); a stale one is resumed only
    // while the seat is still gone.
    if (!inRoster && now_ms - rec.retiring.since >= RETIREMENT_RESUME_AFTER_MS) return { kind: "resume" };
    return { kind: "none" };
  }
  if (inRoster) return rec.absent_since !== null ? { kind: "returned" } : { kind: "none" };
  if (rec.absent_since === null) return { kind: "stamp" };
  if (now_ms - rec.absent_since >= grace_ms) return { kind: "retire" };
  return { kind: "none" };
}

export type Roster = { ok: true; seats: ReadonlySet<string>; epoch: number } | { ok: false; reason: string };

export interface SweepOptions {
  /** The retirement's own owner (`{node}:retire-{random}`), never a seat host's. */
  owner: string;
  node_id: string;
  registry: KvSlot;
  leases: LeaseStore;
  queue: Pick<Queue, "deleteMailbox" | "ensureMailbox" | "listMailboxes">;
  /** The roster, judged fresh each tick. */
  roster: () => Promise<Roster>;
  /** The seat lease TTL in force: the retirement acts for at most half of it. */
  lease_ttl_ms: () => number;
  grace_ms?: number;
  /** The fleet's run records: a removed seat's coding runs are ended before its mailboxes go. */
  runs?: Pick<RunStore, "list" | "remove"> | null;
  /** Where a run's loss is announced (sandbox_run_failed). */
  events?: EventSink | null;
  /** Bound on each broker and registry call (see bound.ts); defaults to 10 s. */
  call_bound_ms?: () => number;
  clock: Clock;
  log: Logger;
}

/** Default per-call bound: a leader election (~4 s) twice over. */
const CALL_BOUND_MS = 10_000;

export interface SweepSummary {
  skipped?: string;
  registered: number;
  discovered: number;
  stamped: number;
  returned: number;
  retired: number;
  held: number;
  failed: number;
}

export class MailboxSweep {
  constructor(private readonly o: SweepOptions) {}

  private get grace_ms(): number {
    return this.o.grace_ms ?? MAILBOX_GRACE_MS;
  }

  /** The tick's watchdog stamp, set per tick. */
  private beat: () => void = () => undefined;

  /** Every broker and registry call of a tick goes through here: the watchdog is stamped
   *  before it and the call is bounded, so no one unit of work outlives the threshold. */
  private call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    this.beat();
    return bounded(fn(), this.o.call_bound_ms?.() ?? CALL_BOUND_MS, this.o.clock, what);
  }

  async tick(beat: () => void = () => undefined): Promise<SweepSummary> {
    this.beat = beat;
    const sum: SweepSummary = { registered: 0, discovered: 0, stamped: 0, returned: 0, retired: 0, held: 0, failed: 0 };
    const roster = await this.o.roster().catch((err): Roster => ({ ok: false, reason: `roster unreadable: ${(err as Error).message}` }));
    if (!roster.ok) return this.skip(sum, roster.reason);
    let handles: string[];
    try {
      handles = await this.call("registry keys", () => this.o.registry.keys());
    } catch (err) {
      return this.skip(sum, `registry unreadable: ${(err as Error).message}`);
    }
    const known = new Set(handles);
    // Seats in the company with no record (a node's registration failed): registered, so
    // they can be retired if the seat is ever removed.
    for (const h of roster.seats) {
      if (known.has(h)) continue;
      if (await this.create(h, null)) sum.registered++;
      known.add(h);
    }
    // The broker is the backstop: a mailbox with no record whose seat is not in the company
    // is registered and stamped absent in the same tick. A listing that fails only
    // postpones the discovery.
    let boxes: Map<string, Set<string>> | null = null;
    try {
      const refs = await this.call("mailbox listing", () => this.o.queue.listMailboxes());
      boxes = new Map();
      for (const m of refs) boxes.set(m.handle, (boxes.get(m.handle) ?? new Set()).add(m.kind));
      const listed = new Set(boxes.keys());
      for (const h of listed) {
        if (known.has(h) || roster.seats.has(h)) continue;
        const now = this.o.clock.now();
        if (await this.create(h, now)) {
          sum.discovered++;
          this.o.log.info("seat_mailbox_discovered", { seat: h, retire_at: new Date(now + this.grace_ms).toISOString() });
        }
        known.add(h);
      }
    } catch (err) {
      this.o.log.warn("seat_mailbox_listing_failed", { error: err as Error });
    }
    for (const h of handles) {
      beat();
      try {
        await this.judgeOne(h, roster.seats.has(h), sum, boxes);
      } catch (err) {
        sum.failed++;
        this.o.log.warn("seat_mailbox_sweep_failed", { seat: h, error: err as Error });
      }
    }
    return sum;
  }

  private skip(sum: SweepSummary, reason: string): SweepSummary {
    this.o.log.warn("seat_mailbox_sweep_skipped", { reason });
    return { ...sum, skipped: reason };
  }

  private async create(handle: string, absent_since: number | null): Promise<boolean> {
    try {
      await this.call("registry create", () => this.o.registry.create(handle, encodeRecord({ handle, registered_at: this.o.clock.now(), absent_since, retiring: null })));
      return true;
    } catch (err) {
      if (!(err instanceof CasConflict)) this.o.log.warn("seat_mailbox_unregistered", { seat: handle, error: err as Error });
      return false;
    }
  }

  private async judgeOne(handle: string, inRoster: boolean, sum: SweepSummary, boxes: Map<string, Set<string>> | null): Promise<void> {
    const e = await this.call("registry get", () => this.o.registry.get(handle));
    if (!e) return;
    const rec = decodeMailboxRecord(e);
    if (!rec) {
      this.o.log.warn("seat_mailbox_record_unreadable", { seat: handle });
      return;
    }
    // A seat in the company whose record is settled must have every mailbox it is given: a
    // retiring sweep that died after its delete landed on a re-added seat's new mailbox
    // could not restore it, so the broker's listing is checked here too.
    if (inRoster && rec.retiring === null && boxes !== null) {
      const have = boxes.get(handle) ?? new Set<string>();
      const missing = seatMailboxes(handle).filter((b) => !have.has(b.subject.slice(b.subject.lastIndexOf(".") + 1)));
      if (missing.length > 0) {
        for (const b of missing) await this.call(`create ${b.group}`, () => this.o.queue.ensureMailbox(b.subject, b.group));
        this.o.log.warn("seat_mailbox_restored_missing", { seat: handle, groups: missing.map((b) => b.group) });
      }
    }
    const now = this.o.clock.now();
    const action = judgeRecord(rec, inRoster, now, this.grace_ms);
    switch (action.kind) {
      case "none":
        return;
      case "returned":
        if (await this.cas(handle, { ...rec, absent_since: null }, e.revision)) {
          sum.returned++;
          this.o.log.info("seat_mailbox_returned", { seat: handle, absent_since: new Date(rec.absent_since!).toISOString() });
        }
        return;
      case "stamp":
        if (await this.cas(handle, { ...rec, absent_since: now }, e.revision)) {
          sum.stamped++;
          this.o.log.info("seat_mailbox_absent", { seat: handle, retire_at: new Date(now + this.grace_ms).toISOString() });
        }
        return;
      case "retire":
      case "resume": {
        const out = await this.retire(handle, rec, e.revision, action.kind === "resume");
        if (out === "retired") sum.retired++;
        else if (out === "held") sum.held++;
        else if (out === "failed") sum.failed++;
        return;
      }
    }
  }

  private async cas(handle: string, rec: MailboxRecord, revision: number): Promise<number | null> {
    try {
      return await this.call("registry update", () => this.o.registry.update(handle, encodeRecord(rec), revision));
    } catch (err) {
      if (err instanceof CasConflict) return null;
      throw err;
    }
  }

  private async afterLateDelete(handle: string): Promise<void> {
    try {
      const e = await this.o.registry.get(handle);
      const rec = e ? decodeMailboxRecord(e) : null;
      if (rec && rec.retiring === null) await this.restore(handle);
    } catch (err) {
      this.o.log.warn("seat_mailbox_restore_failed", { seat: handle, error: err as Error });
    }
  }

  /** Creates the seat's mailboxes again (idempotent): those it is given go together. */
  private async restore(handle: string): Promise<void> {
    for (const box of seatMailboxes(handle)) await this.call(`restore ${box.group}`, () => this.o.queue.ensureMailbox(box.subject, box.group));
    this.o.log.warn("seat_mailbox_retirement_restored", { seat: handle });
  }

  /**
   * Ends every run the seat still has, under the seat lease this retirement holds: each
   * loss announced (sandbox_run_failed, reason seat_removed), each record deleted, which is
   * what the run's supervisor hears as its end. A run that cannot be ended throws, and the
   * retirement is unmarked and retried with the runs already ended gone.
   */
  private async endRuns(handle: string, writer: RunWriter, deadline: number): Promise<void> {
    const runs = this.o.runs;
    if (!runs) return;
    const { runs: live, invalid } = await this.call("runs listing", () => runs.list(handle));
    if (invalid.length > 0) throw new Error(`run records that cannot be read: ${invalid.map((i) => i.key).join(", ")}`);
    for (const r of live) {
      if (this.o.clock.now() >= deadline) throw new Error(`retirement budget spent before run ${r.id} was ended`);
      await this.call(`end run ${r.id}`, () => runs.remove(handle, r.id, writer));
      if (r.state !== "done") this.o.events?.emit("sandbox_run_failed", { seat: handle, run: r.id, reason: "seat_removed", node: this.o.node_id });
      this.o.log.info("sandbox_run_ended", { seat: handle, run: r.id, state: r.state, reason: "seat_removed" });
    }
  }

  /** One retirement under the seat's own lease. */
  private async retire(handle: string, rec: MailboxRecord, revision: number, resuming: boolean): Promise<"retired" | "held" | "failed" | "lost"> {
    const key = seatKey(handle);
    // Unknown is never absent: a lease that cannot be read stops the retirement.
    const view = await this.call("seat lease get", () => this.o.leases.get(key));
    if (view && view.live && view.epoch > 0) {
      this.o.log.info("seat_mailbox_retirement_held", { seat: handle, refused: "held", holder: view.owner });
      return "held";
    }
    const ttl_ms = this.o.lease_ttl_ms();
    const claimed = await this.call("seat lease claim", () => this.o.leases.acquire(key, { owner: this.o.owner, preferred: this.o.node_id, ttl_ms, gate: true, meta: { retiring: true } }));
    if (!claimed.ok) {
      if (claimed.rule === "held") this.o.log.info("seat_mailbox_retirement_held", { seat: handle, refused: "held", holder: claimed.holder });
      else if (claimed.rule === "protocol") this.o.log.info("seat_mailbox_retirement_held", { seat: handle, refused: "protocol", floor: claimed.floor });
      else this.o.log.warn("seat_mailbox_retirement_unknown", { seat: handle, error: claimed.error });
      return claimed.rule === "unknown" ? "failed" : "held";
    }
    const started = this.o.clock.now();
    // Half the lease TTL, and never past the retirement's own budget.
    const deadline = started + Math.min(Math.floor(ttl_ms / 2), RETIREMENT_BUDGET_MS);
    const epoch = claimed.lease.epoch;
    try {
      // The mark, before any delete.
      const marked = await this.cas(handle, { ...rec, retiring: { owner: this.o.owner, since: started } }, revision);
      if (marked === null) return "lost";
      if (resuming) this.o.log.warn("seat_mailbox_retirement_resumed", { seat: handle, from: rec.retiring?.owner ?? null, marked_at: rec.retiring ? new Date(rec.retiring.since).toISOString() : null });
      const boxes = allSeatMailboxes(handle);
      try {
        // Its coding runs first: once the control and inbox subjects are gone nothing could
        // reach them again (spec: "A retirement ends the seat's coding runs first").
        await this.endRuns(handle, { owner: this.o.owner, epoch }, deadline);
        for (const box of boxes) {
          if (this.o.clock.now() >= deadline) throw new Error(`retirement budget (${deadline - started} ms) spent before ${box.group} was deleted`);
          const deleting = this.o.queue.deleteMailbox(box.subject, box.group);
          try {
            await this.call(`delete ${box.group}`, () => deleting);
          } catch (err) {
            // Unanswered within the bound, the delete may still land — after this
            // retirement is unmarked and a node adding the seat back has created its new
            // inbox. When it does land, the mailboxes are restored if the seat's record
            // is settled by then (registered, no retirement in flight).
            if (err instanceof CallBoundExceeded) void deleting.then(() => this.afterLateDelete(handle), () => this.afterLateDelete(handle));
            throw err;
          }
        }
      } catch (err) {
        // Unmarked (compare-and-set on our mark) and retried on the next tick.
        const unmarked = await this.cas(handle, { ...rec, retiring: null }, marked).catch(() => undefined);
        this.o.log.warn("seat_mailbox_retirement_failed", { seat: handle, error: err as Error });
        // The record changed under us (a node adding the seat back took it over): a delete
        // of ours may have landed after its create, so the inbox is restored.
        if (unmarked === null) await this.restore(handle);
        return "failed";
      }
      try {
        await this.call("registry delete", () => this.o.registry.delete(handle, marked));
      } catch (err) {
        if (!(err instanceof CasConflict)) throw err;
        // The record changed under us: a node adding the seat back took it over and may
        // have created the new inbox before our delete landed. Restore it.
        await this.restore(handle);
        return "lost";
      }
      this.o.log.info("seat_mailbox_retired", {
        seat: handle,
        absent_since: rec.absent_since === null ? null : new Date(rec.absent_since).toISOString(),
        elapsed_ms: this.o.clock.now() - started,
      });
      return "retired";
    } finally {
      const r = await this.call("seat lease release", () => this.o.leases.release(key, this.o.owner, epoch)).catch(() => "unknown" as const);
      if (r !== "released") this.o.log.warn("seat_mailbox_retirement_release_failed", { seat: handle, epoch, result: r });
    }
  }
}
