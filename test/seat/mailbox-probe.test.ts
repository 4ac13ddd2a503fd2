// Deaf seats on a real nats-server (issue 11): a seat host with real JetStream leases and
// its inbox on the real queue, watched as a node watches it (seat/mailbox-wiring.ts) at
// test cadences. Each case makes a seat deaf the way the issue saw it and proves the watch
// finds it and the heal brings the mail back:
//   - the consumer's pointer set beyond the stream's last sequence: every new message lands
//     behind it, the counters read zero, only the probe can tell (healed by the rewind,
//     which also delivers the mail that arrived while deaf), on one server and on 3 members R3;
//   - the consumer deleted under its attachment (healed by handing the seat back: the
//     re-claim's attach creates the mailbox again);
//   - a delivery ack-pending on a pull made by a process that no longer holds the seat (a
//     fenced predecessor's lingering pull, here a pull on its own connection that never
//     settles): the new holder gets it at the watch's reset, not after the 30-minute ack wait;
// and a healthy fleet of seats under steady mail is never reported deaf, while the agent's
// handler never sees a probe.
import { afterEach, expect, test } from "bun:test";
import type { NatsConnection } from "nats";
import { systemClock } from "../../src/clock.ts";
import { createCoordination, type CoordinationHandle } from "../../src/coord/index.ts";
import { memoryLogger, type MemorySink } from "../../src/log.ts";
import { ack, nak, type Delivery, type Outcome } from "../../src/queue/contract.ts";
import { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { durableName, mailbox, mailboxStream } from "../../src/queue/topics.ts";
import { SeatHost } from "../../src/seat/host.ts";
import type { MailboxWatch } from "../../src/seat/mailbox-watch.ts";
import { watchHeldMailboxes } from "../../src/seat/mailbox-wiring.ts";
import { startNats, type TestNats } from "../support/nats.ts";

/** Lease TTL: heartbeat 1 s, a re-claim within a sweep (5 s). */
const TTL_MS = 3_000;
/** Test cadences: checks every 0.5 s, a probe per seat per second, deaf after 4 s ready
 * and unheard (generous for a loaded box; the shipped figures are 15 s, 60 s and 20 s). */
const CADENCE = { every_ms: 500, probe_every_ms: 1_000, probe_heard_within_ms: 4_000 };
/** A turn's backoff: many checks long, and past the probe's bound. */
const BACKOFF_MS = 6_000;
/** How long a paused seat is watched: a dozen checks, past the probe's bound twice. */
const PAUSED_WATCHED_MS = 3 * CADENCE.probe_heard_within_ms;
/** A turn at the busy seat, and the gap between its messages: a check mostly finds it busy. */
const BUSY_TURN_MS = 400;
/** Bounds the waits: far above what any step takes, far below the 30-minute ack wait. */
const WAIT_MS = 60_000;

const enc = new TextEncoder();
const dec = new TextDecoder();

interface Rig {
  nats: TestNats;
  nc: NatsConnection;
  coord: CoordinationHandle;
  queue: JetStreamQueue;
  host: SeatHost;
  watch: MailboxWatch;
  sink: MemorySink;
  /** Every body the agent's handler was given, per seat. */
  got: Map<string, string[]>;
  send(seat: string, body: string): Promise<number>;
  close(): Promise<void>;
}

let rig: Rig | null = null;
afterEach(async () => {
  await rig?.close();
  rig = null;
});

async function until(what: string, ok: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`not within ${WAIT_MS} ms: ${what}`);
    await Bun.sleep(50);
  }
}

