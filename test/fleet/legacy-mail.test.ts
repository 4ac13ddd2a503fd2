// An upgrade from the build that kept all seat mail in one stream, on a real `crewlet run`
// process: mail an older node left in CREWLET_AGENT (`crewlet.agent.{handle}.inbox`) is
// answered by this build's seat, and the legacy mailboxes and stream are gone afterwards.
// While a lease below this build's protocol is live nothing is moved; then it is.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { AckPolicy, connect, DeliverPolicy, type NatsConnection } from "nats";
import { createCoordination } from "../../src/coord/index.ts";
import { encodeTrigger } from "../../src/org/trigger.ts";
import { MAIL_DUPLICATE_WINDOW_MS, streamConfig } from "../../src/queue/streams.ts";
import { durableName, legacyMailboxSubject, LEGACY_AGENT_STREAM, mailboxGroup } from "../../src/queue/topics.ts";
import { silentLogger } from "../../src/log.ts";
import { systemClock } from "../../src/clock.ts";
import { makeFleet, waitFor as waitUntil, type Fleet, type FleetNode } from "../support/fleet.ts";

/** Passes every 5 s here (testing.legacy_pass_seconds; shipped LEGACY_PASS_MS): the
 *  promise is about what a pass does, not how often; a loaded box answers well inside two more. */
const PASS_S = 5;
const WAIT_MS = 2 * PASS_S * 1000 + 60_000;
const FIRST_WAIT_MS = 75_000;
/** The older node's presence: the fleet's own lease TTL (leaseTtlSeconds), renewed a third of it. */
const OLDER_TTL_MS = 3_000;

let fleet: Fleet;
let a: FleetNode;
let nc: NatsConnection;
beforeAll(async () => {
  fleet = await makeFleet({
    nodes: [{ id: "a", kind: "member" }],
    leaseTtlSeconds: 3,
    testing: { legacy_pass_seconds: PASS_S },
    // An older node is a peer in the lease store: local coordination has no peers.
    kvCoordination: true,
    company: {
      name: "Upgrade Co",
      default_llm: "script",
      providers: { llm: { script: { type: "scripted", rules: [{ reply: "ok {{text}}" }] } } },
      roles: [{ name: "Old Timer", handle: "oldie" }],
    },
  });
  a = fleet.node("a");
  await a.start();
  await a.waitReady(90_000);
  nc = await connect({ servers: `nats://127.0.0.1:${a.clientPort}`, ...a.natsAuth(), name: "legacy-mail-test" });
}, 180_000);
afterAll(async () => {
  await nc?.close();
  await fleet?.stop();
});

/** The seat's replies in the message's thread. */
async function repliesTo(id: string): Promise<number> {
  const res = await a.get("/chat/channels/general/messages?limit=500");
  if (!res.ok) throw new Error(`GET messages: ${res.status}`);
  const { messages } = (await res.json()) as { messages: { author: string; thread_parent: string | null }[] };
  return messages.filter((m) => m.thread_parent === id && m.author === "oldie").length;
}
async function answered(id: string): Promise<true | null> {
  return (await repliesTo(id)) > 0 ? true : null;
}

test("mail in the stream before the shards waits while an older lease is live, then is answered and the stream goes", async () => {
  // A post that mentions nobody wakes nobody; the older build's wake for it is made by hand.
  const res = await a.post("/chat/channels/general/messages", { body: "left over from the old build", author: "founder" });
  expect([200, 202]).toContain(res.status);
  const id = ((await res.json()) as { message_id: string }).message_id;

  // The older node: a presence lease at the protocol before the shards, and its stream and
  // mailbox with the mail in it.
  const coord = await createCoordination({ type: "embedded-kv", nc, replicas: 1, clock: systemClock, log: silentLogger, protocol: 4 });
  const older = await coord.leases.acquire("node:older", { owner: "older:1", preferred: "older", ttl_ms: OLDER_TTL_MS, meta: {}, gate: false });
  if (!older.ok) throw new Error(`the older node's presence was refused: ${older.rule}`);
  // Renewed as the older node's heartbeat would, until it goes.
  const beat = setInterval(() => void coord.leases.renew("node:older", "older:1", older.lease.epoch).catch(() => undefined), OLDER_TTL_MS / 3);
  const jsm = await nc.jetstreamManager();
  // Interest-retained, as that build made it (streamSpecs now gives this build's limits-retained streams).
  const mail = { retention: "interest", max_age_ms: 0, max_bytes: -1, max_msgs: -1, duplicate_window_ms: MAIL_DUPLICATE_WINDOW_MS } as const;
  await jsm.streams.add(streamConfig({ ...mail, name: LEGACY_AGENT_STREAM, subjects: ["crewlet.agent.>"] }, 1));
  await jsm.consumers.add(LEGACY_AGENT_STREAM, {
    durable_name: durableName(mailboxGroup("oldie", "inbox")),
    filter_subject: legacyMailboxSubject("oldie", "inbox"),
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
  });
  const trigger = encodeTrigger({
    type: "chat_mention", event_id: `legacy-${id}`, seat: "oldie", conversation: `chat:general:${id}`, from: "founder",
    text: "left over from the old build", refs: { channel: "general", message_id: id }, created_at: Date.now(),
  });
  await nc.jetstream().publish(legacyMailboxSubject("oldie", "inbox"), trigger, { msgID: `legacy-${id}` });

  // A pass while the older lease is live moves nothing.
  await waitUntil("a pass that waits for the older node", async () => (a.events("legacy_mail_waiting").length > 0 ? true : null), FIRST_WAIT_MS);
  expect((await jsm.consumers.info(LEGACY_AGENT_STREAM, durableName(mailboxGroup("oldie", "inbox")))).num_pending).toBe(1);
  expect(await answered(id)).toBeNull();

  // The older node is gone: the mail is forwarded, answered, and the old stream deleted.
  clearInterval(beat);
  await coord.leases.release("node:older", "older:1", older.lease.epoch);
  await coord.close();
  await waitUntil("the legacy mail answered", () => answered(id), WAIT_MS);
  await waitUntil("the legacy stream deleted", async () => (await jsm.streams.info(LEGACY_AGENT_STREAM).then(() => null, () => true)), WAIT_MS);
  // The pass logs once it has deleted the stream, so its line can land a moment after. The
  // move and the delete may be two passes (one cut short between them on a loaded box, by a
  // broker call that timed out; a clean-clone CI run saw no single line with both, and its
  // count cannot tell a move whose ack answer was lost): what is promised is the mail moved
  // and answered once, and a pass that deleted the stream and said so.
  const lines = () => JSON.stringify([...a.events("legacy_mail_forwarded"), ...a.events("legacy_mailbox_failed"), ...a.events("legacy_mail_failed")]);
  await waitUntil("the pass's line for the delete", async () => a.events("legacy_mail_forwarded").find((l) => l.stream_deleted === true), 30_000, lines);
  expect(await repliesTo(id)).toBe(1);
}, 4 * WAIT_MS);
