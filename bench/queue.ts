// Queue figures on real nats-servers (loopback). Prints numbers; never fails on time.
//   bun bench/queue.ts [--creates 500] [--seats 100] [--rounds 300]
// Latencies use performance.now(): a measurement needs sub-millisecond resolution, which
// the product clock (src/clock.ts, Date.now) does not promise; nothing here schedules work.
import type { ConsumerConfig, NatsConnection } from "nats";
import { z } from "zod";
import { benchArgs, countFlag } from "./args.ts";
import { systemClock } from "../src/clock.ts";
import { memoryLogger, silentLogger } from "../src/log.ts";
import { ack, defer, type Attachment, type Outcome } from "../src/queue/contract.ts";
import { JetStreamQueue } from "../src/queue/jetstream.ts";
import { ensureSeatMailboxes, MAILBOX_CREATE_CONCURRENCY } from "../src/queue/mailboxes.ts";
import { mailbox, mailboxStream } from "../src/queue/topics.ts";
import { startNats, type TestNats } from "../test/support/nats.ts";

const { creates: CREATES, seats: SEATS, rounds: ROUNDS } = benchArgs(
  "queue",
  "[--creates 500] [--seats 100] [--rounds 300]",
  z.object({ creates: countFlag(500, 100_000), seats: countFlag(100, 10_000), rounds: countFlag(300, 100_000) }),
);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}
function p90(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * 0.9))]!;
}
const fmt = (ms: number) => ms.toFixed(3);

async function setup(members: number): Promise<{ nats: TestNats; nc: NatsConnection; nc2: NatsConnection; queue: JetStreamQueue; peer: JetStreamQueue }> {
  const nats = await startNats(members);
  const nc = await nats.connect({ name: "bench-a" });
  const nc2 = await nats.connect({ name: "bench-b" });
  const queue = new JetStreamQueue({ nc, replicas: members, clock: systemClock, log: silentLogger });
  const peer = new JetStreamQueue({ nc: nc2, replicas: members, clock: systemClock, log: silentLogger });
  await queue.ensureStreams();
  return { nats, nc, nc2, queue, peer };
}

/** Mailbox creation: ensureMailbox vs the same consumer create done with the raw client. */
async function creation(label: string, nc: NatsConnection, queue: JetStreamQueue, n: number): Promise<void> {
  const jsm = await nc.jetstreamManager({ checkAPI: false });
  const raw: number[] = [];
  const ours: number[] = [];
  const again: number[] = [];
  // Interleaved, so drift in the server (store growth, GC) hits both loops alike.
  for (let i = 0; i < n; i++) {
    const r = mailbox(`raw${i}`, "inbox");
    const config: ConsumerConfig = queue.consumerConfig(r.subject, r.group);
    let t = performance.now();
    await jsm.consumers.add(mailboxStream(`raw${i}`), config);
    raw.push(performance.now() - t);
    const o = mailbox(`ours${i}`, "inbox");
    t = performance.now();
    await queue.ensureMailbox(o.subject, o.group);
    ours.push(performance.now() - t);
    t = performance.now();
    await queue.ensureMailbox(o.subject, o.group);
    again.push(performance.now() - t);
  }
  const ratio = median(ours) / median(raw);
  console.log(`[${label}] mailbox create, median over ${n}: ensureMailbox ${fmt(median(ours))} ms (p90 ${fmt(p90(ours))}) · raw client consumers.add ${fmt(median(raw))} ms (p90 ${fmt(p90(raw))}) · ratio ${ratio.toFixed(2)}x (target <= 1.2x)`);
  console.log(`[${label}] ensureMailbox on an existing mailbox (a peer created it first), median: ${fmt(median(again))} ms`);
}

