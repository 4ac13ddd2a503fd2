// The graceful stop's rule (src/node/shutdown.ts): every step awaited within its bound, the
// drain within its budget, the whole stop under the unit's TimeoutStopSec. FakeClock; the
// real-process case (three members SIGTERMed at once) is test/fleet/stop-all.test.ts.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { FakeClock } from "../../src/clock.ts";
import { memoryLogger } from "../../src/log.ts";
import { CANCEL_SETTLE_WAIT_MS, DRAIN_TURN_WAIT_MS } from "../../src/seat/host.ts";
import {
  runStopSteps,
  SEAT_DRAIN_WITHIN_MS,
  stepBound,
  STOP_DRAIN_BUDGET_MS,
  STOP_STEP_WITHIN_MS,
  STOP_TOTAL_BUDGET_MS,
  type StopStep,
} from "../../src/node/shutdown.ts";

test("stepBound: a step's own bound, the default without one, never past the budget's end", () => {
  const rows: [now: number, deadline: number, within: number | undefined, bound: number][] = [
    [0, 25_000, 3_000, 3_000],
    [0, 25_000, undefined, STOP_STEP_WITHIN_MS],
    [24_000, 25_000, 3_000, 1_000],
    [25_000, 25_000, 3_000, 0],
    [26_000, 25_000, undefined, 0],
  ];
  for (const [now, deadline, within, bound] of rows) expect([now, deadline, within, stepBound(now, deadline, within)]).toEqual([now, deadline, within, bound]);
});

async function runOnClock(steps: StopStep[], budget_ms: number) {
  const clock = new FakeClock();
  const { log, sink } = memoryLogger("debug", clock);
  let done = false;
  const started = clock.now();
  const running = runStopSteps(steps, { budget_ms, clock, log, phase: "drain" }).then((r) => ((done = true), r));
  for (let i = 0; i < 1_000 && !done; i++) await clock.advance(100);
  return { report: await running, sink, took_ms: clock.now() - started };
}

const never = () => new Promise<void>(() => {});

test("a step that never ends is abandoned at its bound and the next one runs; a failure is logged and the stop goes on", async () => {
  const told: number[] = [];
  const ran: string[] = [];
  const { report, sink, took_ms } = await runOnClock(
    [
      { name: "hangs", run: (ms) => (told.push(ms), never()), within_ms: 3_000 },
      { name: "fails", run: () => Promise.reject(new Error("no quorum")) },
      { name: "quick", run: () => void ran.push("quick") },
    ],
    25_000,
  );
  expect(report.map((r) => [r.name, r.outcome])).toEqual([
    ["hangs", "abandoned"],
    ["fails", "failed"],
    ["quick", "done"],
  ]);
  expect(told).toEqual([3_000]);
  expect(ran).toEqual(["quick"]);
  expect(took_ms).toBeLessThanOrEqual(3_100);
  expect(sink.events("node_stop_step_abandoned").map((l) => l.fields)).toEqual([{ phase: "drain", step: "hangs", within_ms: 3_000, budget_left_ms: 22_000 }]);
  expect(sink.events("node_stop_step_failed").map((l) => l.fields.step)).toEqual(["fails"]);
});

test("once the budget is spent the rest are skipped, each named; a step is told what is left of the budget", async () => {
  const told: number[] = [];
  const { report, sink, took_ms } = await runOnClock(
    [
      { name: "a", run: never, within_ms: 4_000 },
      { name: "b", run: (ms) => (told.push(ms), never()), within_ms: 4_000 },
      { name: "c", run: () => undefined },
      { name: "d", run: () => undefined },
    ],
    6_000,
  );
  expect(report.map((r) => [r.name, r.outcome])).toEqual([
    ["a", "abandoned"],
    ["b", "abandoned"],
    ["c", "skipped"],
    ["d", "skipped"],
  ]);
  expect(told).toEqual([2_000]);
  expect(took_ms).toBeLessThanOrEqual(6_100);
  expect(sink.events("node_stop_step_skipped").map((l) => l.fields.step)).toEqual(["c", "d"]);
});

test("a step that fails after it was abandoned is still logged, never an unhandled rejection", async () => {
  let fail!: (err: Error) => void;
  const clock = new FakeClock();
  const { log, sink } = memoryLogger("debug", clock);
  const running = runStopSteps([{ name: "late", run: () => new Promise<void>((_, reject) => (fail = reject)), within_ms: 1_000 }], { budget_ms: 5_000, clock, log, phase: "drain" });
  await clock.advance(1_000);
  expect((await running).map((r) => r.outcome)).toEqual(["abandoned"]);
  fail(new Error("answered at last"));
  await clock.advance(10);
  expect(sink.events("node_stop_step_failed").map((l) => l.fields.step)).toEqual(["late"]);
});

test("the whole stop fits under the unit's TimeoutStopSec, and the seat drain has room for a running turn's hand-back", () => {
  const unit = readFileSync(resolve(import.meta.dir, "../../appliance/crewlet.service"), "utf8");
  const m = /^TimeoutStopSec=(\d+)$/m.exec(unit);
  expect(m).not.toBeNull();
  const timeout_ms = Number(m![1]) * 1000;
  // systemd SIGKILLs past it: the node must be done before, with room for the process to exit.
  expect(STOP_TOTAL_BUDGET_MS).toBeLessThan(timeout_ms);
  expect(SEAT_DRAIN_WITHIN_MS).toBeGreaterThan(DRAIN_TURN_WAIT_MS + CANCEL_SETTLE_WAIT_MS);
  expect(SEAT_DRAIN_WITHIN_MS).toBeLessThanOrEqual(STOP_DRAIN_BUDGET_MS);
});
