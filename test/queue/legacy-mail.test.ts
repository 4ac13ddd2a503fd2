// Mail an older build left in its mail streams (the one agent stream before the shards, or
// the interest-retained shards before protocol 8): on a real nats-server, legacy streams and
// mailboxes made as those builds made them, then the forwarder's passes.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { AckPolicy, DeliverPolicy, headers as natsHeaders, type NatsConnection, type StreamConfig } from "nats";
import { FakeClock, systemClock } from "../../src/clock.ts";
import { memoryLogger } from "../../src/log.ts";
import { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { ack, type MailboxKind } from "../../src/queue/contract.ts";
import { forwardLegacyMail, LEGACY_FAILURES_PER_PASS_MAX, startLegacyMail, type LegacyPass, type LegacyStreamPass } from "../../src/queue/legacy-mail.ts";
import { MAIL_DUPLICATE_WINDOW_MS, streamConfig } from "../../src/queue/streams.ts";
import {
  AGENT_STREAMS,
  agentShard,
  durableName,
  interestMailboxSubject,
  interestShardStream,
  legacyMailboxSubject,
  LEGACY_AGENT_STREAM,
  LEGACY_MAIL_STREAMS,
  mailbox,
  mailboxGroup,
  mailboxStream,
} from "../../src/queue/topics.ts";
import { waitFor } from "../support/fleet.ts";
import { startNats, type TestNats } from "../support/nats.ts";

let nats: TestNats;
let nc: NatsConnection;
let queue: JetStreamQueue;
const dec = new TextDecoder();

beforeAll(async () => {
  nats = await startNats(1);
  nc = await nats.connect({ name: "legacy-mail-test" });
  queue = new JetStreamQueue({ nc, replicas: 1, clock: systemClock, log: memoryLogger().log });
  await queue.ensureStreams();
});
afterAll(async () => {
  await nc?.close();
  await nats?.stop();
});

/** Which earlier build's layout: the one stream before the shards, or the interest-retained shards. */
type Layout = "single" | "shards";

interface LegacyOptions {
  /** A consumer on the stream that is no seat's mailbox. */
  foreign?: boolean;
  /** The mailboxes' ack wait, where the server default (30 s) is too long for a test. */
  ackWaitMs?: number;
  layout?: Layout;
}

/** Where that build kept a seat's mailbox: its stream, what the stream captured, the subject. */
function legacyPlace(layout: Layout, handle: string, kind: MailboxKind): { stream: string; captures: string; subject: string } {
  if (layout === "single") return { stream: LEGACY_AGENT_STREAM, captures: "crewlet.agent.>", subject: legacyMailboxSubject(handle, kind) };
  const shard = agentShard(handle);
  return { stream: interestShardStream(shard), captures: `crewlet.mail.${String(shard).padStart(2, "0")}.>`, subject: interestMailboxSubject(handle, kind) };
}

/** A mail stream as the builds before protocol 8 made it (streamSpecs now gives the limits-retained ones). */
function olderMailStream(name: string, captures: string): StreamConfig {
  return streamConfig({ name, subjects: [captures], retention: "interest", max_age_ms: 0, max_bytes: -1, max_msgs: -1, duplicate_window_ms: MAIL_DUPLICATE_WINDOW_MS }, 1);
}

/** The streams and seats' mailboxes as an earlier build made them, with mail in each inbox. */
async function legacyCompany(seats: Record<string, string[]>, { foreign = false, ackWaitMs, layout = "single" }: LegacyOptions = {}): Promise<void> {
  const jsm = await nc.jetstreamManager();
  for (const [handle, bodies] of Object.entries(seats)) {
    for (const kind of ["inbox", "reflect"] as const) {
      const at = legacyPlace(layout, handle, kind);
      // The same settings again (a second seat on the stream) is no change.
      await jsm.streams.add(olderMailStream(at.stream, at.captures));
      // Of the stream's replicas, as that build made every mailbox.
      await jsm.consumers.add(at.stream, {
        durable_name: durableName(mailboxGroup(handle, kind)),
        filter_subject: at.subject,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        ...(ackWaitMs === undefined ? {} : { ack_wait: ackWaitMs * 1_000_000 }),
      });
    }
    for (const [i, body] of bodies.entries()) {
      const h = natsHeaders();
      h.set("X-Trace", `t-${i}`);
      await nc.jetstream().publish(legacyPlace(layout, handle, "inbox").subject, new TextEncoder().encode(body), { msgID: `${handle}-wake-${i}`, headers: h });
    }
  }
  if (foreign) {
    await jsm.consumers.add(LEGACY_AGENT_STREAM, { durable_name: "audit-tap", filter_subject: legacyMailboxSubject("zed", "inbox"), ack_policy: AckPolicy.Explicit });
  }
}

/** What a seat's sharded inbox holds, read without consuming. */
async function shardedInbox(handle: string): Promise<{ body: string; id: string | undefined; trace: string | undefined }[]> {
  const jsm = await nc.jetstreamManager();
  const box = mailbox(handle, "inbox");
  const out: { body: string; id: string | undefined; trace: string | undefined }[] = [];
  let seq = 0;
  for (;;) {
    const m = await jsm.streams.getMessage(mailboxStream(handle), { next_by_subj: box.subject, seq: seq + 1 } as never).catch(() => null);
    if (!m) return out;
    seq = m.seq;
    out.push({ body: dec.decode(m.data), id: m.header?.get("Nats-Msg-Id"), trace: m.header?.get("X-Trace") });
  }
}

async function legacyStreamThere(stream = LEGACY_AGENT_STREAM): Promise<boolean> {
  const jsm = await nc.jetstreamManager();
  return jsm.streams.info(stream).then(() => true, () => false);
}

/** The one stream a pass found, for the cases with one legacy stream. */
function one(r: LegacyPass): LegacyStreamPass {
  expect(r.streams).toHaveLength(1);
  return r.streams[0]!;
}

/** A stream's entry in a pass that touched it and nothing failed. */
function cleanly(stream: string, forwarded: number, mailboxes_deleted: number, stream_deleted: boolean): LegacyStreamPass {
  return { stream, forwarded, mailboxes_deleted, stream_deleted, failed: [], error: null };
}

test("with no legacy stream a pass does nothing, asks no lease, and costs one request", async () => {
  // Seat mail of this build, which a pass must leave where it is.
  const kim = mailbox("kim", "inbox");
  await queue.ensureMailbox(kim.subject, kim.group);
  await queue.publish(kim.subject, new TextEncoder().encode("current"), { msgId: "kim-current" });
  const counted = await nats.connect({ name: "legacy-mail-count" });
  const apiCalls: string[] = [];
  const request = counted.request.bind(counted);
  counted.request = (subject, ...rest) => (apiCalls.push(subject), request(subject, ...rest));
  let asked = 0;
  try {
    const r = await forwardLegacyMail({ nc: counted, queue, olderNodeAlive: async () => (asked++, true), clock: systemClock, log: memoryLogger().log });
    expect(r).toEqual({ streams: [], waited: false, gave_up: false });
    expect(apiCalls).toEqual(["$JS.API.STREAM.NAMES"]);
    expect(asked).toBe(0);
  } finally {
    await counted.close();
  }
  for (const stream of AGENT_STREAMS) expect(await legacyStreamThere(stream)).toBe(true);
  expect((await shardedInbox("kim")).map((m) => m.body)).toEqual(["current"]);
  await queue.deleteMailbox(kim.subject, kim.group);
});

test("mail on the interest-retained shards waits while an older node is alive; then one pass moves it, and the single stream's, into this build's mailboxes and deletes every legacy stream", async () => {
  // Two seats on shards of their own, and one on the stream before the shards.
  expect(agentShard("ivy")).not.toBe(agentShard("jon"));
  await legacyCompany({ ivy: ["i1", "i2"], jon: ["j1"] }, { layout: "shards" });
  await legacyCompany({ lea: ["l1"] });
  const ivyAt = legacyPlace("shards", "ivy", "inbox");
  const jonAt = legacyPlace("shards", "jon", "inbox");
  const legacy = LEGACY_MAIL_STREAMS.filter((s) => [LEGACY_AGENT_STREAM, ivyAt.stream, jonAt.stream].includes(s));
  let older = true;
  const o = { nc, queue, olderNodeAlive: async () => older, clock: systemClock, log: memoryLogger().log };
  const jsm = await nc.jetstreamManager();

  const waited = await forwardLegacyMail(o);
  expect(waited).toEqual({ streams: legacy.map((s) => cleanly(s, 0, 0, false)), waited: true, gave_up: false });
  expect((await jsm.consumers.info(ivyAt.stream, durableName(mailboxGroup("ivy", "inbox")))).num_pending).toBe(2);
  expect(await shardedInbox("ivy")).toEqual([]);

  older = false;
  const moved = await forwardLegacyMail(o);
  expect(moved).toEqual({
    streams: legacy.map((s) => (s === LEGACY_AGENT_STREAM ? cleanly(s, 1, 2, true) : cleanly(s, s === ivyAt.stream ? 2 : 1, 2, true))),
    waited: false,
    gave_up: false,
  });
  for (const s of legacy) expect(await legacyStreamThere(s)).toBe(false);
  expect((await forwardLegacyMail(o)).streams).toEqual([]);

  // What the seat's own attachment is handed, as a node of this build runs it.
  const box = mailbox("ivy", "inbox");
  const got: { body: string; id: string | undefined; trace: string | undefined }[] = [];
  const attachment = await queue.attach(box.subject, box.group, async (d) => {
    got.push({ body: dec.decode(d.data), id: d.msgId, trace: d.headers["X-Trace"] });
    return ack();
  });
  try {
    await waitFor("ivy's forwarded mail delivered", async () => (got.length >= 2 ? true : null), 30_000);
  } finally {
    await attachment.detach();
  }
  expect(got).toEqual([
    { body: "i1", id: "ivy-wake-0", trace: "t-0" },
    { body: "i2", id: "ivy-wake-1", trace: "t-1" },
  ]);
  expect((await shardedInbox("jon")).map((m) => m.body)).toEqual(["j1"]);
  expect((await shardedInbox("lea")).map((m) => m.body)).toEqual(["l1"]);
  for (const h of ["ivy", "jon", "lea"]) await queue.deleteMailbox(mailbox(h, "inbox").subject, mailbox(h, "inbox").group);
});

test("while an older node is alive nothing moves; then every message reaches the seat's sharded inbox once, and the legacy stream goes", async () => {
  await legacyCompany({ alice: ["one", "two", "three"], bob: ["four"] });
  let older = true;
  const o = { nc, queue, olderNodeAlive: async () => older, clock: systemClock, log: memoryLogger().log };

  const waited = await forwardLegacyMail(o);
  expect(waited).toMatchObject({ waited: true });
  expect(one(waited)).toMatchObject({ stream: LEGACY_AGENT_STREAM, forwarded: 0 });
  expect(await shardedInbox("alice")).toEqual([]);
  expect((await (await nc.jetstreamManager()).consumers.info(LEGACY_AGENT_STREAM, "agent-alice")).num_pending).toBe(3);

  older = false;
  // The seat's sharded mailbox may not exist yet (a seat gone from the company): the pass makes it.
  await queue.deleteMailbox(mailbox("bob", "inbox").subject, mailbox("bob", "inbox").group);
  const moved = await forwardLegacyMail(o);
  expect(moved).toEqual({ streams: [cleanly(LEGACY_AGENT_STREAM, 4, 4, true)], waited: false, gave_up: false });
  expect(await shardedInbox("alice")).toEqual([
    { body: "one", id: "alice-wake-0", trace: "t-0" },
    { body: "two", id: "alice-wake-1", trace: "t-1" },
    { body: "three", id: "alice-wake-2", trace: "t-2" },
  ]);
  expect(await shardedInbox("bob")).toEqual([{ body: "four", id: "bob-wake-0", trace: "t-0" }]);
  expect(await legacyStreamThere()).toBe(false);
  expect((await forwardLegacyMail(o)).streams).toEqual([]);

  // Forwarded twice (a pass that died between its publish and its ack): one copy.
  await legacyCompany({ alice: ["one"] });
  await forwardLegacyMail(o);
  expect((await shardedInbox("alice")).filter((m) => m.body === "one")).toHaveLength(1);
  for (const h of ["alice", "bob"]) await queue.deleteMailbox(mailbox(h, "inbox").subject, mailbox(h, "inbox").group);
});

test("a consumer that is no mailbox is left alone, and so is the stream it reads", async () => {
  await legacyCompany({ carol: ["hi"] }, { foreign: true });
  const r = one(await forwardLegacyMail({ nc, queue, olderNodeAlive: async () => false, clock: systemClock, log: memoryLogger().log }));
  expect(r).toMatchObject({ forwarded: 1, mailboxes_deleted: 2, stream_deleted: false });
  expect(await shardedInbox("carol")).toHaveLength(1);
  const jsm = await nc.jetstreamManager();
  expect((await jsm.consumers.info(LEGACY_AGENT_STREAM, "audit-tap")).name).toBe("audit-tap");
  await jsm.streams.delete(LEGACY_AGENT_STREAM);
});

test("one mailbox that cannot be forwarded is reported; every other seat's mail still moves, and the stream stays for the next pass", async () => {
  await legacyCompany({ dave: ["d1", "d2"], erin: ["e1"] });
  const jsm = await nc.jetstreamManager();
  const frank = durableName(mailboxGroup("frank", "inbox"));
  // A mailbox by name whose forwarding fails: a push consumer (an operator's tap, or a build's
  // mistake) cannot be fetched from. It holds mail, so the pass tries it.
  await jsm.consumers.add(LEGACY_AGENT_STREAM, {
    durable_name: frank,
    filter_subject: legacyMailboxSubject("frank", "inbox"),
    deliver_subject: "legacy-test.push.frank",
    ack_policy: AckPolicy.Explicit,
  });
  await nc.jetstream().publish(legacyMailboxSubject("frank", "inbox"), new TextEncoder().encode("f1"), { msgID: "frank-wake-0" });
  const o = { nc, queue, olderNodeAlive: async () => false, clock: systemClock, log: memoryLogger().log };

  // The node's loop says which mailbox failed, and its first pass still moved the rest.
  const { log, sink } = memoryLogger();
  const loop = startLegacyMail({ ...o, clock: new FakeClock(), log });
  const failed = await waitFor("the first pass", async () => (sink.events("legacy_mail_forwarded").length ? sink.events("legacy_mailbox_failed") : null), 30_000);
  loop.stop();
  expect(failed.map((l) => [l.fields.stream, l.fields.mailbox])).toEqual([[LEGACY_AGENT_STREAM, frank]]);
  expect(sink.events("legacy_mail_forwarded")[0]!.fields).toMatchObject({ stream: LEGACY_AGENT_STREAM, forwarded: 3, mailboxes_deleted: 4, stream_deleted: false });

  const r = one(await forwardLegacyMail(o));
  expect(r).toMatchObject({ forwarded: 0, mailboxes_deleted: 0, stream_deleted: false });
  expect(r.failed.map((f) => f.mailbox)).toEqual([frank]);
  expect((await shardedInbox("dave")).map((m) => m.body)).toEqual(["d1", "d2"]);
  expect((await shardedInbox("erin")).map((m) => m.body)).toEqual(["e1"]);
  expect(await legacyStreamThere()).toBe(true);

  // Its mail is where it was, for the next pass.
  expect((await jsm.consumers.info(LEGACY_AGENT_STREAM, frank)).num_pending).toBe(1);

  // Once it is gone (an operator's call), the next pass finishes the job.
  await jsm.consumers.delete(LEGACY_AGENT_STREAM, frank);
  expect(one(await forwardLegacyMail(o))).toMatchObject({ forwarded: 0, mailboxes_deleted: 0, stream_deleted: true, failed: [] });
  expect(await legacyStreamThere()).toBe(false);
  for (const h of ["dave", "erin", "frank"]) await queue.deleteMailbox(mailbox(h, "inbox").subject, mailbox(h, "inbox").group);
});

test(`${LEGACY_FAILURES_PER_PASS_MAX} failing mailboxes in one pass is the broker: the pass gives up, says so once with what it had moved, and the stream stays`, async () => {
  await legacyCompany({ hana: ["h1"] });
  const jsm = await nc.jetstreamManager();
  // Push consumers named like mailboxes, each holding mail: none can be fetched from.
  const taps = Array.from({ length: LEGACY_FAILURES_PER_PASS_MAX }, (_, i) => `tap-${i}`);
  for (const h of taps) {
    await jsm.consumers.add(LEGACY_AGENT_STREAM, {
      durable_name: durableName(mailboxGroup(h, "inbox")),
      filter_subject: legacyMailboxSubject(h, "inbox"),
      deliver_subject: `legacy-test.push.${h}`,
      ack_policy: AckPolicy.Explicit,
    });
    await nc.jetstream().publish(legacyMailboxSubject(h, "inbox"), new TextEncoder().encode(h), { msgID: `${h}-wake-0` });
  }
  const { log, sink } = memoryLogger();
  const loop = startLegacyMail({ nc, queue, olderNodeAlive: async () => false, clock: new FakeClock(), log });
  const [failed] = await waitFor("the pass to give up", async () => (sink.events("legacy_mail_failed").length ? sink.events("legacy_mail_failed") : null), 30_000);
  loop.stop();
  expect(failed!.fields).toMatchObject({ stream: LEGACY_AGENT_STREAM, reason: `${LEGACY_FAILURES_PER_PASS_MAX} mailboxes or streams failed in one pass` });
  expect(taps.map((h) => durableName(mailboxGroup(h, "inbox")))).toContain(failed!.fields.mailbox as string);
  // One line for the pass, not one per mailbox: at this count the cause is one.
  expect(sink.events("legacy_mailbox_failed")).toEqual([]);
  // hana's mailbox is listed first (the server lists by name) and went in the same round,
  // so the pass moved its mail before giving up, and its line says so.
  const moved = sink.events("legacy_mail_forwarded").reduce((n, l) => n + (l.fields.forwarded as number), 0);
  expect(moved).toBe(1);
  expect((await shardedInbox("hana")).map((m) => m.body)).toEqual(["h1"]);
  expect(await legacyStreamThere()).toBe(true);

  await jsm.streams.delete(LEGACY_AGENT_STREAM);
  await queue.deleteMailbox(mailbox("hana", "inbox").subject, mailbox("hana", "inbox").group);
});

/** The wait inside (the child under way, 30 s), a pass over 1,000 messages, and room to spare. */
const KILLED_PASS_TEST_MS = 120_000;

test("a pass killed with -9 halfway loses nothing and forwards nothing twice: the next pass takes back what it held and finishes, each message once", async () => {
  const N = 1_000;
  const jsm = await nc.jetstreamManager();
  // The older build's ack wait (30 min): what the killed pass held comes back at the next
  // pass's reset, or this case runs out of time.
  await legacyCompany({ gina: Array.from({ length: N }, (_, i) => `g${i}`) }, { ackWaitMs: 30 * 60_000 });
  const box = mailbox("gina", "inbox");
  const inSharded = async () => (await jsm.streams.info(mailboxStream("gina"), { subjects_filter: box.subject })).state.subjects?.[box.subject] ?? 0;

  const child = Bun.spawn([process.execPath, join(import.meta.dir, "fixtures", "legacy-pass.ts"), nats.url], { stdout: "pipe", stderr: "inherit" });
  try {
    const atKill = await waitFor("the child's pass to be under way", async () => ((await inSharded()) >= N / 10 ? inSharded() : null), 30_000, () => `child exit ${child.exitCode}`);
    child.kill("SIGKILL");
    await child.exited;
    expect(child.signalCode).toBe("SIGKILL");
    expect(atKill).toBeLessThan(N);

    const held = (await jsm.consumers.info(LEGACY_AGENT_STREAM, durableName(mailboxGroup("gina", "inbox")))).num_ack_pending;
    const next = one(await forwardLegacyMail({ nc, queue, olderNodeAlive: async () => false, clock: systemClock, log: memoryLogger().log }));
    expect(next).toMatchObject({ stream_deleted: true, failed: [] });
    // What this pass moved is the rest: the killed pass's confirmed ones are not moved again
    // (those it held unconfirmed, `held`, may have reached the shards already: their ids dedupe).
    expect(next.forwarded).toBeGreaterThanOrEqual(N - atKill - held);
    expect(next.forwarded).toBeLessThanOrEqual(N - atKill + held);
    const bodies = (await shardedInbox("gina")).map((m) => m.body);
    expect(bodies).toHaveLength(N);
    expect(new Set(bodies).size).toBe(N);
  } finally {
    child.kill("SIGKILL");
    await queue.deleteMailbox(box.subject, box.group);
  }
}, KILLED_PASS_TEST_MS);
