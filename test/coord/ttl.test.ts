// The lease TTL's arithmetic against a leader election (issue 34): which elections a TTL
// rides out, and the floor the config holds a replicated lease bucket to.
import { expect, test } from "bun:test";
import { ELECTION_WORST_MS } from "../../src/coord/contract.ts";
import { opTimeoutFor, replicatedLeaseTtlFloorMs, survivesElection } from "../../src/coord/ttl.ts";

test.each([
  // ttl, election, survives — worst case: one heartbeat gone, the election, a call budget, a probe
  [6_000, 4_000, false], // 2 s + 4 s already fills the TTL: the measured fences at TTL 6 s
  [13_000, 6_500, true], // the measured worst election fits
  [27_000, ELECTION_WORST_MS, false],
  [28_000, ELECTION_WORST_MS, true],
  [45_000, ELECTION_WORST_MS, true], // shipped: 15 + 15 + 5 + 0.5 of 45 s
  [45_000, 24_000, true],
  [45_000, 25_000, false], // 15 + 25 + 5 + 0.5 > 45
] as const)("TTL %d ms and an election of %d ms: survives %p", (ttl, election, survives) => {
  expect(survivesElection(ttl, election)).toBe(survives);
});

test("the floor is the smallest whole second that survives, for the worst election and the measured one", () => {
  expect(replicatedLeaseTtlFloorMs()).toBe(28_000);
  expect(replicatedLeaseTtlFloorMs(6_500)).toBe(13_000);
  expect(survivesElection(replicatedLeaseTtlFloorMs() - 1_000)).toBe(false);
});

test("a store call's budget: a ninth of the TTL, between 250 ms and 5 s", () => {
  expect([1_000, 6_000, 19_000, 45_000, 600_000].map(opTimeoutFor)).toEqual([250, 666, 2_111, 5_000, 5_000]);
});
