// The duty runner on the in-memory coordination store and a FakeClock: one holder per
// duty, a dead holder's duty taken on the first tick after its TTL, a graceful stop gives
// it back at once, an unknown claim skips the tick, and the last tick rides on the lease.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { MemoryCoordination, StoreFaults } from "../../src/coord/index.ts";
import { memoryLogger } from "../../src/log.ts";
import { DutyRunner, type DutyWork } from "../../src/duty/runner.ts";
import { dutyHoldings } from "../../src/duty/view.ts";
import { Watchdog } from "../../src/seat/watchdog.ts";

const TTL_MS = 30_000;
const TICK_MS = 1_000;

function work(ticks: string[], node: string, opts: { fail?: () => boolean } = {}): DutyWork {
  return {
    name: "probe",
    ttl_ms: TTL_MS,
    nextTickIn: () => TICK_MS,
    async tick(ctx) {
      ticks.push(`${node}@${ctx.epoch}`);
      if (opts.fail?.()) throw new Error("boom");
      return `tick by ${node}`;
    },
  };
}

function setup() {
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const { log, sink } = memoryLogger("debug", clock);
  const coord = new MemoryCoordination({ clock, log });
  const ticks: string[] = [];
  const node = (id: string, faults?: StoreFaults, fail?: () => boolean) =>
    new DutyRunner({ node_id: id, store: coord.node(faults ? { faults } : {}).duties, clock, log, duties: [work(ticks, id, { fail })] });
  return { clock, coord, ticks, node, sink };
}

describe("duty runner", () => {
  test("one node of two runs the duty, every tick under one epoch", async () => {
    const { clock, ticks, node } = setup();
    const a = node("a");
    const b = node("b");
    a.start();
    await clock.advance(10);
    b.start();
    await clock.advance(10 * TICK_MS);
    expect(ticks.length).toBeGreaterThanOrEqual(10);
    expect(new Set(ticks)).toEqual(new Set(["a@1"]));
    expect(b.status()[0]!.held).toBe(false);
    expect(b.status()[0]!.skipped).toContain("held by a:");
    await a.stop();
    await b.stop();
  });

  test("a dead holder's duty lapses and a peer takes it on the first tick after the TTL", async () => {
    const { clock, ticks, node } = setup();
    const a = node("a");
    const b = node("b");
    a.start();
    await clock.advance(10);
    b.start();
    await clock.advance(5 * TICK_MS);
    a.abandon();
    const died = clock.now();
    ticks.length = 0;
    await clock.advance(TTL_MS - 2 * TICK_MS);
    expect(ticks).toEqual([]);
    await clock.advance(4 * TICK_MS);
    expect(ticks[0]).toBe("b@2");
    // Not before the TTL, and within one tick of it (plus the renew that stamped the last tick).
    await b.stop();
    expect(clock.now() - died).toBeLessThan(TTL_MS + 5 * TICK_MS);
  });

  test("a graceful stop gives the duty back (duty_released) and a peer takes it on its next tick", async () => {
    const { clock, ticks, node, sink } = setup();
    const a = node("a");
    const b = node("b");
    a.start();
    await clock.advance(10);
    b.start();
    await clock.advance(3 * TICK_MS);
    await a.stop();
    expect(sink.lines.some((l) => l.event === "duty_released" && l.fields.duty === "probe")).toBe(true);
    ticks.length = 0;
    await clock.advance(TICK_MS + 10);
    expect(ticks).toEqual(["b@2"]);
    await b.stop();
  });

  test("a claim the store does not answer skips the tick: unknown is not ownership", async () => {
    const { clock, ticks, node, sink } = setup();
    const faults = new StoreFaults(clock);
    faults.unreachable = true;
    const a = node("a", faults);
    a.start();
    await clock.advance(5 * TICK_MS);
    expect(ticks).toEqual([]);
    expect(sink.lines.some((l) => l.event === "duty_claim_unknown")).toBe(true);
    faults.unreachable = false;
    await clock.advance(2 * TICK_MS);
    expect(ticks.length).toBeGreaterThan(0);
    // A held duty whose renewal goes unanswered skips too, and keeps its claim for later.
    faults.unreachable = true;
    const before = ticks.length;
    await clock.advance(3 * TICK_MS);
    expect(ticks.length).toBe(before);
    faults.unreachable = false;
    await clock.advance(2 * TICK_MS);
    expect(ticks.length).toBeGreaterThan(before);
    expect(new Set(ticks)).toEqual(new Set(["a@1"]));
    await a.stop();
  });

  test("the last tick (when, how long, outcome) rides on the lease for any node's fleet view", async () => {
    const { clock, coord, node } = setup();
    let failing = false;
    const a = node("a", undefined, () => failing);
    a.start();
    await clock.advance(2 * TICK_MS);
    let held = await dutyHoldings(coord.node().duties);
    expect(held).toHaveLength(1);
    expect(held[0]).toMatchObject({ duty: "probe", node: "a", epoch: 1 });
    expect(held[0]!.last_tick).toMatchObject({ outcome: "ok", detail: "tick by a" });
    failing = true;
    await clock.advance(TICK_MS);
    held = await dutyHoldings(coord.node().duties);
    expect(held[0]!.last_tick).toMatchObject({ outcome: "failed", detail: "boom" });
    await a.stop();
    expect(await dutyHoldings(coord.node().duties)).toEqual([]);
  });

  test("each duty loop is watched; a stopped runner leaves the watchdog nothing to watch", async () => {
    const clock = new FakeClock(0);
    const { log } = memoryLogger("debug", clock);
    const coord = new MemoryCoordination({ clock, log });
    const dog = new Watchdog({ clock, threshold_ms: () => 3_000, exit: () => undefined, notice: () => undefined });
    const r = new DutyRunner({ node_id: "a", store: coord.node().duties, clock, log, duties: [work([], "a")], watchdog: dog });
    r.start();
    expect(dog.watching).toEqual(["duty:probe"]);
    await clock.advance(3 * TICK_MS);
    await r.stop();
    expect(dog.watching).toEqual([]);
  });
});
