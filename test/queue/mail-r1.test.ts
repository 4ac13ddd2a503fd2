// Seat mail on limits-retained streams with mailboxes of one replica, on real nats-server
// processes: what a mailbox settles is trimmed from its stream; a mailbox whose member is
// killed (-9) is made again on a live member, by its holder's failing pulls or by the next
// holder's attach, and delivers what the seat had not settled — nothing lost, and what the
// old consumer had settled but no trim had yet removed is all that can come twice.
import { afterAll, expect, test } from "bun:test";
import { connect, type NatsConnection } from "nats";
import { systemClock } from "../../src/clock.ts";
import { memoryLogger } from "../../src/log.ts";
import { ack, type Delivery, type Outcome } from "../../src/queue/contract.ts";
import { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { REPLAYABLE_HEADER } from "../../src/queue/trim.ts";
import { durableName, mailbox, streamForSubject } from "../../src/queue/topics.ts";
import { startNats, type TestMember, type TestNats } from "../support/nats.ts";
import { whileForming } from "../support/forming.ts";

const enc = (s: string) => new TextEncoder().encode(s);
const text = (d: Delivery) => new TextDecoder().decode(d.data);
/** Generous: a revival is a few seconds of unanswered pulls plus three meta proposals. */
const WITHIN_MS = 60_000;

const clusters: TestNats[] = [];
const conns: NatsConnection[] = [];
const queues: JetStreamQueue[] = [];
afterAll(async () => {
  for (const q of queues) await q.close().catch(() => {});
  for (const nc of conns) await nc.close().catch(() => {});
  for (const n of clusters) await n.stop();
});

async function eventually(what: string, ok: () => boolean | Promise<boolean>, within_ms = WITHIN_MS): Promise<void> {
  const deadline = Date.now() + within_ms;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`not within ${within_ms} ms: ${what}`);
    await Bun.sleep(100);
  }
}

async function queueOn(member: TestMember, name: string, extra: { trimEvery_ms?: number } = {}) {
  const nc = await connect({ servers: member.url, name, reconnect: false });
  conns.push(nc);
  const { log, sink } = memoryLogger();
  const queue = new JetStreamQueue({ nc, replicas: 3, clock: systemClock, log, ...extra });
  queues.push(queue);
  return { nc, queue, sink };
}

/** Messages stored for a subject (the stream's per-subject count). */
async function storedFor(nc: NatsConnection, subject: string): Promise<number> {
  const jsm = await nc.jetstreamManager();
  const info = await jsm.streams.info(streamForSubject(subject)!, { subjects_filter: subject });
  return info.state.subjects?.[subject] ?? 0;
}

/** The member a mailbox's one replica is on (a moment after its create, it may not say yet). */
async function hostOf(nc: NatsConnection, box: { subject: string; group: string }): Promise<string> {
  const jsm = await nc.jetstreamManager({ timeout: 10_000 });
  let host = "";
  await eventually("the mailbox names its member", async () => {
    const info = await jsm.consumers.info(streamForSubject(box.subject)!, durableName(box.group)).catch(() => null);
    expect(info?.config.num_replicas ?? 1).toBe(1);
    host = info?.cluster?.leader ?? "";
    return host !== "";
  });
  return host;
}

/**
 * Publishes once the stream has a leader: right after a cluster forms, or after a kill -9 of
 * the member leading the stream (an election 4–9 s later), a publish answers 503 or nothing.
 * The id makes a retried publish that did land one message.
 */
async function publishThrough(queue: JetStreamQueue, subject: string, body: string, headers?: Record<string, string>): Promise<void> {
  const deadline = Date.now() + WITHIN_MS;
  for (;;) {
    try {
      await queue.publish(subject, enc(body), { msgId: `${subject}:${body}`, headers });
      return;
    } catch (err) {
      if (Date.now() > deadline || !/503|TIMEOUT|no responders/i.test(String(err))) throw err;
      await Bun.sleep(250);
    }
  }
}