/** Defer handoff: A defers, B (already attached on another connection, pull waiting) receives it. */
async function handoff(label: string, q: { queue: JetStreamQueue; peer: JetStreamQueue; nc2: NatsConnection }, rounds: number): Promise<void> {
  const box = mailbox(`handoff-${label.replace(/\W/g, "")}`, "inbox");
  let deferredAt = 0;
  const lat: number[] = [];
  let b!: Attachment;
  let a!: Attachment;
  let received: (() => void) | null = null;
  const aHandler = async (): Promise<Outcome> => {
    b.resume();
    await q.nc2.flush(); // B's pull is at the broker before the hand-back leaves: a waiting successor
    deferredAt = performance.now();
    return defer("bench handoff");
  };
  const bHandler = async (): Promise<Outcome> => {
    lat.push(performance.now() - deferredAt);
    b.quiesce();
    received?.();
    return ack();
  };
  a = await q.queue.attach(box.subject, box.group, aHandler);
  b = await q.peer.attach(box.subject, box.group, bHandler, { holds: [] });
  b.quiesce();
  for (let i = 0; i < rounds; i++) {
    const got = new Promise<void>((r) => (received = r));
    a.resume();
    await q.queue.publish(box.subject, new Uint8Array([i & 0xff]));
    await got;
  }
  await a.detach();
  await b.detach();
  console.log(`[${label}] defer handoff (defer -> next attachment's handler), median over ${rounds}: ${fmt(median(lat))} ms (p90 ${fmt(p90(lat))}) (target <= 2 ms)`);
}

/**
 * Quiesce handoff: A is idle with its pull waiting and quiesces (the pull cannot be withdrawn),
 * B is attached and waiting behind it. A publish reaches A's old pull first, which hands it
 * back at once; figure is publish -> B's handler, the hand-back's cost instead of a strand.
 */
async function quiesceHandoff(label: string, q: { queue: JetStreamQueue; peer: JetStreamQueue; nc: NatsConnection; nc2: NatsConnection }, rounds: number): Promise<void> {
  const box = mailbox(`qhandoff-${label.replace(/\W/g, "")}`, "inbox");
  let sentAt = 0;
  const lat: number[] = [];
  const counts: number[] = [];
  let received: (() => void) | null = null;
  let aRan = 0;
  const a = await q.queue.attach(box.subject, box.group, async () => {
    aRan += 1;
    return ack();
  });
  let b!: Attachment;
  b = await q.peer.attach(box.subject, box.group, async (d) => {
    lat.push(performance.now() - sentAt);
    counts.push(d.deliveryCount);
    b.quiesce();
    received?.();
    return ack();
  }, { holds: ["bench"] });
  for (let i = 0; i < rounds; i++) {
    a.resume();
    await q.nc.flush(); // A's pull (a fresh one, or the one still out) is at the broker first
    b.releaseHold("bench");
    b.resume();
    await q.nc2.flush();
    a.quiesce();
    const got = new Promise<void>((r) => (received = r));
    sentAt = performance.now();
    void q.queue.publish(box.subject, new Uint8Array([i & 0xff]));
    await got;
    b.hold("bench");
  }
  await a.detach();
  await b.detach();
  const bounced = counts.filter((c) => c > 1).length;
  console.log(`[${label}] quiesce handoff (publish -> successor's handler, old owner's pull still out), median over ${rounds}: ${fmt(median(lat))} ms (p90 ${fmt(p90(lat))}); handed back by the old pull ${bounced}/${rounds}; run by the quiesced owner ${aRan}`);
}

/** Publish -> handler start on an attached, idle mailbox (its pull already waiting). */
async function publishToHandler(label: string, queue: JetStreamQueue, rounds: number): Promise<void> {
  const box = mailbox(`p2h-${label.replace(/\W/g, "")}`, "inbox");
  let sentAt = 0;
  const lat: number[] = [];
  let received: (() => void) | null = null;
  const att = await queue.attach(box.subject, box.group, async () => {
    lat.push(performance.now() - sentAt);
    received?.();
    return ack();
  });
  for (let i = 0; i < rounds; i++) {
    const got = new Promise<void>((r) => (received = r));
    await Bun.sleep(0); // let the previous ack and the next pull leave first
    sentAt = performance.now();
    void queue.publish(box.subject, new Uint8Array([i & 0xff]));
    await got;
  }
  await att.detach();
  console.log(`[${label}] publish -> handler, median over ${rounds}: ${fmt(median(lat))} ms (p90 ${fmt(p90(lat))})`);
}

