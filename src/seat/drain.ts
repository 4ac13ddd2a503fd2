// The drain: presence given up first (peers stop counting this node), claim nothing, give
// every seat back voluntarily, ask again for give-backs the store did not answer, and name
// what could not be given back by the drain's bound.
import type { ClaimLoop } from "./claim-loop.ts";
import type { GiveBacks } from "./give-back.ts";
import type { HostState } from "./host-state.ts";
import type { DutyLoop } from "./loop.ts";
import { SEAT_PREFIX } from "./presence.ts";
import type { Tenures } from "./tenure.ts";

/** A drain asks again for an unanswered release this often: an R3 election is ~0.3–4 s. */
export const DRAIN_RELEASE_RETRY_MS = 250;

export class Drain {
  private drained: Promise<void> | null = null;

  constructor(
    private readonly h: HostState,
    private readonly sweepLoop: DutyLoop,
    private readonly claimLoop: ClaimLoop,
    private readonly tenures: Tenures,
    private readonly giveBacks: GiveBacks,
  ) {}

  /** Runs once; a second call answers the first's promise. */
  run(within_ms: number): Promise<void> {
    if (!this.drained) this.drained = this.runDrain(within_ms);
    return this.drained;
  }

  private async runDrain(within_ms: number): Promise<void> {
    const h = this.h;
    const started = h.clock.now();
    const deadline = started + within_ms;
    h.draining = true;
    const handles = [...h.seats.values()].map((s) => s.handle);
    h.log.info("seat_drain_started", { held: h.heldHandles().length, ...(Number.isFinite(within_ms) ? { within_ms } : {}) });
    const releases = (async () => {
      await h.presence.giveUp();
      // A pass under way, and the claims it started, re-check the drain under each seat's
      // lock before they attach.
      await this.sweepLoop.current;
      await this.claimLoop.claiming;
      // All at once: each waits for its seat's turn on its own; the store calls they end
      // with queue in the store's bound (LEASE_CALLS_IN_FLIGHT).
      const each = [...h.seats.values()]
        .filter((s) => s.phase !== "undead" && !s.fenced)
        .map((s) => h.withLock(s.handle, () => this.tenures.releaseVoluntarilyLocked(s, "drain")));
      await Promise.allSettled(each);
      await h.settleBackground();
    })();
    await this.byDeadline(releases, deadline);
    // A release the store did not answer (a leader election, a blip) would otherwise wait
    // for the heartbeat's retry, and a draining node stops right after this: its peers
    // would wait out a whole TTL for a seat it meant to give back. Ask again, bounded by
    // one heartbeat and the drain's bound.
    const retryUntil = Math.min(h.clock.now() + h.heartbeat_ms, deadline);
    while (h.pendingReleases.size > 0 && h.clock.now() < retryUntil) {
      await this.byDeadline(h.clock.sleep(DRAIN_RELEASE_RETRY_MS), retryUntil);
      await this.byDeadline(this.giveBacks.retry(), retryUntil);
    }
    const abandoned = this.reportUnreleased();
    const undead = [...h.seats.values()].filter((s) => s.phase === "undead").map((s) => s.handle);
    const released = handles.filter((x) => !abandoned.includes(x) && !undead.includes(x));
    h.log.info("seat_drain_finished", { released, abandoned, undead, waited_ms: h.clock.now() - started });
  }

  /** Resolves when `work` settles or at `deadline_ms`, whichever is first (never rejects). */
  private async byDeadline(work: Promise<unknown>, deadline_ms: number): Promise<void> {
    if (!Number.isFinite(deadline_ms)) return void (await work.catch(() => undefined)); // unbounded: no timer
    const left = deadline_ms - this.h.clock.now();
    if (left <= 0) return;
    const stop = new AbortController();
    await Promise.race([work.catch(() => undefined), this.h.clock.sleep(left, stop.signal).catch(() => undefined)]);
    stop.abort();
  }

  /**
   * Every seat the drain could not give back, each logged seat_release_abandoned with what
   * was left: its release still under way (the turn, the teardown or the lease call), or a
   * lease call the store never answered. Returns their handles.
   */
  private reportUnreleased(): string[] {
    const h = this.h;
    const out: string[] = [];
    for (const s of h.seats.values()) {
      if (s.phase === "undead") continue; // logged as such (seat_release_unproven); its retries own it
      out.push(s.handle);
      const left = s.fenced ? "fenced_teardown_under_way" : s.phase === "releasing" ? "release_under_way" : s.phase === "establishing" ? "acquire_under_way" : "release_not_started";
      h.log.warn("seat_release_abandoned", { seat: s.handle, epoch: s.epoch, left, lapses_within_ms: h.ttl_ms });
    }
    for (const [key, p] of h.pendingReleases) {
      const handle = key.startsWith(SEAT_PREFIX) ? key.slice(SEAT_PREFIX.length) : key;
      if (out.includes(handle)) continue;
      out.push(handle);
      h.log.warn("seat_release_abandoned", { seat: handle, epoch: p.epoch, left: "lease_release_unanswered", lapses_within_ms: h.ttl_ms });
    }
    return out;
  }
}
