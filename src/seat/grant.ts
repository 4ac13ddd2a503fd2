// A grant while this node holds it: admission (may a turn start: freshness, not
// membership), the fence (is this still the owner: the epoch and the lease's lapse), the
// screening of inbox deliveries by both, the renewal on each heartbeat, and the one timer
// that ends a grant at its lease's lapse when no renew has come back.
import type { Timer } from "../clock.ts";
import { ack, defer, nak, type BatchHandler, type Handler, type Outcome } from "../queue/contract.ts";
import { probeIdOf } from "./mailbox-watch.ts";
import type { BatchInboxHandler, HostState, InboxHandler, SeatState, TurnContext } from "./host-state.ts";

export class Grants {
  /** The timer that fences a grant no renew has extended by its lapse (armDeadline). */
  private deadline: { timer: Timer; at_ms: number } | null = null;

  constructor(
    private readonly h: HostState,
    /** Revokes a grant at once and tears it down (Tenures.fence). */
    private readonly fenceSeat: (s: SeatState, reason: string) => void,
  ) {}

  // ---- admission and fencing --------------------------------------------------------------

  /**
   * The epoch to run a turn under, or false. A successful renew sent at t bought
   * exclusivity through t + ttl, so a turn admitted within one heartbeat of it is
   * certified owned for at least ttl − heartbeat.
   */
  mayStart(handle: string): number | false {
    const s = this.h.seats.get(handle);
    if (!s || s.phase !== "established" || s.fenced || !s.lease_held) return false;
    const age_ms = this.h.clock.now() - s.last_renew_ok_ms;
    if (age_ms > this.h.heartbeat_ms) {
      this.h.log.warn("seat_admission_stale", { seat: handle, epoch: s.epoch, renewed_ms_ago: age_ms });
      return false;
    }
    return s.epoch;
  }

  /** False once the seat's current grant here is not `epoch`, or its last good renew is a
   * TTL old (the store has let the lease go, whether or not a timer has said so yet). An
   * unreachable store alone does not close it, nor does a stuck teardown. */
  fence(handle: string, epoch: number): boolean {
    const s = this.h.seats.get(handle);
    return !!s && !s.fenced && s.lease_held && s.epoch === epoch && !this.lapsed(s);
  }

  /** Past the TTL since the last renew that worked, the store has let the lease go (its
   * clock started no earlier than ours, since a renew is stamped when it is sent). */
  private lapsed(s: SeatState): boolean {
    return this.h.clock.now() - s.last_renew_ok_ms >= this.h.ttl_ms;
  }

  /** A screening path deferred a delivery: the attachment is quiesced, and the next
   * successful renew resumes it (without this the seat is owned, attached and deaf). */
  recordDeferral(handle: string, epoch?: number): void {
    const s = this.h.seats.get(handle);
    if (s && (epoch === undefined || s.epoch === epoch)) s.deferred = true;
  }

  private turnContext(handle: string, epoch: number): TurnContext {
    const s = this.h.seats.get(handle);
    return {
      signal: s && s.epoch === epoch ? s.cancel.signal : AbortSignal.abort(new Error("seat not held at this epoch")),
      handle,
      epoch,
      fence: () => this.fence(handle, epoch),
      admit: () => this.mayStart(handle) === epoch,
    };
  }

  /** Screening before anything runs: not owned here, a stale renew or another epoch. */
  private admitted(handle: string, epoch: number): boolean {
    const admitted = this.mayStart(handle);
    if (admitted !== false && admitted === epoch) return true;
    this.recordDeferral(handle, epoch);
    return false;
  }

  screened(handle: string, epoch: number, handler: InboxHandler): Handler {
    const batch = this.screenedBatch(handle, epoch, async (ds, turn) => [await handler(ds[0]!, turn)]);
    return async (delivery) => (await batch([delivery]))[0]!;
  }

  /** The same screening for a whole drain: it runs as one, or is deferred as one. Probes
   * are taken out first: acked, reported, never run. */
  screenedBatch(handle: string, epoch: number, handler: BatchInboxHandler): BatchHandler {
    return async (deliveries) => {
      const outs: Outcome[] = deliveries.map(() => ack());
      const mail: number[] = [];
      deliveries.forEach((d, i) => {
        const probe = probeIdOf(d.headers);
        if (probe === null) mail.push(i);
        else this.h.opts.onProbe?.(handle, probe);
      });
      try {
        if (mail.length === 0) return outs;
        if (!this.admitted(handle, epoch)) {
          for (const i of mail) outs[i] = defer(`seat "${handle}" is not owned here`);
          return outs;
        }
        const ran = await handler(
          mail.map((i) => deliveries[i]!),
          this.turnContext(handle, epoch),
        );
        // An answer shorter than the mail hands the rest back unrun, as the queue would.
        mail.forEach((i, k) => (outs[i] = ran[k] ?? nak()));
        if (ran.some((o) => o.kind === "defer")) this.recordDeferral(handle, epoch);
        return outs;
      } finally {
        const s = this.h.seats.get(handle);
        if (s && s.epoch === epoch) s.settled_at_ms = this.h.clock.now();
      }
    };
  }

