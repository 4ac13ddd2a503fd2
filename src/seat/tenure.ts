// A seat's tenure on this node, from its establishment to its teardown: the claim takes the
// lease, runs the acquire hooks in order (MCP children, memory, the reflection subscription,
// the coding runs' control subscription and recovery: src/sandbox/seat-runs.ts) and attaches
// the inbox last; a release — voluntary (quiesce, wait, detach) or fenced (detach at once) —
// runs the teardown hook and gives the lease back. A teardown that fails leaves the seat
// undead: lease kept and renewed, the teardown retried every heartbeat.
import type { Attachment } from "../queue/contract.ts";
import { mailbox } from "../queue/topics.ts";
import type { GiveBacks } from "./give-back.ts";
import type { Grants } from "./grant.ts";
import type { HostState, ReleaseInfo, SeatState } from "./host-state.ts";
import { UNDEAD_ALARM_EVERY_HEARTBEATS, type SeatLeaseFact } from "./placement.ts";
import { seatKey } from "./presence.ts";

/** A voluntary release waits this many heartbeats for the in-flight handler. The lease is
 * renewed throughout, so the bound is about how long a rebalance may take, not safety; two
 * heartbeats let an ordinary turn finish, and a longer one is stopped by the fence. */
export const VOLUNTARY_WAIT_HEARTBEATS = 2;
/** A drain waits this long for a running turn before cancelling it: the whole stop must fit the
 * node's 30 s budget, and a turn past this is usually waiting on a hung endpoint. Cancelled, it
 * hands its deliveries back and the successor runs them at once. */
export const DRAIN_TURN_WAIT_MS = 10_000;
/** After a cancel, how long the release waits for the turn to reach its next await and
 * settle (the NAK): a cancelled fetch or sleep rejects at once; this bounds a tool that
 * ignores its signal. */
export const CANCEL_SETTLE_WAIT_MS = 5_000;
/** Most deliveries one drain hands the agent: 16 takes a busy thread's burst in one turn while
 * keeping a turn's triggers to what a model can take as context, and bounds how long a drain's
 * last conversation waits behind the others. */
export const INBOX_DRAIN_MAX = 16;

export type ClaimOutcome = "claimed" | "held" | "protocol" | "unknown" | "skipped" | "failed";

/** Why a claim could take its seat (seat_claimed's `reason`): `first` its first tenure (epoch 1),
 * `takeover` a live lease of this node's proven-dead earlier incarnation, `free` otherwise — a
 * given-back and a lapsed lease look alike to the claimant; the releaser's lines tell them apart. */
export type ClaimReason = "first" | "takeover" | "free";

export function claimReason(epoch: number, seen: SeatLeaseFact | undefined): ClaimReason {
  if (epoch === 1) return "first";
  if (seen?.live === true && seen.predecessor) return "takeover";
  return "free";
}

export class Tenures {
  constructor(
    private readonly h: HostState,
    private readonly grants: Grants,
    private readonly giveBacks: GiveBacks,
  ) {}

  // ---- establishment ----------------------------------------------------------------------

  /**
   * A named hold on a seat's inbox (a person's pause): kept for the seat whenever this node
   * attaches it, and put on (or taken off) the attachment it has now. Mail waits in the
   * mailbox while held; the seat stays held and attached.
   */
  setHold(handle: string, name: string, on: boolean): void {
    const want = this.h.wantedHolds.get(handle) ?? new Set<string>();
    if (on) want.add(name);
    else want.delete(name);
    if (want.size > 0) this.h.wantedHolds.set(handle, want);
    else this.h.wantedHolds.delete(handle);
    const att = this.h.seats.get(handle)?.attachment;
    if (!att) return;
    if (on) att.hold(name);
    else att.releaseHold(name);
    this.h.log.info(on ? "seat_hold_set" : "seat_hold_released", { seat: handle, hold: name });
  }

  /** Claims and establishes one seat (the claim loop's unit of work; exposed for tests).
   * `seen`: the seat's lease as the pass that chose it read it (for the claim's reason). */
  claim(handle: string, seen?: SeatLeaseFact): Promise<ClaimOutcome> {
    return this.h.withLock(handle, () => this.claimLocked(handle, seen));
  }

