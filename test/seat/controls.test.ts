// A person's controls (src/seat/controls.ts) on the in-memory coordination store: the pause
// set mirrored with its current values first, every stop from start() on heard once, and a
// stop stored before start() not acted on — all on one watch of the controls slot.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import type { KvSlot } from "../../src/coord/contract.ts";
import { MemoryCoordination } from "../../src/coord/index.ts";
import { memoryLogger } from "../../src/log.ts";
import { SeatControls, type ControlsHooks } from "../../src/seat/controls.ts";

/** The slot with the watches started through it counted (a pass-through, same store). */
function countingWatches(inner: KvSlot): { slot: KvSlot; watches: () => number } {
  let n = 0;
  return { watches: () => n, slot: { ...inner, watch: (onEntry, opts) => ((n += 1), inner.watch(onEntry, opts)) } };
}

function rig() {
  const clock = new FakeClock();
  const { log } = memoryLogger();
  const coord = new MemoryCoordination({ clock, log });
  const slot = coord.node().slot("controls");
  const heard: string[] = [];
  const hooks: ControlsHooks = {
    paused: (h, c) => void heard.push(`paused ${h} by ${c.by}`),
    resumed: (h) => void heard.push(`resumed ${h}`),
    stopped: (h, c) => void heard.push(`stopped ${h} ${c.id}`),
  };
  const writer = new SeatControls({ slot, log });
  return { clock, log, slot, heard, hooks, writer };
}

describe("seat controls", () => {
  test("current pauses first, later pauses and resumes, and only the stops written after start are heard", async () => {
    const r = rig();
    await r.writer.pause("a", "ann", 1);
    await r.writer.requestStop("b", "bob", 2, "old-stop");
    const counted = countingWatches(r.slot);
    const c = new SeatControls({ slot: counted.slot, log: r.log });
    await c.start(r.hooks);
    await r.clock.advance(0);
    expect(r.heard).toEqual(["paused a by ann"]);
    expect(c.pausedLocally("a")?.by).toBe("ann");

    await r.writer.requestStop("b", "bob", 3, "new-stop");
    await r.writer.requestStop("c", "cat", 4, "first-stop");
    await r.writer.pause("d", "dan", 5);
    await r.writer.resume("a");
    await r.clock.advance(0);
    expect(r.heard).toEqual(["paused a by ann", "stopped b new-stop", "stopped c first-stop", "paused d by dan", "resumed a"]);
    expect(c.pausedLocally("a")).toBeNull();
    // One watch for both kinds.
    expect(counted.watches()).toBe(1);
    c.stop();
  });

  test("a stop written again after start is heard even at the key a stored stop had", async () => {
    const r = rig();
    await r.writer.requestStop("b", "bob", 1, "stored");
    const c = new SeatControls({ slot: r.slot, log: r.log });
    await c.start(r.hooks);
    await r.writer.requestStop("b", "bob", 2, "again");
    await r.writer.requestStop("b", "bob", 3, "and-again");
    await r.clock.advance(0);
    expect(r.heard).toEqual(["stopped b again", "stopped b and-again"]);
    c.stop();
  });
});
