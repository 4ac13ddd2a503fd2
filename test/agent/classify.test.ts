import { describe, expect, test } from "bun:test";
import { dispose, type TurnEndKind } from "../../src/agent/classify.ts";
import { reachesOutside } from "../../src/agent/tools/contract.ts";

describe("a broken turn, by what its record proves", () => {
  test.each([
    // end, reached outside, settle, record, outcome, guard breach, gave up
    ["completed", false, "ack", true, "completed", false, false],
    ["completed", true, "ack", true, "completed", false, false],
    ["round_limit", true, "ack", true, "round_limit", false, false],
    ["broken", false, "nak", false, "retry", false, false],
    ["broken", true, "ack", true, "failed", false, true],
    ["fenced", false, "defer", false, "deferred", false, false],
    ["fenced", true, "ack", true, "failed", false, true],
    ["panicked", false, "ack", true, "failed", true, true],
    ["panicked", true, "ack", true, "failed", true, true],
  ] as const)("%s, reached=%p → %s", (end, reached, settle, record, outcome, breach, gaveUp) => {
    expect(dispose(end as TurnEndKind, reached)).toEqual({ settle, record, outcome, guard_breach: breach, gave_up: gaveUp });
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
