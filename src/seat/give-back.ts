// A lease going back to the store: the give-back itself, the ones whose answer was lost
// (asked again beside the heartbeat until the lease has lapsed on its own), and orphans —
// leases of this incarnation the host no longer tracks.
import { eachInFlight } from "../in-flight.ts";
import { LEASE_CALLS_IN_FLIGHT } from "./bounded-store.ts";
import type { HostState } from "./host-state.ts";
import { seatKey } from "./presence.ts";

/** A voluntary release whose store answer was lost is retried on the heartbeat until this
 * many TTLs have passed; by then the lease has lapsed on its own. */
export const PENDING_RELEASE_TTLS = 1;

export class GiveBacks {
  /** The pass over pendingReleases under way beside the heartbeat, if any. */
  private retrying: Promise<void> | null = null;

  constructor(private readonly h: HostState) {}

  async giveBack(key: string, epoch: number): Promise<void> {
    const r = await this.h.store.release(key, this.h.owner, epoch);
    if (r === "unknown") this.h.pendingReleases.set(key, { epoch, until_ms: this.h.clock.now() + PENDING_RELEASE_TTLS * this.h.ttl_ms });
  }

  async releaseOrphanLocked(handle: string): Promise<void> {
    if (this.h.seats.has(handle)) return;
    const v = await this.h.store.get(seatKey(handle)).catch(() => null);
    if (!v || !v.live || v.owner !== this.h.owner) return;
    this.h.log.info("seat_orphan_released", { seat: handle, epoch: v.epoch });
    await this.giveBack(v.key, v.epoch);
  }

  /**
   * The heartbeat's pass over unanswered give-backs runs beside it, one pass at a time, never
   * in its turn: a store that leaves them unanswered (a member cut off) would otherwise hold
   * the turn — and the renewals of every seat kept — for as long as the pass takes.
   */
  retryBeside(): void {
    if (this.retrying || this.h.pendingReleases.size === 0) return;
    const pass = this.retry().finally(() => (this.retrying = null));
    this.retrying = pass;
    this.h.track(pass);
  }

  /**
   * Asks again for every unanswered give-back, LEASE_CALLS_IN_FLIGHT at once, so a whole
   * share left unanswered is asked within a bound or two rather than one bound each. An
   * entry whose lease has lapsed by its turn is dropped unasked.
   */
  async retry(): Promise<void> {
    await eachInFlight([...this.h.pendingReleases], LEASE_CALLS_IN_FLIGHT, async ([key, p]) => {
      if (this.h.clock.now() >= p.until_ms) {
        if (this.h.pendingReleases.get(key) === p) this.h.pendingReleases.delete(key);
        return;
      }
      const r = await this.h.store.release(key, this.h.owner, p.epoch);
      // Only this entry: the key may have been claimed and given back again meanwhile.
      if (r !== "unknown" && this.h.pendingReleases.get(key) === p) this.h.pendingReleases.delete(key);
    });
  }
}