  private async claimLocked(handle: string, seen: SeatLeaseFact | undefined): Promise<ClaimOutcome> {
    const h = this.h;
    if (h.draining || h.stopped || h.seats.has(handle)) return "skipped";
    const key = seatKey(handle);
    const sent = h.clock.now();
    const r = await h.store.acquire(key, {
      owner: h.owner,
      preferred: h.node_id,
      ttl_ms: h.ttl_ms,
      meta: { node: h.node_id },
      gate: true,
      takeover: h.takeover,
    });
    if (!r.ok) {
      if (r.rule === "protocol") h.log.warn("seat_claims_blocked_by_older_protocol", { seat: handle, floor: r.floor });
      else if (r.rule === "unknown") h.log.warn("seat_claim_unknown", { seat: handle, error: r.error });
      else h.log.debug("seat_claim_lost", { seat: handle, holder: r.holder });
      return r.rule;
    }
    // Re-checked under the seat's own lock: a lease taken while a drain began goes straight
    // back before anything attaches, or the pass would keep a seat on a node that is leaving.
    if (h.draining || h.stopped) {
      await this.giveBacks.giveBack(key, r.lease.epoch);
      h.log.info("seat_claim_handed_back", { seat: handle, epoch: r.lease.epoch, reason: "draining" });
      return "skipped";
    }
    const s: SeatState = {
      handle,
      key,
      epoch: r.lease.epoch,
      acquired_at: r.lease.acquired_at,
      phase: "establishing",
      lease_held: true,
      fenced: false,
      finished: false,
      attachment: null,
      last_renew_ok_ms: sent,
      stale: false,
      deferred: false,
      undead: null,
      cancel: new AbortController(),
      settled_at_ms: 0,
    };
    h.seats.set(handle, s);
    h.log.info("seat_claimed", { seat: handle, epoch: s.epoch, reason: claimReason(s.epoch, seen) });
    this.grants.armDeadline();
    const grant = h.grantOf(s);
    try {
      for (const step of h.hooks.prepare ?? []) {
        await step(grant);
        if (s.fenced) throw new Error(`seat fenced while establishing`);
      }
      if (h.draining || h.stopped) {
        await this.releaseVoluntarilyLocked(s, "drain");
        return "skipped";
      }
      if (h.opts.attachInbox ?? true) {
        const holds = [...new Set([...((await h.hooks.attachHolds?.(handle)) ?? []), ...(h.wantedHolds.get(handle) ?? [])])];
        const { subject, group } = mailbox(handle, "inbox");
        const { batchHandler, handler } = h.opts;
        s.attachment = batchHandler
          ? await h.queue.attachBatch(subject, group, this.grants.screenedBatch(handle, s.epoch, batchHandler), { holds, batch: INBOX_DRAIN_MAX })
          : await h.queue.attach(subject, group, this.grants.screened(handle, s.epoch, handler!), { holds });
        if (s.fenced) throw new Error(`seat fenced while attaching`);
        if (s.stale) s.attachment.quiesce();
        h.log.info("seat_attached", { seat: handle, epoch: s.epoch, holds, claim_ms: h.clock.now() - sent });
      }
      s.phase = "established";
    } catch (err) {
      h.log.error("seat_acquire_failed", { seat: handle, epoch: s.epoch, error: err as Error });
      s.fenced = true;
      await this.releaseFencedLocked(s, s.lease_held ? "acquire_hook_failed" : "lease_lost");
      return "failed";
    }
    h.hooks.onEstablished?.(grant);
    return "claimed";
  }

  // ---- teardown ---------------------------------------------------------------------------

  /** Gives a held seat back voluntarily (rebalance, drain, role gone …). */
  release(handle: string, reason: string): Promise<void> {
    const s = this.h.seats.get(handle);
    if (!s) return Promise.resolve();
    return this.h.withLock(handle, () => this.releaseVoluntarilyLocked(s, reason));
  }

  /** Quiesce → bounded wait for the in-flight handler → detach → teardown → release. */
  async releaseVoluntarilyLocked(s: SeatState, reason: string): Promise<void> {
    if (this.h.seats.get(s.handle) !== s || s.finished || s.fenced || s.phase === "undead") return;
    s.phase = "releasing";
    const att = s.attachment;
    if (att) {
      att.quiesce();
      const wait_ms = reason === "drain" ? Math.min(DRAIN_TURN_WAIT_MS, VOLUNTARY_WAIT_HEARTBEATS * this.h.heartbeat_ms) : VOLUNTARY_WAIT_HEARTBEATS * this.h.heartbeat_ms;
      if (att.inFlight > 0) await this.idleWithin(att, wait_ms);
      if (att.inFlight > 0) {
        // Cancelled at its next await: its deliveries are handed back (NAK) on this
        // connection before the attachment goes, so the successor runs them at once
        // rather than after the ack wait.
        this.h.log.warn("seat_turn_cancelled", { seat: s.handle, epoch: s.epoch, reason, waited_ms: wait_ms });
        s.cancel.abort(new Error(`seat ${s.handle} released (${reason})`));
        await this.idleWithin(att, CANCEL_SETTLE_WAIT_MS);
      }
      s.attachment = null;
      await att.detach();
    }
    // Logged with or without an inbox (a drain that met a seat still establishing): every
    // tenure's end is on record before its lease goes back, for the failover count and the
    // chaos checker alike.
    this.h.log.info("seat_detached", { seat: s.handle, epoch: s.epoch, reason, mode: "voluntary", attached: att !== null });
    await this.teardown(s, { mode: "voluntary", reason });
  }