  // ---- renewal and the deadline -----------------------------------------------------------

  async renew(s: SeatState): Promise<void> {
    // Stamped when this seat's turn in the beat's pool comes, not when the beat began. The
    // store's in-flight limit may hold the call a moment more, which only makes the stamp
    // earlier than the send, and the store stamps the write later still: never late.
    const sent = this.h.clock.now();
    const r = await this.h.store.renew(s.key, this.h.owner, s.epoch);
    if (this.h.seats.get(s.handle) !== s || !s.lease_held) return;
    if (r.status === "renewed") {
      s.last_renew_ok_ms = Math.max(s.last_renew_ok_ms, sent);
      const wasStale = s.stale;
      s.stale = false;
      if (s.phase === "established" && !s.fenced && s.attachment && (wasStale || s.deferred)) {
        s.deferred = false;
        s.attachment.resume();
        if (wasStale) {
          this.h.log.info("seat_admission_restored", { seat: s.handle, epoch: s.epoch });
          this.h.hooks.onAdmitted?.(this.h.grantOf(s));
        }
      }
      return;
    }
    if (r.status === "lost") {
      s.lease_held = false;
      this.fenceSeat(s, "lease_lost");
      return;
    }
    // Unknown says nothing about ownership: keep the seat, stop starting turns on it.
    if (!s.stale) {
      s.stale = true;
      if (s.phase === "established") s.attachment?.quiesce();
      this.h.log.warn("seat_renew_unknown", { seat: s.handle, epoch: s.epoch, error: r.error });
    }
    this.expireIfLapsed(s);
  }

  /** True while some held seat's last renewal went unanswered. */
  anyStale(): boolean {
    for (const s of this.h.seats.values()) if (s.stale && s.lease_held && !s.fenced) return true;
    return false;
  }

  /** Renews the stalest stale seat once (RENEW_PROBE_MS); true when it came back renewed,
   * i.e. the store answers again and every other seat should renew now. */
  async probe(): Promise<boolean> {
    let stalest: SeatState | null = null;
    for (const s of this.h.seats.values()) {
      if (s.stale && s.lease_held && !s.fenced && (!stalest || s.last_renew_ok_ms < stalest.last_renew_ok_ms)) stalest = s;
    }
    if (!stalest) return false;
    const unrenewed_ms = this.h.clock.now() - stalest.last_renew_ok_ms;
    await this.renew(stalest);
    const answering = stalest.lease_held && !stalest.stale;
    // How close the outage came to fencing the seat: the figure behind the TTL's floor
    // (coord/ttl.ts), measured where it matters, on the node that renews.
    if (answering) this.h.log.info("lease_store_answering", { seat: stalest.handle, unrenewed_ms, ttl_ms: this.h.ttl_ms });
    return answering;
  }

  /** The grant is gone at its lease's lapse whatever the store would answer. */
  private expireIfLapsed(s: SeatState): void {
    if (!s.lease_held || s.fenced || !this.lapsed(s)) return;
    s.lease_held = false;
    this.fenceSeat(s, "ttl_grace_expired");
  }

  /**
   * Arms the one timer that ends a grant at its lease's lapse when no renew has come back:
   * a renew that hangs to its bound, and the beats after it, would otherwise fence the seat
   * only when an answer arrived, after a peer could have claimed the lapsed lease. Re-armed
   * after every heartbeat and claim, for the earliest deadline only: one timer per host.
   */
  armDeadline(): void {
    let at_ms = Number.POSITIVE_INFINITY;
    for (const s of this.h.seats.values()) if (s.lease_held && !s.fenced) at_ms = Math.min(at_ms, s.last_renew_ok_ms + this.h.ttl_ms);
    if (this.deadline?.at_ms === at_ms) return;
    this.deadline?.timer.cancel();
    this.deadline = null;
    if (at_ms === Number.POSITIVE_INFINITY || this.h.stopped) return;
    const timer = this.h.clock.setTimeout(() => {
      this.deadline = null;
      for (const s of this.h.seats.values()) this.expireIfLapsed(s);
      this.armDeadline();
    }, at_ms - this.h.clock.now());
    this.deadline = { at_ms, timer };
  }

  /** The host stops: no deadline fires after it. */
  cancelDeadline(): void {
    this.deadline?.timer.cancel();
  }
}
