import { describe, expect, test } from "bun:test";
import { dispose, FAILED_DELIVERIES_MAX, redeliveryDelayMs, REDELIVERY_BASE_MS, REDELIVERY_MAX_MS, type TurnEndKind } from "../../src/agent/classify.ts";
import type { FailureClass } from "../../src/agent/providers/failure.ts";
import { reachesOutside } from "../../src/agent/tools/contract.ts";

describe("a turn's end, by what its record proves", () => {
  const last = FAILED_DELIVERIES_MAX;
  test.each([
    // end, reached outside, failure, delivery count, settle, delayed, record, outcome, guard breach, gave up, tell
    ["completed", false, null, 1, "ack", false, true, "completed", false, false, false],
    ["completed", true, null, 1, "ack", false, true, "completed", false, false, false],
    ["round_limit", true, null, 1, "ack", false, true, "round_limit", false, false, false],
    ["broken", false, "transient", 1, "nak", true, false, "retry", false, false, false],
    ["broken", false, "transient", last - 1, "nak", true, false, "retry", false, false, false],
    ["broken", false, "transient", last, "reject", false, false, "failed", false, true, true],
    ["broken", false, null, 1, "nak", true, false, "retry", false, false, false],
    ["broken", false, null, last, "reject", false, false, "failed", false, true, true],
    ["broken", false, "permanent", 1, "reject", false, false, "failed", false, true, true],
    ["broken", false, "context_too_long", 1, "reject", false, false, "failed", false, true, true],
    ["broken", true, "transient", 1, "ack", false, true, "failed", false, true, true],
    ["broken", true, "permanent", 1, "ack", false, true, "failed", false, true, true],
    ["cancelled", false, "cancelled", 1, "nak", false, false, "handed_back", false, false, false],
    ["cancelled", true, "cancelled", 1, "ack", false, true, "failed", false, true, true],
    ["fenced", false, null, 1, "defer", false, false, "deferred", false, false, false],
    ["fenced", true, null, 1, "ack", false, true, "failed", false, true, true],
    ["panicked", false, null, 1, "ack", false, true, "failed", true, true, true],
    ["panicked", true, null, 1, "ack", false, true, "failed", true, true, true],
  ] as const)("%s reached=%p failure=%p delivery %p → %s", (end, reached, failure, count, settle, delayed, record, outcome, breach, gaveUp, tell) => {
    expect(dispose({ end: end as TurnEndKind, reached_outside: reached, failure: failure as FailureClass | null, delivery_count: count })).toEqual({
      settle,
      delayed,
      record,
      outcome,
      guard_breach: breach,
      gave_up: gaveUp,
      tell,
    });
  });
});

describe("a failed delivery's NAK delay grows with the delivery count, never immediate", () => {
  test.each([
    [1, REDELIVERY_BASE_MS],
    [2, REDELIVERY_BASE_MS * 2],
    [3, REDELIVERY_BASE_MS * 4],
    [0, REDELIVERY_BASE_MS],
    [40, REDELIVERY_MAX_MS],
  ])("delivery %p → %p ms", (count, want) => {
    expect(redeliveryDelayMs(count)).toBe(want);
    expect(redeliveryDelayMs(count)).toBeGreaterThan(0);
  });
});

describe("what counts as reaching outside", () => {
  test.each([
    // source, readOnly, openWorld, estateWrite, counts
    ["mcp", false, false, false, true],
    ["mcp", true, false, false, false],
    ["mcp", true, true, false, true],
    ["builtin", false, true, false, true],
    ["builtin", false, false, true, true],
    ["builtin", true, false, false, false],
    // A built-in nobody classified proves nothing.
    ["builtin", false, false, false, false],
  ] as const)("%s readOnly=%p openWorld=%p estateWrite=%p → %p", (source, readOnly, openWorld, estateWrite, counts) => {
    expect(reachesOutside({ source, readOnly, openWorld, estateWrite })).toBe(counts);
  });
});
