// "Registration fails, mailbox created anyway" (spec: Seat Ownership § The removed seat): a
// node whose write to crewlet_mailboxes fails still creates the seat's mailboxes
// (seat_mailbox_unregistered), because a seat losing mail is worse than a mailbox with no
// record — and the record the walk could not write is made up by the maintenance sweep: a
// seat still in the company is registered on the next sweep; a seat removed before any
// sweep ran is found on the broker (seat_mailbox_discovered) and retired after the grace,
// so the failed write never leaves a mailbox nobody will retire. On the in-memory twin with
// one FakeClock; the walk's own case on a real nats-server is test/queue/mailbox-walk.test.ts.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { MemoryCoordination, StoreFaults } from "../../src/coord/index.ts";
import { decodeMailboxRecord, ensureRegisteredMailboxes } from "../../src/duty/mailbox-registry.ts";
import { MailboxSweep } from "../../src/duty/retirement.ts";
import { memoryLogger } from "../../src/log.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";

const GRACE_MS = 60_000;
const LEASE_TTL_MS = 45_000;

async function walkWithFailedRegistration(seat: string) {
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const { log, sink } = memoryLogger("debug", clock);
  const faults = new StoreFaults(clock);
  const coord = new MemoryCoordination({ clock, log, lease_ttl_ms: LEASE_TTL_MS });
  const node = coord.node({ faults });
  const registry = node.slot("mailboxes");
  const queue = new MemoryQueue({ clock, log });
  await queue.ensureStreams();
  faults.failNext((op) => op.bucket === registry.bucket && op.kind === "create" && op.key === seat);
  await ensureRegisteredMailboxes(queue, registry, ["ops", seat], clock, log);
  let roster = new Set(["ops", seat]);
  const sweep = new MailboxSweep({
    owner: "a:retire.1",
    node_id: "a",
    registry,
    leases: node.leases,
    queue,
    roster: async () => ({ ok: true, epoch: 1, seats: roster }),
    lease_ttl_ms: () => LEASE_TTL_MS,
    grace_ms: GRACE_MS,
    clock,
    log,
  });
  const boxes = async (h: string) => (await queue.listMailboxes()).filter((m) => m.handle === h).map((m) => m.kind).sort();
  return { clock, sink, registry, sweep, boxes, remove: (h: string) => (roster = new Set([...roster].filter((x) => x !== h))) };
}

describe("a registration that fails", () => {
  test("is seat_mailbox_unregistered, the mailbox is created anyway, and the next sweep registers the seat", async () => {
    const w = await walkWithFailedRegistration("cy");
    expect(w.sink.events("seat_mailbox_unregistered").map((l) => l.fields.seat)).toEqual(["cy"]);
    expect(await w.boxes("cy")).toEqual(["inbox", "reflect"]);
    expect(await w.registry.get("cy")).toBeNull();
    expect(await w.registry.get("ops")).not.toBeNull();
    const s = await w.sweep.tick();
    expect(s).toMatchObject({ registered: 1, discovered: 0, stamped: 0, retired: 0 });
    expect(decodeMailboxRecord((await w.registry.get("cy"))!)).toMatchObject({ handle: "cy", absent_since: null, retiring: null });
    expect(await w.boxes("cy")).toEqual(["inbox", "reflect"]);
  });

  test("of a seat removed before any sweep: the sweep finds its mailbox on the broker and retires it after the grace", async () => {
    const w = await walkWithFailedRegistration("cy");
    w.remove("cy");
    const first = await w.sweep.tick();
    expect(first).toMatchObject({ discovered: 1, retired: 0 });
    expect(w.sink.events("seat_mailbox_discovered").map((l) => l.fields.seat)).toEqual(["cy"]);
    expect(await w.boxes("cy")).toEqual(["inbox", "reflect"]);
    // Not early: a sweep inside the grace leaves it.
    await w.clock.advance(GRACE_MS - 1_000);
    expect((await w.sweep.tick()).retired).toBe(0);
    await w.clock.advance(1_000);
    expect((await w.sweep.tick()).retired).toBe(1);
    expect(await w.boxes("cy")).toEqual([]);
    expect(await w.registry.get("cy")).toBeNull();
    // The seat that stayed is untouched.
    expect(await w.boxes("ops")).toEqual(["inbox", "reflect"]);
  });
});