/** Resume -> handler for mail already waiting: the handler's quiesce came after its pull ended (batch 1), so resume pays one pull round trip. */
async function resumeLatency(label: string, queue: JetStreamQueue, rounds: number): Promise<void> {
  const box = mailbox(`resume-${label.replace(/\W/g, "")}`, "inbox");
  let resumedAt = 0;
  const lat: number[] = [];
  let received: (() => void) | null = null;
  let att!: Attachment;
  att = await queue.attach(box.subject, box.group, async () => {
    lat.push(performance.now() - resumedAt);
    att.quiesce();
    received?.();
    return ack();
  }, { holds: ["bench"] });
  for (let i = 0; i < rounds; i++) {
    await queue.publish(box.subject, new Uint8Array([i & 0xff]));
    const got = new Promise<void>((r) => (received = r));
    att.resume();
    resumedAt = performance.now();
    att.releaseHold("bench");
    await got;
    att.hold("bench");
  }
  await att.detach();
  console.log(`[${label}] resume -> handler (mail waiting, no pull out: the last one ended with its batch), median over ${rounds}: ${fmt(median(lat))} ms (p90 ${fmt(p90(lat))})`);
}

async function bootWalk(label: string, queue: JetStreamQueue, seats: number): Promise<void> {
  const { log, sink } = memoryLogger("info");
  const handles = Array.from({ length: seats }, (_, i) => `seat${i}`);
  const res = await ensureSeatMailboxes(queue, handles, systemClock, log);
  const line = sink.events("seat_mailbox_created")[0];
  console.log(`[${label}] boot walk, ${seats} seats (${res.count} mailboxes, concurrency ${MAILBOX_CREATE_CONCURRENCY}): ${res.elapsed_ms} ms (logged count=${line?.fields.count})`);
  const again = await ensureSeatMailboxes(queue, handles, systemClock, log);
  console.log(`[${label}] boot walk again (all exist, as on a second node's boot): ${again.elapsed_ms} ms`);
}

async function sequentialR3(label: string, queue: JetStreamQueue, n: number): Promise<void> {
  const lat: number[] = [];
  for (let i = 0; i < n; i++) {
    const b = mailbox(`seq${i}`, "inbox");
    const t = performance.now();
    await queue.ensureMailbox(b.subject, b.group);
    lat.push(performance.now() - t);
  }
  console.log(`[${label}] one-by-one mailbox create, median over ${n}: ${fmt(median(lat))} ms (why the walk is concurrent)`);
}

const r1 = await setup(1);
try {
  console.log(`nats-server ${r1.nc.info?.version} · single member, R1`);
  await creation("R1", r1.nc, r1.queue, CREATES);
  await handoff("R1", r1, ROUNDS);
  await quiesceHandoff("R1", r1, ROUNDS);
  await publishToHandler("R1", r1.queue, ROUNDS);
  await resumeLatency("R1", r1.queue, ROUNDS);
  await bootWalk("R1", r1.queue, SEATS);
} finally {
  await r1.nc.close();
  await r1.nc2.close();
  await r1.nats.stop();
}

const r3 = await setup(3);
try {
  console.log(`nats-server ${r3.nc.info?.version} · 3-member cluster, R3`);
  await bootWalk("R3", r3.queue, SEATS);
  await sequentialR3("R3", r3.queue, 10);
  await handoff("R3", r3, ROUNDS);
  await quiesceHandoff("R3", r3, ROUNDS);
  await publishToHandler("R3", r3.queue, ROUNDS);
  await resumeLatency("R3", r3.queue, ROUNDS);
} finally {
  await r3.nc.close();
  await r3.nc2.close();
  await r3.nats.stop();
}
