import { describe, expect, test } from "bun:test";
import { LAPSE_WAKE_MARGIN_MS, lapseWakeIn, type ListedLease } from "../../src/seat/lapse-wake.ts";
import { SWEEP_INTERVAL_MS } from "../../src/seat/placement.ts";

const ME = "a:0001";
const lease = (owner: string, remaining_ms: number, live = remaining_ms > 0): ListedLease => ({ owner, live, remaining_ms });

describe("lapseWakeIn", () => {
  // TTL 45 s: heartbeat 15 s, a healthy lease has 30–45 s left; unrenewed below 22.5 s.
  const ttl_ms = 45_000;
  const rows: [string, ListedLease[], number, number | null][] = [
    ["nothing listed: no wake", [], SWEEP_INTERVAL_MS, null],
    ["healthy peers (30–45 s left): no wake", [lease("b:1", 44_000), lease("c:1", 30_500)], SWEEP_INTERVAL_MS, null],
    ["a peer's lease unrenewed, lapsing in 2 s, before the pass in 5 s: wake at the lapse", [lease("b:1", 40_000), lease("c:1", 2_000)], SWEEP_INTERVAL_MS, 2_000 + LAPSE_WAKE_MARGIN_MS],
    ["unrenewed but lapsing after the next pass: that pass sees it", [lease("c:1", 4_950)], SWEEP_INTERVAL_MS, null],
    ["unrenewed, lapsing 12 s out: a later pass gets closer first", [lease("c:1", 12_000)], SWEEP_INTERVAL_MS, null],
    ["the soonest of several", [lease("c:1", 3_000), lease("c:2", 1_200), lease("d:1", 2_000)], SWEEP_INTERVAL_MS, 1_200 + LAPSE_WAKE_MARGIN_MS],
    ["this process's own leases never wake it", [lease(ME, 1_000)], SWEEP_INTERVAL_MS, null],
    ["already lapsed: the pass that listed it judged it, no wake", [lease("c:1", -5)], SWEEP_INTERVAL_MS, null],
    ["lapsing now (live, 0 ms left by rounding): the margin alone", [lease("c:1", 0, true)], SWEEP_INTERVAL_MS, LAPSE_WAKE_MARGIN_MS],
    ["the pass is due sooner than the lapse (a pass ran long): no wake", [lease("c:1", 2_000)], 1_500, null],
  ];
  for (const [name, leases, next_pass_in_ms, want] of rows) {
    test(name, () => {
      expect(lapseWakeIn({ leases, self_owner: ME, ttl_ms, next_pass_in_ms })).toBe(want);
    });
  }

  test("TTL 3 s (heartbeat 1 s): a lease renewed a heartbeat ago is not waited on; one 1.6 s unrenewed is", () => {
    const at = (remaining_ms: number) => lapseWakeIn({ leases: [lease("b:1", remaining_ms)], self_owner: ME, ttl_ms: 3_000, next_pass_in_ms: SWEEP_INTERVAL_MS });
    expect(at(2_000)).toBeNull(); // renewed 1 s ago: on time
    expect(at(1_600)).toBeNull(); // 1.4 s: within a heartbeat and a half
    expect(at(1_400)).toBe(1_400 + LAPSE_WAKE_MARGIN_MS);
  });
});
