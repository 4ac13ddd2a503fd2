import { describe, expect, test } from "bun:test";
import { workKeyOf } from "../../src/agent/ledger.ts";

describe("the completion ledger's work key", () => {
  test("the work key is the constituents' identity, order-free, ledgered types only", () => {
    const a = { type: "chat_mention" as const, event_id: "a" };
    const b = { type: "task_assigned" as const, event_id: "b" };
    const s = { type: "schedule" as const, event_id: "s" };
    expect(workKeyOf([a, b])).toBe(workKeyOf([b, a])!);
    expect(workKeyOf([a])).not.toBe(workKeyOf([a, b]));
    // A schedule fire is ledgered: its instant's event id is its work.
    expect(workKeyOf([s])).not.toBeNull();
    expect(workKeyOf([a, b, s])).not.toBe(workKeyOf([a, b])!);
    expect(workKeyOf([])).toBeNull();
  });
});
