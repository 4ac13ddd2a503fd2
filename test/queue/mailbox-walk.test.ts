// The boot walk's one retry round: a create that fails in a burst is tried once more before
// the walk fails; one that keeps failing still fails it. The in-memory queue with a fault
// injected in front of ensureMailbox (the real walk, the real twin behind it). Then the
// walk the node calls (with the registry step) on a real nats-server.
import { expect, test } from "bun:test";
import { FakeClock, systemClock } from "../../src/clock.ts";
import { decodeSlotKey } from "../../src/coord/bucket.ts";
import { createCoordination, StoreFaults } from "../../src/coord/index.ts";
import { decodeMailboxRecord, encodeRecord, ensureRegisteredMailboxes } from "../../src/duty/mailbox-registry.ts";
import { memoryLogger } from "../../src/log.ts";
import { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { ensureSeatMailboxes } from "../../src/queue/mailboxes.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { AGENT_STREAMS, durableName, seatMailboxes } from "../../src/queue/topics.ts";
import { startNats } from "../support/nats.ts";
import { whileForming } from "../support/forming.ts";

async function faulty(failuresPerBox: number) {
  const { log, sink } = memoryLogger();
  const queue = new MemoryQueue({ clock: new FakeClock(), log });
  await whileForming(() => queue.ensureStreams());
  const tries = new Map<string, number>();
  const real = queue.ensureMailbox.bind(queue);
  queue.ensureMailbox = async (subject: string, group: string) => {
    const n = (tries.get(group) ?? 0) + 1;
    tries.set(group, n);
    if (n <= failuresPerBox && group.endsWith("-reflect")) throw new Error("TIMEOUT");
    return real(subject, group);
  };
  return { queue, log, sink };
}

test("a create that timed out once is retried, and the walk succeeds", async () => {
  const { queue, log, sink } = await faulty(1);
  const res = await ensureSeatMailboxes(queue, ["a", "b", "c"], new FakeClock(), log, 4);
  expect(res.count).toBe(6);
  expect(sink.events("seat_mailbox_create_retrying")[0]!.fields.failed).toBe(3);
  expect((await queue.listMailboxes()).length).toBe(6);
});

test("a create that fails twice fails the walk, naming it", async () => {
  const { queue, log } = await faulty(2);
  await expect(ensureSeatMailboxes(queue, ["a", "b"], new FakeClock(), log, 4)).rejects.toThrow(/2 of 4 failed/);
});

test("a long walk says how far it is every 10 s, and leaves no timer behind", async () => {
  const { log, sink } = memoryLogger();
  const clock = new FakeClock();
  const queue = new MemoryQueue({ clock, log });
  await whileForming(() => queue.ensureStreams());
  const real = queue.ensureMailbox.bind(queue);
  // Every create takes 1 s of the walk's clock; two at a time, 8 mailboxes take 4 s.
  queue.ensureMailbox = async (subject: string, group: string) => {
    await clock.sleep(1_000);
    return real(subject, group);
  };
  const walk = ensureSeatMailboxes(queue, ["a", "b", "c", "d"], clock, log, 2);
  await clock.advance(3_000);
  expect(sink.events("seat_mailbox_walk_progress")).toEqual([]);
  await clock.advance(3_000);
  await walk;
  expect(sink.events("seat_mailbox_created")[0]!.fields).toMatchObject({ count: 8, created: 8 });
  const slow = ensureSeatMailboxes(queue, ["e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p"], clock, log, 1);
  // The line's timer was set before the first create's, so at 10 s it runs before the tenth
  // create that ends at the same instant.
  await clock.advance(10_000);
  expect(sink.events("seat_mailbox_walk_progress").map((l) => l.fields)).toEqual([{ done: 9, of: 24, elapsed_ms: 10_000 }]);
  await clock.advance(14_000);
  await slow;
  await clock.advance(60_000);
  expect(sink.events("seat_mailbox_walk_progress").map((l) => l.fields.done)).toEqual([9, 19]);
});

// ---- the node's walk, on JetStream ---------------------------------------------------------
// ensureRegisteredMailboxes is what src/node/node.ts calls at boot and on each company
// change: the registry step (crewlet_mailboxes), then this walk. A second connection watches
// what the walk sends the broker — consumer creates on CREWLET_AGENT and writes to the
// registry's subjects — in the order the walk's one connection sent them.

interface Seen {
  kind: "create" | "register";
  handle: string;
}

async function jetstreamWalk() {
  const nats = await startNats(1);
  const nc = await nats.connect({ name: "walker" });
  const watcher = await nats.connect({ name: "watcher" });
  const { log, sink } = memoryLogger();
  const faults = new StoreFaults(systemClock);
  const queue = new JetStreamQueue({ nc, replicas: 1, clock: systemClock, log });
  await whileForming(() => queue.ensureStreams());
  const coord = await createCoordination({ type: "embedded-kv", nc, replicas: 1, clock: systemClock, log, faults });
  const registry = coord.slot("mailboxes");
  const seen: Seen[] = [];
  const durables = new Map<string, string>();
  const track = (handles: string[]) => {
    for (const h of handles) for (const b of seatMailboxes(h)) durables.set(durableName(b.group), h);
  };
  const creates = watcher.subscribe(`$JS.API.CONSUMER.>`, {
    callback: (_err, m) => {
      const t = m.subject.split(".");
      if (!t.includes("CREATE") || !t.some((x) => AGENT_STREAMS.includes(x))) return;
      const h = t.map((x) => durables.get(x)).find((x) => x !== undefined);
      if (h) seen.push({ kind: "create", handle: h });
    },
  });
  const writes = watcher.subscribe(`$KV.${registry.bucket}.>`, {
    callback: (_err, m) => seen.push({ kind: "register", handle: decodeSlotKey(m.subject.split(".").slice(2).join(".")) }),
  });
  await watcher.flush();
  // Both the walker's messages and the watcher's subscriptions pass one server: a flush on
  // each after a walk means everything it sent has reached the watcher.
  const settle = async () => {
    await nc.flush();
    await watcher.flush();
  };
  return {
    queue,
    registry,
    faults,
    log,
    sink,
    seen,
    track,
    settle,
    async teardown() {
      creates.unsubscribe();
      writes.unsubscribe();
      await coord.close();
      await queue.close();
      await nc.close();
      await watcher.close();
      await nats.stop();
    },
  };
}

const SEATS = ["ada", "bea", "cy", "dot", "eve", "fay"];

test("jetstream: the node's walk registers each seat before its mailboxes; a second walk creates nothing and writes nothing", async () => {
  const w = await jetstreamWalk();
  try {
    w.track(SEATS);
    const first = await ensureRegisteredMailboxes(w.queue, w.registry, SEATS, systemClock, w.log);
    await w.settle();
    expect(first.count).toBe(12);
    expect(w.seen.filter((s) => s.kind === "create")).toHaveLength(12);
    expect(w.seen.filter((s) => s.kind === "register").map((s) => s.handle).sort()).toEqual([...SEATS].sort());
    for (const h of SEATS) {
      const registered = w.seen.findIndex((s) => s.kind === "register" && s.handle === h);
      const created = w.seen.findIndex((s) => s.kind === "create" && s.handle === h);
      expect(registered).toBeGreaterThanOrEqual(0);
      expect(created).toBeGreaterThan(registered);
    }
    const line1 = w.sink.events("seat_mailbox_created")[0]!.fields;
    expect(line1).toMatchObject({ created: 12, present: 0, registry_listed: true, registry_visited: 6, registered: 6, unregistered: 0 });

    w.seen.length = 0;
    const again = await ensureRegisteredMailboxes(w.queue, w.registry, SEATS, systemClock, w.log);
    await w.settle();
    expect(again.count).toBe(12);
    expect(w.seen).toEqual([]);
    const line2 = w.sink.events("seat_mailbox_created")[1]!.fields;
    expect(line2).toMatchObject({ created: 0, present: 12, registry_visited: 0, registered: 0 });
    expect((await w.registry.keys()).sort()).toEqual([...SEATS].sort());
  } finally {
    await w.teardown();
  }
}, 60_000);

test("jetstream: a create that timed out is retried, and the walk succeeds", async () => {
  const w = await jetstreamWalk();
  try {
    w.track(SEATS);
    const tries = new Map<string, number>();
    const real = w.queue.ensureMailbox.bind(w.queue);
    // The answer of the first create of every reflect box is lost (what a burst past the
    // JetStream API timeout looks like to the caller); everything else is the broker's.
    w.queue.ensureMailbox = async (subject: string, group: string) => {
      const n = (tries.get(group) ?? 0) + 1;
      tries.set(group, n);
      if (n === 1 && group.endsWith("-reflect")) throw new Error("TIMEOUT");
      return real(subject, group);
    };
    const res = await ensureRegisteredMailboxes(w.queue, w.registry, SEATS, systemClock, w.log);
    expect(res.count).toBe(12);
    expect(w.sink.events("seat_mailbox_create_retrying")[0]!.fields).toMatchObject({ failed: 6, of: 12 });
    expect(w.sink.events("seat_mailbox_create_failed")).toEqual([]);
    const listed = (await w.queue.listMailboxes()).filter((m) => SEATS.includes(m.handle));
    expect(listed).toHaveLength(12);
    expect(listed.filter((m) => m.kind === "reflect")).toHaveLength(6);
  } finally {
    await w.teardown();
  }
}, 60_000);

test("jetstream: a registration that fails is seat_mailbox_unregistered and the mailbox is created anyway; the next walk registers it", async () => {
  const w = await jetstreamWalk();
  try {
    w.track(SEATS);
    w.faults.failNext((op) => op.bucket === w.registry.bucket && op.kind === "create" && op.key === "cy");
    await ensureRegisteredMailboxes(w.queue, w.registry, SEATS, systemClock, w.log);
    expect(w.sink.events("seat_mailbox_unregistered").map((l) => l.fields.seat)).toEqual(["cy"]);
    expect((await w.queue.listMailboxes()).filter((m) => m.handle === "cy")).toHaveLength(2);
    expect(await w.registry.get("cy")).toBeNull();
    await w.settle();
    w.seen.length = 0;
    await ensureRegisteredMailboxes(w.queue, w.registry, SEATS, systemClock, w.log);
    await w.settle();
    expect(w.seen).toEqual([{ kind: "register", handle: "cy" }]);
    expect(decodeMailboxRecord((await w.registry.get("cy"))!)!.retiring).toBeNull();
  } finally {
    await w.teardown();
  }
}, 60_000);

test("jetstream: a seat whose record marks a retirement in flight gets its mailboxes only after the retirement is done", async () => {
  const w = await jetstreamWalk();
  try {
    w.track(["gus", "hal"]);
    const now = systemClock.now();
    await w.registry.create("gus", encodeRecord({ handle: "gus", registered_at: now - 1, absent_since: now - 1, retiring: { owner: "sweep:1", since: now } }));
    const walk = ensureRegisteredMailboxes(w.queue, w.registry, ["gus", "hal"], systemClock, w.log);
    // The walk reads the mark and waits on it, polling the record.
    for (let i = 0; i < 100 && w.sink.events("seat_mailbox_waiting_on_retirement").length === 0; i++) await Bun.sleep(50);
    expect(w.sink.events("seat_mailbox_waiting_on_retirement")[0]!.fields).toMatchObject({ seat: "gus", retiring_owner: "sweep:1" });
    await Bun.sleep(1_500);
    await w.settle();
    expect(w.seen.filter((s) => s.kind === "create" && s.handle === "gus")).toEqual([]);
    // The retirement ends as a sweep's does: its record deleted, conditional on the mark.
    const marked = (await w.registry.get("gus"))!;
    await w.registry.delete("gus", marked.revision);
    await walk;
    expect((await w.queue.listMailboxes()).filter((m) => m.handle === "gus")).toHaveLength(2);
    const rec = decodeMailboxRecord((await w.registry.get("gus"))!)!;
    expect(rec).toMatchObject({ absent_since: null, retiring: null });
  } finally {
    await w.teardown();
  }
}, 60_000);
