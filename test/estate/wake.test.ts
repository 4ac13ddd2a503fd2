// Wakes are derived from applied records: a chat message mentioning two seats puts exactly
// one trigger in each inbox, even when the wake feed's deliveries are replayed, and a human
// seat gets none. Real parts: nats-server, the queue's streams and mailboxes, the claims
// slot from the coordination backend.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { JetStreamManager, NatsConnection } from "nats";
import { systemClock } from "../../src/clock.ts";
import { createCoordination, type CoordinationHandle } from "../../src/coord/index.ts";
import { durableName, mailbox, mailboxStream, stateLogStream, wakeGroup } from "../../src/queue/topics.ts";
import { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { silentLogger } from "../../src/log.ts";
import { decodeTrigger, type Trigger } from "../../src/org/trigger.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { eventually, removeTempDirs, startTestEstate, tempDir, type TestEstate } from "./support.ts";

/** Generous: real nats-servers on a slow 2-core CI box. */
const TEST_TIMEOUT_MS = 60_000;
const SEATS = ["alice", "bob", "carol"];

let nats: TestNats;
let nc: NatsConnection;
let jsm: JetStreamManager;
let coord: CoordinationHandle;
let node: TestEstate;
const dir = tempDir();

async function inbox(handle: string): Promise<Trigger[]> {
  const info = await jsm.streams.info(mailboxStream(handle), { subjects_filter: mailbox(handle, "inbox").subject });
  const count = info.state.subjects?.[mailbox(handle, "inbox").subject] ?? 0;
  const out: Trigger[] = [];
  if (count === 0) return out;
  // Read without consuming: the mailboxes stay as the seats would find them.
  let seq = 0;
  for (let i = 0; i < count; i++) {
    // next_by_subj is in the server API (2.9 and later); this client's types predate it.
    const m = await jsm.streams.getMessage(mailboxStream(handle), { next_by_subj: mailbox(handle, "inbox").subject, seq: seq + 1 } as never);
    seq = m.seq;
    const t = decodeTrigger(m.data);
    if (!t.ok) throw new Error(t.error);
    out.push(t.trigger);
  }
  return out;
}

async function feedDrained(domain: "chat" | "tracker"): Promise<boolean> {
  const c = await jsm.consumers.info(stateLogStream(domain), durableName(wakeGroup(domain)));
  const last = (await jsm.streams.info(stateLogStream(domain))).state.last_seq;
  return c.num_pending === 0 && c.num_ack_pending === 0 && c.delivered.stream_seq >= last;
}

async function startNode(): Promise<TestEstate> {
  return startTestEstate({ nc, nodeId: "a", dir, dataNodes: () => ["a"], claims: coord.slot("claims") });
}

beforeAll(async () => {
  nats = await startNats(1);
  nc = await nats.connect();
  jsm = await nc.jetstreamManager();
  coord = await createCoordination({ type: "local", nc, replicas: 1, clock: systemClock, log: silentLogger });
  const queue = new JetStreamQueue({ nc, replicas: 1, clock: systemClock, log: silentLogger });
  await queue.ensureStreams();
  for (const h of SEATS) await queue.ensureMailbox(mailbox(h, "inbox").subject, mailbox(h, "inbox").group);
  node = await startNode();
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  await node?.estate.stop();
  await coord?.close();
  await nc?.close();
  await nats?.stop();
  removeTempDirs();
}, TEST_TIMEOUT_MS);

test("a message mentioning two seats and a person: one trigger per seat, none for the person, even when replayed", async () => {
  const out = await node.estate.router.write("chat", {
    op: "chat.post", channel: "eng", author: "dave", body: "@alice and @bob please look; cc @carol", thread_parent: null, mentions: ["alice", "bob", "carol"], dm: null,
  });
  expect(out.status).toBe("applied");
  const messageId = out.op_id;
  await eventually(async () => (await inbox("alice")).length === 1 && (await inbox("bob")).length === 1, "a trigger in alice's and bob's inboxes");
  await eventually(() => feedDrained("chat"), "the chat wake feed drained");
  expect(await inbox("carol")).toEqual([]);
  const [t] = await inbox("alice");
  expect(t).toMatchObject({ type: "chat_mention", seat: "alice", from: "dave", conversation: `chat:eng:${messageId}`, refs: { channel: "eng", message_id: messageId } });

  // Replay 1: the feed's consumer is gone and every record is handed out again, with the
  // claims wiped too — the inbox's msg-id window alone must hold.
  await node.estate.stop();
  await jsm.consumers.delete(stateLogStream("chat"), durableName(wakeGroup("chat")));
  const claims = coord.slot("claims");
  for (const k of await claims.keys()) await claims.purge(k);
  node = await startNode();
  await eventually(() => feedDrained("chat"), "the replayed chat feed drained");
  expect((await inbox("alice")).length).toBe(1);
  expect((await inbox("bob")).length).toBe(1);
  expect((await inbox("carol")).length).toBe(0);
}, TEST_TIMEOUT_MS);

test("past the inbox's msg-id window, the claims slot still stops a replayed record waking anyone twice", async () => {
  // Shrink the agent stream's duplicate window so a replay lands outside it, as one after a
  // long outage would.
  const info = await jsm.streams.info(mailboxStream("bob"));
  await jsm.streams.update(mailboxStream("bob"), { ...info.config, duplicate_window: 100 * 1_000_000 });
  const out = await node.estate.router.write("chat", {
    op: "chat.post", channel: "general", author: "carol", body: "@bob ping", thread_parent: null, mentions: ["bob"], dm: null,
  });
  expect(out.status).toBe("applied");
  await eventually(async () => (await inbox("bob")).length === 2, "bob's second trigger");
  await eventually(() => feedDrained("chat"), "chat feed drained");
  await Bun.sleep(300); // past the 100 ms window
  await node.estate.stop();
  await jsm.consumers.delete(stateLogStream("chat"), durableName(wakeGroup("chat")));
  node = await startNode();
  await eventually(() => feedDrained("chat"), "the replayed chat feed drained");
  expect((await inbox("bob")).length).toBe(2);
  expect((await inbox("alice")).length).toBe(1);
  await jsm.streams.update(mailboxStream("bob"), info.config);
}, TEST_TIMEOUT_MS);

test("work assigned to a seat, a comment on it, and a DM wake the seat; its own acts do not", async () => {
  const r = node.estate.router;
  const created = await r.write("tracker", {
    op: "work.create", project: "ENG", type: "task", title: "fix the build", body: "", status: "todo", priority: "high", assignee: "alice", reporter: "carol", parent: null, labels: [], due: null,
  });
  const key = created.status === "applied" ? (created.outcome as unknown as { key: string }).key : "";
  await r.write("tracker", { op: "work.comment", key, author: "carol", body: "any news?" });
  await r.write("tracker", { op: "work.comment", key, author: "alice", body: "on it" });
  await r.write("tracker", { op: "work.update", key, actor: "carol", patch: { assignee: "bob" } });
  await r.write("chat", { op: "chat.post", channel: "dm.bob.carol", author: "carol", body: "hi bob", thread_parent: null, mentions: [], dm: { members: ["bob", "carol"] } });
  await eventually(async () => (await feedDrained("tracker")) && (await feedDrained("chat")), "feeds drained");
  const alice = (await inbox("alice")).map((t) => t.type);
  expect(alice).toEqual(["chat_mention", "task_assigned", "task_comment"]);
  // Two feeds (tracker, chat) publish independently: compare bob's new triggers as a set.
  const bob = (await inbox("bob")).slice(2);
  const dm = bob.find((t) => t.type === "chat_direct");
  expect(bob.map((t) => `${t.type}:${t.conversation}`).sort()).toEqual(
    // Alice's "on it" landed while alice was still assigned: it is her own act, so nobody.
    [`chat_direct:chat:dm.bob.carol:${dm?.refs.message_id}`, `task_assigned:work:${key}`].sort(),
  );
  expect(await inbox("carol")).toEqual([]);
}, TEST_TIMEOUT_MS);

test("a burst of posts reaches each seat's inbox in the order written, while seats are woken at once", async () => {
  // The feed publishes for different seats at once and for one seat in record order: forty
  // posts alternating between alice and bob, written without waiting for their wakes, must
  // land in each inbox in the order they were written. The claim reads answer after a
  // seeded jitter, as a loaded broker's do, so publishes not kept in order would cross.
  await node.estate.stop();
  const real = coord.slot("claims");
  let seed = 7;
  const jitter = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return Bun.sleep(seed % 25);
  };
  node = await startTestEstate({
    nc, nodeId: "a", dir, dataNodes: () => ["a"],
    claims: { get: async (k: string) => (await jitter(), real.get(k)), create: (k: string, v: Uint8Array) => real.create(k, v) },
  });
  const before = { alice: (await inbox("alice")).length, bob: (await inbox("bob")).length };
  const writes: Promise<unknown>[] = [];
  for (let i = 0; i < 40; i++) {
    const seat = i % 2 === 0 ? "alice" : "bob";
    writes.push(node.estate.router.write("chat", {
      op: "chat.post", channel: "eng", author: "dave", body: `@${seat} number ${i}`, thread_parent: null, mentions: [seat], dm: null,
    }));
  }
  await Promise.all(writes);
  await eventually(() => feedDrained("chat"), "the chat feed drained after the burst");
  for (const seat of ["alice", "bob"] as const) {
    const positions = (await inbox(seat)).slice(before[seat]).map((t) => t.refs.position);
    expect(positions.length).toBe(20);
    // Written concurrently, the records' log order is whatever the broker made it; the
    // inbox must follow that order.
    expect(positions).toEqual([...positions].sort((a, b) => (a as number) - (b as number)));
  }
}, TEST_TIMEOUT_MS);
