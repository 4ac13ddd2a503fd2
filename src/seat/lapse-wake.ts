// When to run the placement sweep early, at a lapse (issue 10: "a peer can claim at the
// lapse rather than at its next sweep"). Pure: from the leases one pass listed, how long
// until the first of another node's leases that is going unrenewed lapses — if that comes
// before the next regular pass. The sweep itself still decides, on the store's clock, what
// is free; this only chooses when it looks. Why this and not the server's delete markers:
// see the lease bucket's definition (coord/buckets.ts).
//
// Measured (bench/failover.ts --only=processes, 3 members R3, 12 seats, one run each on a
// loaded 2-core box, load 4–7): kill -9 at TTL 45 s → all held 2.3 s after the dead
// member's last seat lease lapsed without the wake, 0.3 s with it. A pass sees a lease
// going unrenewed only in the last half of its TTL, so below a TTL of two sweep intervals
// (10 s) the wake rarely fires: at TTL 3 s the figure is a regular pass's (8.5–11 s from
// the kill, either way).
import { HEARTBEATS_PER_TTL } from "../coord/contract.ts";

/**
 * The wake comes this long after the listed expiry: the pass it starts reads the store's
 * clock again, and must find the lease lapsed there. The remaining time is measured from
 * the listing's own clock reading, so only timer slack separates the two; 100 ms is that
 * many times over and a tenth of the 1 s the goal allows.
 */
export const LAPSE_WAKE_MARGIN_MS = 100;

/**
 * A lease is going unrenewed once its holder is this many heartbeats past its last
 * renewal: one heartbeat is the renewal cadence, and half of one more covers a renewal's
 * latency on a loaded store. A healthy holder's lease never gets there, so a healthy fleet
 * never wakes a pass early.
 */
export const UNRENEWED_AFTER_HEARTBEATS = 1.5;

export interface ListedLease {
  owner: string;
  live: boolean;
  /** Store time left when listed (LeaseView.remaining_ms). */
  remaining_ms: number;
}

export interface LapseWakeInput {
  /** What the pass listed: presence rows, and the seat leases when it read them. */
  leases: readonly ListedLease[];
  /** This process's owner: its own leases are renewed by its own heartbeat. */
  self_owner: string;
  ttl_ms: number;
  /** How long until the next regular pass begins. */
  next_pass_in_ms: number;
}

/** Milliseconds until the early pass, or null when the regular pass comes first. */
export function lapseWakeIn(input: LapseWakeInput): number | null {
  const heartbeat_ms = input.ttl_ms / HEARTBEATS_PER_TTL;
  const unrenewedBelow_ms = input.ttl_ms - UNRENEWED_AFTER_HEARTBEATS * heartbeat_ms;
  let soonest: number | null = null;
  for (const l of input.leases) {
    if (!l.live || l.owner === input.self_owner) continue;
    if (l.remaining_ms >= unrenewedBelow_ms) continue; // renewed on time
    const wake_ms = Math.max(0, l.remaining_ms) + LAPSE_WAKE_MARGIN_MS;
    if (wake_ms >= input.next_pass_in_ms) continue; // the regular pass sees it lapsed
    if (soonest === null || wake_ms < soonest) soonest = wake_ms;
  }
  return soonest;
}