function recorder(outcome: (d: Delivery) => Outcome | Promise<Outcome> = () => ack()) {
  const seen: Delivery[] = [];
  return { seen, texts: () => seen.map(text), handler: async (d: Delivery) => (seen.push(d), outcome(d)) };
}

test("what a mailbox settles is trimmed from its stream; what it has not stays", async () => {
  const nats = await startNats(3);
  clusters.push(nats);
  const { nc, queue } = await queueOn(nats.members[0]!, "trim", { trimEvery_ms: 500 });
  await whileForming(() => queue.ensureStreams());
  const box = mailbox("trimmed", "inbox");
  await whileForming(() => queue.ensureMailbox(box.subject, box.group));
  for (const t of ["m1", "m2", "m3"]) await publishThrough(queue, box.subject, t);
  // m3's turn never ends: m1 and m2 are settled, m3 is the seat's to run.
  const rec = recorder((d) => (text(d) === "m3" ? new Promise<Outcome>(() => undefined) : ack()));
  await queue.attach(box.subject, box.group, rec.handler);
  await eventually("m3 taken", () => rec.seen.length === 3);
  await eventually("m1 and m2 trimmed", async () => (await storedFor(nc, box.subject)) === 1);
  expect(rec.texts()).toEqual(["m1", "m2", "m3"]);
}, 120_000);

test("settled replayable mail (a probe) waits for its trim; the next settled chat message takes it along", async () => {
  const nats = await startNats(3);
  clusters.push(nats);
  const { nc, queue } = await queueOn(nats.members[0]!, "lazy-trim", { trimEvery_ms: 300 });
  await whileForming(() => queue.ensureStreams());
  const box = mailbox("lazy", "inbox");
  await whileForming(() => queue.ensureMailbox(box.subject, box.group));
  const rec = recorder();
  await queue.attach(box.subject, box.group, rec.handler);
  await publishThrough(queue, box.subject, "probe", { [REPLAYABLE_HEADER]: "1" });
  await eventually("the probe taken", () => rec.seen.length === 1);
  await Bun.sleep(2_000); // several trim ticks
  expect(await storedFor(nc, box.subject)).toBe(1);
  await publishThrough(queue, box.subject, "m1");
  await eventually("both trimmed", async () => (await storedFor(nc, box.subject)) === 0);
}, 120_000);

/** A fresh 3-member cluster with one seat inbox; the member its one replica is on is the victim. */
async function clusterWithMailbox(handle: string) {
  const nats = await startNats(3);
  clusters.push(nats);
  const setup = await queueOn(nats.members[0]!, "setup");
  await whileForming(() => setup.queue.ensureStreams());
  const box = mailbox(handle, "inbox");
  await whileForming(() => setup.queue.ensureMailbox(box.subject, box.group));
  const hostName = await hostOf(setup.nc, box);
  const victim = nats.members.find((m) => m.name === hostName)!;
  const other = nats.members.find((m) => m !== victim)!;
  return { box, hostName, victim, other, members: nats.members };
}

test("kill -9 of a mailbox's member under its holder: the holder's pulls make it again on a live member, and the mail comes", async () => {
  const { box, hostName, victim, other } = await clusterWithMailbox("holder-stays");
  const holder = await queueOn(other, "holder");
  const rec = recorder();
  await holder.queue.attach(box.subject, box.group, rec.handler);
  await publishThrough(holder.queue, box.subject, "before"); // the stream's leader may be a moment old
  await eventually("before delivered", () => rec.seen.length === 1);
  await victim.kill();
  await publishThrough(holder.queue, box.subject, "after");
  await eventually("after delivered through a mailbox made again", () => rec.texts().includes("after"));
  expect(holder.sink.events("queue_mailbox_revived").length).toBeGreaterThanOrEqual(1);
  // Nothing the seat settled was owed again but what no trim had removed: "before", at most once more.
  expect(rec.texts().filter((t) => t === "after")).toHaveLength(1);
  expect(rec.texts().filter((t) => t === "before").length).toBeLessThanOrEqual(2);
  expect(await hostOf(holder.nc, box)).not.toBe(hostName);
}, 180_000);