  /** Resolves when the attachment is idle or after `ms`, whichever is first. */
  private async idleWithin(att: Attachment, ms: number): Promise<void> {
    const stop = new AbortController();
    await Promise.race([att.idle(), this.h.clock.sleep(ms, stop.signal).catch(() => {})]);
    stop.abort();
  }

  /** Revokes the grant at once (sync: fence fails, nothing new starts), then tears down
   * under the seat's lock. */
  fence(s: SeatState, reason: string): void {
    if (s.fenced) return;
    s.fenced = true;
    // The grant ends here, not at the detach that follows under the seat's lock (which may
    // wait on a release or an acquire step): this line is when ownership stopped.
    this.h.log.info("seat_fenced", { seat: s.handle, epoch: s.epoch, reason });
    // Nothing this grant runs may finish now: a turn waiting on its model stops waiting.
    s.cancel.abort(new Error(`seat ${s.handle} fenced (${reason})`));
    s.attachment?.quiesce();
    this.h.track(this.h.withLock(s.handle, () => this.releaseFencedLocked(s, reason)));
  }

  /** Detach first, abandon in-flight work, republish nothing, then teardown. */
  private async releaseFencedLocked(s: SeatState, reason: string): Promise<void> {
    if (this.h.seats.get(s.handle) !== s || s.finished) return;
    s.fenced = true;
    const att = s.attachment;
    s.attachment = null;
    if (att) {
      await att.detach();
      this.h.log.info("seat_detached", { seat: s.handle, epoch: s.epoch, reason, mode: "fenced" });
    }
    if (s.phase === "undead") return; // its retries own the teardown
    await this.teardown(s, { mode: "fenced", reason });
  }

  private async teardown(s: SeatState, info: ReleaseInfo): Promise<void> {
    try {
      await this.h.hooks.onRelease?.(this.h.grantOf(s), info);
    } catch (err) {
      // Not proven torn down: the lease is not released (one released too early costs
      // correctness, one held too long only latency). Out of the held set, still renewed.
      s.phase = "undead";
      s.undead = { since_ms: this.h.clock.now(), attempts: 1, heartbeats: 0, info, retrying: false };
      this.h.log.error("seat_release_unproven", { seat: s.handle, epoch: s.epoch, reason: info.reason, error: err as Error });
      return;
    }
    await this.finish(s);
  }

  private async finish(s: SeatState): Promise<void> {
    s.finished = true;
    this.h.seats.delete(s.handle);
    if (s.lease_held) {
      s.lease_held = false;
      await this.giveBacks.giveBack(s.key, s.epoch);
    }
    await this.h.advertise();
  }

  /** Undead is a state, not a grave: the teardown is retried every heartbeat and the lease
   * goes the instant one succeeds. Still failing re-raises the alarm every 20 heartbeats. */
  retryUndead(): void {
    const h = this.h;
    for (const s of h.seats.values()) {
      const u = s.undead;
      if (s.phase !== "undead" || !u || u.retrying) continue;
      u.heartbeats++;
      u.retrying = true;
      h.track(
        h.withLock(s.handle, async () => {
          try {
            await h.hooks.onRelease?.(h.grantOf(s), u.info);
          } catch {
            u.attempts++;
            if (u.heartbeats % UNDEAD_ALARM_EVERY_HEARTBEATS === 0) {
              h.log.error("seat_still_unproven", {
                seat: s.handle,
                epoch: s.epoch,
                attempts: u.attempts,
                elapsed_seconds: Math.round((h.clock.now() - u.since_ms) / 1000),
              });
            }
            return;
          } finally {
            u.retrying = false;
          }
          h.log.info("seat_release_recovered", {
            seat: s.handle,
            epoch: s.epoch,
            attempts: u.attempts + 1,
            elapsed_seconds: Math.round((h.clock.now() - u.since_ms) / 1000),
          });
          await this.finish(s);
        }),
      );
    }
  }
}
