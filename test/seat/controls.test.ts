// A person's controls (src/seat/controls.ts) on the in-memory store and on nats-server R1: the pause
// set mirrored with its current values first, every stop from start() on heard once, and a
// stop stored before start() not acted on — all on one watch of the controls slot.
import { afterAll, describe, expect, test } from "bun:test";
import { FakeClock, systemClock } from "../../src/clock.ts";
import type { KvSlot } from "../../src/coord/contract.ts";
import { createCoordination, MemoryCoordination } from "../../src/coord/index.ts";
import { memoryLogger } from "../../src/log.ts";
import { SeatControls, type ControlsHooks } from "../../src/seat/controls.ts";
import { waitFor } from "../support/fleet.ts";
import { startNats, type TestNats } from "../support/nats.ts";

/** The slot with the watches started through it counted (a pass-through, same store). */
function countingWatches(inner: KvSlot): { slot: KvSlot; watches: () => number } {
  let n = 0;
  return { watches: () => n, slot: { ...inner, watch: (onEntry, opts) => ((n += 1), inner.watch(onEntry, opts)) } };
}

interface Backend {
  name: string;
  open(): Promise<{ slot: KvSlot; close(): Promise<void> }>;
  /** Until `heard` has n entries (the watch is asynchronous on a broker). */
  settle(heard: string[], n: number): Promise<void>;
}

const clock = new FakeClock();
const { log } = memoryLogger();
let nats: TestNats | null = null;
afterAll(async () => {
  await nats?.stop();
});

const BACKENDS: Backend[] = [
  {
    name: "in memory",
    open: async () => ({ slot: new MemoryCoordination({ clock, log }).node().slot("controls"), close: async () => undefined }),
    settle: () => clock.advance(0),
  },
  {
    name: "nats-server R1",
    open: async () => {
      nats ??= await startNats(1);
      const nc = await nats.connect();
      const coord = await createCoordination({ type: "embedded-kv", nc, replicas: 1, clock: systemClock, log });
      // A fresh slot per case: what an earlier case wrote is purged first.
      const slot = coord.slot("controls");
      for (const k of await slot.keys()) await slot.purge(k);
      return { slot, close: async () => (await coord.close(), await nc.close()) };
    },
    settle: (heard, n) => waitFor(`${n} controls heard`, async () => (heard.length >= n ? true : null), SETTLE_WITHIN_MS, () => JSON.stringify(heard)).then(() => undefined),
  },
];
/** Generous: a watch on a local broker hands a write over in milliseconds. */
const SETTLE_WITHIN_MS = 20_000;

for (const b of BACKENDS) {
  describe(`seat controls (${b.name})`, () => {
    test("current pauses first, later pauses and resumes, and only the stops written after start are heard", async () => {
      const { slot, close } = await b.open();
      const heard: string[] = [];
      const hooks = hooksInto(heard);
      const writer = new SeatControls({ slot, log });
      await writer.pause("a", "ann", 1);
      await writer.requestStop("b", "bob", 2, "old-stop");
      const counted = countingWatches(slot);
      const c = new SeatControls({ slot: counted.slot, log });
      await c.start(hooks);
      await b.settle(heard, 1);
      expect(heard).toEqual(["paused a by ann"]);
      expect(c.pausedLocally("a")?.by).toBe("ann");

      await writer.requestStop("b", "bob", 3, "new-stop");
      await writer.requestStop("c", "cat", 4, "first-stop");
      await writer.pause("d", "dan", 5);
      await writer.resume("a");
      await b.settle(heard, 5);
      // The stored stop would have come first (a watch hands over in store order).
      expect(heard).toEqual(["paused a by ann", "stopped b new-stop", "stopped c first-stop", "paused d by dan", "resumed a"]);
      expect(c.pausedLocally("a")).toBeNull();
      // One watch for both kinds.
      expect(counted.watches()).toBe(1);
      c.stop();
      await close();
    }, 60_000);

    test("a stop written again after start is heard even at the key a stored stop had", async () => {
      const { slot, close } = await b.open();
      const heard: string[] = [];
      const writer = new SeatControls({ slot, log });
      await writer.requestStop("b", "bob", 1, "stored");
      const c = new SeatControls({ slot, log });
      await c.start(hooksInto(heard));
      await writer.requestStop("b", "bob", 2, "again");
      await writer.requestStop("b", "bob", 3, "and-again");
      await b.settle(heard, 2);
      expect(heard).toEqual(["stopped b again", "stopped b and-again"]);
      c.stop();
      await close();
    }, 60_000);
  });
}

function hooksInto(heard: string[]): ControlsHooks {
  return {
    paused: (h, c) => void heard.push(`paused ${h} by ${c.by}`),
    resumed: (h) => void heard.push(`resumed ${h}`),
    stopped: (h, c) => void heard.push(`stopped ${h} ${c.id}`),
  };
}
