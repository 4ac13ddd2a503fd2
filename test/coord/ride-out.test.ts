// rideOut: a write tried again through an election, and given up at its deadline.
import { expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { StoreUnavailable } from "../../src/coord/contract.ts";
import { RIDE_OUT_EVERY_MS, RIDE_OUT_MS, rideOut } from "../../src/coord/ride-out.ts";

const cases: { name: string; failures: number; retryable: boolean; budget_ms: number; attempts: number | "throws" }[] = [
  { name: "lands at once", failures: 0, retryable: true, budget_ms: RIDE_OUT_MS, attempts: 1 },
  { name: "rides out three failures", failures: 3, retryable: true, budget_ms: RIDE_OUT_MS, attempts: 4 },
  { name: "a failure it may not retry is thrown at once", failures: 1, retryable: false, budget_ms: RIDE_OUT_MS, attempts: "throws" },
  { name: "an election longer than the budget is thrown", failures: 1_000, retryable: true, budget_ms: 10 * RIDE_OUT_EVERY_MS, attempts: "throws" },
];

for (const c of cases) {
  test(`rideOut: ${c.name}`, async () => {
    const clock = new FakeClock();
    let calls = 0;
    const write = async () => {
      if (++calls <= c.failures) throw new StoreUnavailable("503 (injected)");
      return "landed";
    };
    const out = rideOut(clock, clock.now() + c.budget_ms, write, () => c.retryable).then(
      (v) => v,
      (e: Error) => e,
    );
    for (let i = 0; i < 200; i++) await clock.advance(RIDE_OUT_EVERY_MS);
    const got = await out;
    if (c.attempts === "throws") {
      expect(got).toBeInstanceOf(StoreUnavailable);
      expect(calls).toBeLessThanOrEqual(c.budget_ms / RIDE_OUT_EVERY_MS);
    } else expect(got).toEqual({ value: "landed", attempts: c.attempts });
  });
}