async function makeRig(seats: string[], before?: (nats: TestNats, queue: JetStreamQueue) => Promise<void>, members = 1, settleMail: (body: string, d: Delivery) => Outcome = () => ack(), turn_ms = 0): Promise<Rig> {
  const nats = await startNats(members);
  const nc = await nats.connect();
  const { log, sink } = memoryLogger("debug");
  const queue = new JetStreamQueue({ nc, replicas: members, clock: systemClock, log });
  // A cluster just formed may still be electing its leaders: a bounded few tries.
  const settle = async <T>(what: string, f: () => Promise<T>): Promise<T> => {
    for (let i = 1; ; i++) {
      try {
        return await f();
      } catch (err) {
        if (i >= 5) throw new Error(`${what}: ${String(err)}`);
        await Bun.sleep(1_000);
      }
    }
  };
  await settle("streams", () => queue.ensureStreams());
  const coord = await settle("coordination", () => createCoordination({ type: "embedded-kv", nc, replicas: members, lease_ttl_ms: TTL_MS, clock: systemClock, log }));
  for (const s of seats) await queue.ensureMailbox(mailbox(s, "inbox").subject, mailbox(s, "inbox").group);
  await before?.(nats, queue);
  const got = new Map<string, string[]>();
  let watch: MailboxWatch | null = null;
  const host = new SeatHost({
    node_id: "n1",
    roles: ["seats"],
    leases: coord.leases,
    queue,
    clock: systemClock,
    log,
    lease_ttl_ms: () => coord.lease_ttl_ms,
    batchHandler: async (ds: Delivery[], turn) => {
      got.set(turn.handle, [...(got.get(turn.handle) ?? []), ...ds.map((d) => dec.decode(d.data))]);
      if (turn_ms > 0) await Bun.sleep(turn_ms);
      return ds.map((d) => settleMail(dec.decode(d.data), d));
    },
    deafSeats: () => watch?.deaf() ?? [],
    onProbe: (h, id) => watch?.heard(h, id),
  });
  await host.start(seats.map((handle) => ({ handle })));
  watch = watchHeldMailboxes({ queue, seats: host, clock: systemClock, log, ...CADENCE });
  watch.start();
  const w = watch;
  await until("every seat attached", () => seats.every((s) => host.seatState(s)?.phase === "established"));
  return {
    nats,
    nc,
    coord,
    queue,
    host,
    watch: w,
    sink,
    got,
    send: async (seat, body) => (await queue.publish(mailbox(seat, "inbox").subject, enc.encode(body))).seq,
    async close() {
      await w.stop();
      await host.stop();
      await coord.close();
      await nc.close();
      await nats.stop();
    },
  };
}

const deafLines = (sink: MemorySink, seat?: string) => sink.events("seat_mailbox_deaf").filter((l) => seat === undefined || l.fields.seat === seat);
const probesSeen = (r: Rig) => [...r.got.values()].flat().filter((b) => b.includes("probe"));

test("a healthy seat under steady mail is never reported deaf; the agent never sees a probe", async () => {
  const seats = ["h1", "h2", "h3", "h4"];
  rig = await makeRig(seats);
  const r = rig;
  // One message every 50 ms, round robin, for 12 s: each seat gets mail every 200 ms, its
  // probes land among it, in drains and between them.
  const sent: string[] = [];
  for (let i = 0; i < 240; i++) {
    const seat = seats[i % seats.length]!;
    const body = `mail ${i} to ${seat}`;
    await r.send(seat, body);
    sent.push(body);
    await Bun.sleep(50);
  }
  await until("every message handled", () => [...r.got.values()].flat().length >= sent.length);
  await Bun.sleep(2_000);
  expect([...r.got.values()].flat().sort()).toEqual([...sent].sort());
  expect(probesSeen(r)).toEqual([]);
  const counts = r.watch.probeCounts();
  expect(counts.sent).toBeGreaterThanOrEqual(seats.length * 3);
  expect(counts.heard).toBeGreaterThanOrEqual(counts.sent - seats.length); // at most one out per seat
  expect(counts.unheard).toBe(0);
  expect(deafLines(r.sink)).toEqual([]);
  expect(r.watch.deaf()).toEqual([]);
  // The probes are settled: nothing is left in the inboxes.
  for (const s of seats) expect((await r.queue.inspectMailbox(mailbox(s, "inbox").subject, mailbox(s, "inbox").group)).num_pending).toBe(0);
}, 120_000);

