// A duty's unit of work never outlasts the watchdog's threshold (the lease TTL): a call
// held across a leader election is a failed tick, not a wedged loop that ends a healthy node.
import { describe, expect, test } from "bun:test";
import type { SweepStep } from "../../src/approvals/desk.ts";
import { systemClock } from "../../src/clock.ts";
import { ApprovalsDuty } from "../../src/duty/approvals.ts";
import { CallBoundExceeded } from "../../src/duty/bound.ts";
import { ObjectCollector } from "../../src/duty/object-collector.ts";
import { silentLogger } from "../../src/log.ts";

const BOUND_MS = 50;
const never = <T>() => new Promise<T>(() => undefined);

function ctx(beats: number[]) {
  return { epoch: 1, signal: new AbortController().signal, beat: () => void beats.push(Date.now()) };
}

describe("a duty's units are bounded by the node's call bound", () => {
  test("the object collector: a listing that never answers fails the tick at the bound", async () => {
    const slot = { put: never, get: never, delete: never, keys: never } as never;
    const files = { list: never, unfinished: never, delete: never, abandon: never } as never;
    const duty = new ObjectCollector({ node_id: "a", files, named: () => new Set(), copy: () => ({ whole: true, reason: null }) as never, slot, clock: systemClock, log: silentLogger, call_bound_ms: () => BOUND_MS });
    const beats: number[] = [];
    const started = Date.now();
    await expect(duty.tick(ctx(beats))).rejects.toBeInstanceOf(CallBoundExceeded);
    expect(beats.length).toBeGreaterThan(0);
    // Generous: the point is that it ends, well before any TTL a test fleet uses.
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  test("the approvals sweep: every unit stamps the watchdog, and one that hangs fails the tick at the bound", async () => {
    const units = ["approvals listing", "approval a1", "approval a2", "approval a3"];
    const beats: number[] = [];
    const quick = new ApprovalsDuty({
      desk: {
        sweep: async (step?: SweepStep) => {
          for (const u of units) await step!(u, () => Bun.sleep(5));
          return { expired: 0, retold: 0, closed: 0, forgotten: 0 };
        },
      },
      clock: systemClock,
      log: silentLogger,
      call_bound_ms: () => BOUND_MS,
    });
    await quick.tick(ctx(beats));
    expect(beats).toHaveLength(units.length);

    const hung = new ApprovalsDuty({ desk: { sweep: async (step?: SweepStep) => (await step!("approval a1", never), { expired: 0, retold: 0, closed: 0, forgotten: 0 }) }, clock: systemClock, log: silentLogger, call_bound_ms: () => BOUND_MS });
    await expect(hung.tick(ctx([]))).rejects.toThrow("approval a1: no answer within 50 ms");
  });
});
