// The data-node view (src/node/data-nodes.ts) on the in-memory coordination store: the seat
// sweep's presence listing is its read, and the posture check reads it itself only when
// nothing has for DATA_NODES_KEEP_READ_MS — without moving when an unreadable store
// withdraws the node (ROUTE_VIEW_STALE_MS after the last successful read).
import { describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import type { LeaseStore } from "../../src/coord/contract.ts";
import { MemoryCoordination, StoreFaults } from "../../src/coord/index.ts";
import { memoryLogger } from "../../src/log.ts";
import { DATA_NODES_KEEP_READ_MS, DataNodesView, feedingDataNodes } from "../../src/node/data-nodes.ts";
import { judgePosture, ROUTE_VIEW_STALE_MS } from "../../src/node/posture.ts";
import { SWEEP_INTERVAL_MS } from "../../src/seat/placement.ts";
import { PRESENCE_PREFIX, presenceKey, SEAT_PREFIX } from "../../src/seat/presence.ts";

/** The posture check's tick in node.ts (POSTURE_CHECK_MS). */
const POSTURE_TICK_MS = 1_000;
const TTL_MS = 45_000;

/** A pass-through store that counts the listings made through it (the view's own reads). */
function counted(inner: LeaseStore): { store: LeaseStore; lists: () => number } {
  let n = 0;
  return {
    lists: () => n,
    store: {
      acquire: (k, o) => inner.acquire(k, o),
      renew: (k, o, e, m) => inner.renew(k, o, e, m),
      release: (k, o, e) => inner.release(k, o, e),
      get: (k) => inner.get(k),
      list: (p) => ((n += 1), inner.list(p)),
      listWatched: (p, f) => inner.listWatched(p, f),
      protocolFloor: () => inner.protocolFloor(),
      now: () => inner.now(),
    },
  };
}

async function rig() {
  const clock = new FakeClock();
  const { log } = memoryLogger();
  const coord = new MemoryCoordination({ clock, log, lease_ttl_ms: TTL_MS });
  const faults = new StoreFaults(clock);
  const h = coord.node({ faults });
  const present = (id: string, roles: string[]) =>
    h.leases.acquire(presenceKey(id), { owner: `${id}:1`, preferred: id, ttl_ms: TTL_MS, meta: { roles, labels: {}, seats_held: 0, seats_by_group: {} }, gate: false });
  await present("d1", ["data"]);
  await present("s1", ["seats"]);
  const own = counted(h.leases);
  const view = new DataNodesView(own.store, clock);
  // What the node wires: the host's lease store feeds the view; the posture tick keeps it read.
  const sweepStore = feedingDataNodes(h.leases, view);
  clock.setInterval(() => view.keepRead(), POSTURE_TICK_MS);
  const renewAll = () => Promise.all(["d1", "s1"].map((id) => h.leases.renew(presenceKey(id), `${id}:1`, 1)));
  return { clock, faults, view, sweepStore, ownLists: own.lists, present, renewAll };
}

describe("data-node view", () => {
  test("a seats node's sweep listing is the view's read: a minute of sweeps, no read of its own", async () => {
    const r = await rig();
    await r.sweepStore.list(PRESENCE_PREFIX);
    for (let t = 0; t < 60_000; t += SWEEP_INTERVAL_MS) {
      await r.clock.advance(SWEEP_INTERVAL_MS - 1);
      await r.sweepStore.list(PRESENCE_PREFIX);
      await r.clock.advance(1);
      if (t % 15_000 === 0) await r.renewAll();
    }
    expect(r.ownLists()).toBe(0);
    // Routed within its cache from the fed listing, and a data node that joined is named at
    // the next sweep.
    expect(await r.view.list()).toEqual(["d1"]);
    await r.present("d2", ["data"]);
    await r.sweepStore.list(PRESENCE_PREFIX);
    expect(await r.view.list()).toEqual(["d1", "d2"]);
    expect(r.ownLists()).toBe(0);
    expect(r.view.unreadMs()).toBeLessThan(SWEEP_INTERVAL_MS);
  });

  test("a listing of another prefix is not the view's read", async () => {
    const r = await rig();
    await r.sweepStore.list(PRESENCE_PREFIX);
    for (let t = 0; t < DATA_NODES_KEEP_READ_MS; t += SWEEP_INTERVAL_MS) {
      await r.sweepStore.list(SEAT_PREFIX);
      await r.clock.advance(SWEEP_INTERVAL_MS);
    }
    expect(r.ownLists()).toBe(1);
  });

  test("unfed, the posture tick reads once per DATA_NODES_KEEP_READ_MS, first at boot", async () => {
    const r = await rig();
    await r.clock.advance(POSTURE_TICK_MS);
    expect(r.ownLists()).toBe(1);
    expect(await r.view.list()).toEqual(["d1"]);
    await r.clock.advance(DATA_NODES_KEEP_READ_MS - POSTURE_TICK_MS);
    expect(r.ownLists()).toBe(1);
    await r.clock.advance(POSTURE_TICK_MS);
    expect(r.ownLists()).toBe(2);
    await r.clock.advance(60_000);
    expect(r.ownLists()).toBe(2 + 60_000 / DATA_NODES_KEEP_READ_MS);
  });

  test("an unreadable store withdraws the node ROUTE_VIEW_STALE_MS after its last read, not before; retried every tick", async () => {
    const r = await rig();
    await r.sweepStore.list(PRESENCE_PREFIX);
    const lastRead = r.clock.now();
    r.faults.unreachable = true;
    const withdrawn = () => judgePosture({ data: false, in_service: false, behind: false, route_view_unread_ms: r.view.unreadMs() }).withdrawn;
    await r.sweepStore.list(PRESENCE_PREFIX).catch(() => undefined);
    await r.clock.advance(ROUTE_VIEW_STALE_MS - POSTURE_TICK_MS);
    expect(withdrawn()).toBe(false);
    // Tried on every tick once due: from DATA_NODES_KEEP_READ_MS after the last read on.
    expect(r.ownLists()).toBeGreaterThanOrEqual((ROUTE_VIEW_STALE_MS - DATA_NODES_KEEP_READ_MS) / POSTURE_TICK_MS - 1);
    await r.clock.advance(2 * POSTURE_TICK_MS);
    expect(r.clock.now() - lastRead).toBeGreaterThan(ROUTE_VIEW_STALE_MS);
    expect(withdrawn()).toBe(true);
    expect(await r.view.list()).toEqual([]);
    // The store answers again (d1's row lapsed meanwhile and is taken again): the next
    // tick reads, and the node is back.
    r.faults.unreachable = false;
    await r.present("d1", ["data"]);
    await r.clock.advance(POSTURE_TICK_MS);
    expect(withdrawn()).toBe(false);
    expect(await r.view.list()).toEqual(["d1"]);
  });
});
