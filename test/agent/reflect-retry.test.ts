// What a failed reflection pass does next (src/agent/reflect.ts afterFailedReflection):
// never straight back — a refused key once made 25 model calls in a second.
import { describe, expect, test } from "bun:test";
import { FAILED_DELIVERIES_MAX, redeliveryDelayMs } from "../../src/agent/classify.ts";
import { ProviderError } from "../../src/agent/providers/contract.ts";
import { afterFailedReflection } from "../../src/agent/reflect.ts";
import { ack, nak } from "../../src/queue/contract.ts";

describe("after a failed reflection", () => {
  const rows: Array<[string, Parameters<typeof afterFailedReflection>[0], number, ReturnType<typeof afterFailedReflection>]> = [
    ["a permanent failure drops the pass", "permanent", 1, ack()],
    ["a prompt over the context drops the pass", "context_too_long", 1, ack()],
    ["a drain hands it to the next holder at once", "cancelled", 1, nak()],
    ["a passing failure waits the first delay", "transient", 1, nak(redeliveryDelayMs(1))],
    ["and a longer one later", "transient", 3, nak(redeliveryDelayMs(3))],
    ["a defect (not the provider's) waits too", null, 2, nak(redeliveryDelayMs(2))],
    ["given up after a turn's deliveries", "transient", FAILED_DELIVERIES_MAX, ack()],
  ];
  for (const [name, failure, deliveries, want] of rows) {
    test(name, () => expect(afterFailedReflection(failure, deliveries)).toEqual(want));
  }

  test("a refused key (401) is permanent through the provider's own classification", () => {
    const err = new ProviderError("main", "http", "401 unauthorized", 401);
    expect(afterFailedReflection(err.failure, 1)).toEqual(ack());
  });

  test("no passing failure comes straight back", () => {
    for (let n = 1; n < FAILED_DELIVERIES_MAX; n++) {
      const o = afterFailedReflection("transient", n);
      expect(o.kind).toBe("nak");
      expect(o.kind === "nak" && (o.delay_ms ?? 0) > 0).toBe(true);
    }
  });
});