test("kill -9 of a seat's holder and its mailbox's member: the next holder's attach makes the mailbox again and runs the unsettled mail", async () => {
  const { box, hostName, victim, other } = await clusterWithMailbox("holder-dies");
  // The old holder, on the victim's own member, dies in m2's turn.
  const old = await queueOn(victim, "old-holder");
  for (const t of ["m1", "m2", "m3"]) await publishThrough(old.queue, box.subject, t);
  const dead = recorder((d) => (text(d) === "m2" ? new Promise<Outcome>(() => undefined) : ack()));
  await old.queue.attach(box.subject, box.group, dead.handler);
  await eventually("old holder in m2's turn", () => dead.seen.length === 2);
  await victim.kill();
  const next = await queueOn(other, "next-holder");
  const rec = recorder();
  await next.queue.attach(box.subject, box.group, rec.handler);
  await eventually("m2 and m3 delivered", () => rec.texts().includes("m2") && rec.texts().includes("m3"));
  expect(next.sink.events("queue_mailbox_revived")[0]?.fields).toMatchObject({ reason: "unanswered at attach" });
  expect(rec.texts().filter((t) => t !== "m1")).toEqual(["m2", "m3"]);
  // The member's return does not bring the old consumer back beside the new one.
  await victim.restart();
  await publishThrough(next.queue, box.subject, "m4");
  await eventually("m4 delivered", () => rec.texts().includes("m4"));
  const jsm = await next.nc.jetstreamManager();
  const names: string[] = [];
  for await (const c of jsm.consumers.list(streamForSubject(box.subject)!)) names.push(c.name);
  expect(names.filter((n) => n === durableName(box.group))).toHaveLength(1);
}, 180_000);

test("a mailbox's member that stops answering (SIGSTOP) under its holder: one silent pull and a silent INFO make it again", async () => {
  const { box, other, members } = await clusterWithMailbox("member-silent");
  const holder = await queueOn(other, "holder");
  const rec = recorder();
  await holder.queue.attach(box.subject, box.group, rec.handler);
  await publishThrough(holder.queue, box.subject, "before");
  await eventually("before delivered", () => rec.seen.length === 1);
  // The member stopped is the one that delivered, read now rather than at the create (a
  // clean-clone CI run once saw "after" come at once with no revival; cause not found).
  const hostName = await hostOf(holder.nc, box);
  const victim = members.find((m) => m.name === hostName)!;
  if (victim === other) throw new Error(`the mailbox moved onto the holder's own member ${hostName}`);
  // Its connections stay open, so nobody is told it is gone: pulls meet silence, not "no responders".
  victim.proc.kill("SIGSTOP");
  try {
    await publishThrough(holder.queue, box.subject, "after");
    await eventually("after delivered through a mailbox made again", () => rec.texts().includes("after"));
    const revived = holder.sink.events("queue_mailbox_revived")[0]?.fields;
    if (!revived) throw new Error(`"after" came with no revival; the holder logged: ${holder.sink.lines.map((l) => l.event).join(", ")}`);
    expect(revived).toMatchObject({ reason: "pull and INFO unanswered" });
    // The pull sent to the old consumer meanwhile was given up, not waited out.
    expect(holder.sink.events("queue_pull_failed").some((e) => /made again/.test(String(e.fields.error)))).toBe(true);
    expect(rec.texts().filter((t) => t === "after")).toHaveLength(1);
    expect(await hostOf(holder.nc, box)).not.toBe(hostName);
  } finally {
    victim.proc.kill("SIGCONT");
  }
}, 180_000);