for (const members of [1, 3]) {
  test(`a consumer whose pointer stands beyond the stream is found by the probe alone; the rewind delivers what arrived while deaf (${members === 1 ? "one server" : "3 members, R3"})`, async () => {
    rig = await makeRig(["d1", "ok1"], undefined, members);
    const r = rig;
    await r.send("d1", "before");
    await until("the first mail handled", () => (r.got.get("d1") ?? []).includes("before"));
    // The pointer moved past the end of the stream: new mail lands behind it, never delivered.
    const box = mailbox("d1", "inbox");
    const last = (await (await r.nc.jetstreamManager()).streams.info(mailboxStream("d1"))).state.last_seq;
    const reply = await r.nc.request(`$JS.API.CONSUMER.RESET.${mailboxStream("d1")}.${durableName(box.group)}`, JSON.stringify({ seq: last + 1_000 }));
    expect(dec.decode(reply.data)).not.toContain('"error"');
    await r.send("d1", "while deaf");
    // The counters see nothing wrong: no mail pending or ack-pending, nothing above the floor.
    expect(await r.queue.inspectMailbox(box.subject, box.group)).toMatchObject({ num_pending: 0, num_ack_pending: 0, first_unacked_seq: null });
    await until("d1 reported deaf", () => r.watch.deaf().includes("d1"));
    expect(r.host.health().seat_mailbox_deaf).toEqual(["d1"]);
    await until("d1 hears again", () => r.sink.events("seat_mailbox_hearing").some((l) => l.fields.seat === "d1"));
    expect(deafLines(r.sink, "d1")[0]!.fields).toMatchObject({ reason: "probe_unheard", heal: "rewind" });
    expect(r.sink.events("seat_mailbox_hearing").find((l) => l.fields.seat === "d1")!.fields.healed_by).toBe("rewind");
    await until("the mail sent while deaf handled", () => (r.got.get("d1") ?? []).includes("while deaf"));
    await r.send("d1", "after");
    await until("new mail handled", () => (r.got.get("d1") ?? []).includes("after"));
    expect(r.watch.deaf()).toEqual([]);
    // The other seat was never touched; the agent never saw a probe.
    expect(deafLines(r.sink, "ok1")).toEqual([]);
    expect(probesSeen(r)).toEqual([]);
  }, 120_000);
}

test("a consumer deleted under its attachment: deaf, handed back, re-claimed with a new mailbox, answering again", async () => {
  rig = await makeRig(["g1"]);
  const r = rig;
  const box = mailbox("g1", "inbox");
  const firstEpoch = r.host.seatState("g1")!.epoch;
  await (await r.nc.jetstreamManager()).consumers.delete(mailboxStream("g1"), durableName(box.group));
  await until("g1 reported deaf", () => deafLines(r.sink, "g1").length > 0);
  expect(deafLines(r.sink, "g1")[0]!.fields.reason).toBe("probe_unheard");
  // The rewind cannot find the consumer; the seat goes back and is claimed again.
  await until("g1 re-claimed", () => {
    const s = r.host.seatState("g1");
    return s !== null && s.epoch > firstEpoch && s.phase === "established";
  });
  expect(r.sink.events("seat_detached").some((l) => l.fields.seat === "g1" && l.fields.reason === "mailbox_deaf")).toBe(true);
  await r.send("g1", "after");
  await until("new mail handled", () => (r.got.get("g1") ?? []).includes("after"));
  await until("no seat deaf", () => r.watch.deaf().length === 0);
}, 120_000);

test("mail ack-pending on a pull of a process that lost the seat reaches the new holder, not after the ack wait", async () => {
  let stale: NatsConnection | null = null;
  let taken: Promise<string | null> | null = null;
  rig = await makeRig(["p1"], async (nats) => {
    // The predecessor's lingering pull: made before the new holder attaches, on its own
    // connection, for one message it will never settle (it is fenced, not dead).
    stale = await nats.connect();
    const consumer = await stale.jetstream().consumers.get(mailboxStream("p1"), durableName(mailbox("p1", "inbox").group));
    taken = consumer.next({ expires: WAIT_MS }).then((m) => (m ? dec.decode(m.data) : null));
    await stale.flush();
  });
  const r = rig;
  try {
    await r.send("p1", "stranded");
    // The scenario happened: the old pull has it, the consumer counts it ack-pending.
    expect(await taken!).toBe("stranded");
    const box = mailbox("p1", "inbox");
    expect((await r.queue.inspectMailbox(box.subject, box.group)).num_ack_pending).toBe(1);
    await until("the new holder runs it", () => (r.got.get("p1") ?? []).includes("stranded"));
    expect(deafLines(r.sink, "p1").map((l) => [l.fields.reason, l.fields.heal])).toEqual([["ack_pending_elsewhere", "reset"]]);
    await until("p1 hears again", () => r.watch.deaf().length === 0);
    expect((await r.queue.inspectMailbox(box.subject, box.group)).num_ack_pending).toBe(0);
  } finally {
    await (stale as NatsConnection | null)?.close();
  }
}, 120_000);

