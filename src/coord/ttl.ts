// What a lease TTL implies for the calls that keep it, and the smallest TTL a replicated
// lease bucket can keep through a leader election (issue 34). Pure: numbers in, numbers out.
import { ELECTION_WORST_MS, HEARTBEATS_PER_TTL, RENEW_PROBE_MS } from "./contract.ts";

/** How long one store call may take before it is `unknown`: a third of a heartbeat (5 s at
 *  the shipped 45 s TTL), so a renew answers well before the next one is due, and long
 *  enough to ride out most of an R3 leader change (4–6.5 s after a kill; a graceful
 *  stepdown well under a second) instead of reporting unknown. */
export function opTimeoutFor(lease_ttl_ms: number): number {
  return Math.min(5_000, Math.max(250, Math.floor(lease_ttl_ms / 9)));
}

/**
 * Whether a lease keeps through an election of `election_ms`. The worst case: the leader dies
 * just before a heartbeat's renewal, one heartbeat after the last that worked; the bucket is
 * leaderless for the election; a probe sent as it ends waits out its call budget, and the
 * next lands within a probe. All of it must fit before the TTL runs out.
 */
export function survivesElection(lease_ttl_ms: number, election_ms = ELECTION_WORST_MS): boolean {
  const worst_ms = lease_ttl_ms / HEARTBEATS_PER_TTL + election_ms + opTimeoutFor(lease_ttl_ms) + RENEW_PROBE_MS;
  return worst_ms < lease_ttl_ms;
}

/** The smallest whole-second TTL that survives the worst election (28 s with the constants
 *  above): below it one member's death can fence every seat in the fleet at once. */
export function replicatedLeaseTtlFloorMs(election_ms = ELECTION_WORST_MS): number {
  for (let s = 1; s <= 3_600; s++) if (survivesElection(s * 1000, election_ms)) return s * 1000;
  throw new Error(`no lease TTL up to an hour survives a ${election_ms} ms election`);
}