// The stranded delivery of the test above, at a seat that never sits idle: mail keeps
// coming and each turn takes a while, so the delivered pointer moves and a check seldom
// finds the seat idle. Judged only when idle across two checks, it waited for the traffic
// to stop (a chaos run's coding report sat unreported for minutes); judged by what the
// holder holds, it heals within a few checks while the traffic goes on.
test("a delivery stranded elsewhere heals while the seat keeps busy", async () => {
  let stale: NatsConnection | null = null;
  let taken: Promise<string | null> | null = null;
  rig = await makeRig(
    ["b1"],
    async (nats) => {
      stale = await nats.connect();
      const consumer = await stale.jetstream().consumers.get(mailboxStream("b1"), durableName(mailbox("b1", "inbox").group));
      taken = consumer.next({ expires: WAIT_MS }).then((m) => (m ? dec.decode(m.data) : null));
      await stale.flush();
    },
    1,
    () => ack(),
    BUSY_TURN_MS,
  );
  const r = rig;
  let traffic = true;
  try {
    await r.send("b1", "stranded");
    expect(await taken!).toBe("stranded");
    let n = 0;
    const sending = (async () => {
      while (traffic) {
        await r.send("b1", `busy-${++n}`);
        await Bun.sleep(BUSY_TURN_MS);
      }
    })();
    await until("the holder runs the stranded one while the traffic goes on", () => (r.got.get("b1") ?? []).includes("stranded"));
    expect(traffic).toBe(true);
    traffic = false;
    await sending;
    expect(deafLines(r.sink, "b1").map((l) => l.fields.reason)).toContain("ack_pending_elsewhere");
    expect((r.got.get("b1") ?? []).filter((b) => b === "stranded")).toHaveLength(1);
  } finally {
    traffic = false;
    await (stale as NatsConnection | null)?.close();
  }
}, 120_000);

test("a paused seat's waiting mail is no deafness: no alarm, no reset, no hand-back; resumed, it runs the mail", async () => {
  rig = await makeRig(["z1"]);
  const r = rig;
  const epoch = r.host.seatState("z1")!.epoch;
  r.host.setHold("z1", "pause", true);
  for (const body of ["w1", "w2", "w3"]) await r.send("z1", body);
  // Past every rule's two checks and the probe's bound, several times over. A build that
  // judged an attached-but-held inbox idle alarmed here (pending_not_delivered, or
  // ack_pending_elsewhere for the one its own pull had parked) and handed the seat back.
  await Bun.sleep(PAUSED_WATCHED_MS);
  expect(deafLines(r.sink, "z1")).toEqual([]);
  expect(r.watch.deaf()).toEqual([]);
  expect(r.host.seatState("z1")!.epoch).toBe(epoch);
  expect(r.got.get("z1") ?? []).toEqual([]);
  r.host.setHold("z1", "pause", false);
  await until("the waiting mail handled", () => (r.got.get("z1") ?? []).length === 3);
  expect(r.got.get("z1")).toEqual(["w1", "w2", "w3"]);
  expect(deafLines(r.sink, "z1")).toEqual([]);
}, 120_000);

test("a delivery the seat NAKs with a delay waits out its backoff: no alarm, no reset, run again once after it", async () => {
  rig = await makeRig(["n1"], undefined, 1, (body, d) => (body === "retry-me" && d.deliveryCount === 1 ? nak(BACKOFF_MS) : ack()));
  const r = rig;
  await r.send("n1", "retry-me");
  await until("the retry ran", () => (r.got.get("n1") ?? []).length >= 2);
  await Bun.sleep(2 * CADENCE.every_ms);
  // Before: "ack_pending_elsewhere" every two checks, each reset running it again at once
  // (nine runs in 12 s for one 10 s backoff), its delivery count starting over.
  expect(deafLines(r.sink, "n1")).toEqual([]);
  expect(r.got.get("n1")).toEqual(["retry-me", "retry-me"]);
}, 120_000);
