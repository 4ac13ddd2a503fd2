// Table tests on the pure parts of the queue: names, wire parsing, settlement, dead letters.
import { expect, test } from "bun:test";
import { MAX_DELIVERIES } from "../../src/queue/contract.ts";
import { settlementFor } from "../../src/queue/attachment.ts";
import { deadLetterCopy, parseDeadLetter, replayOf } from "../../src/queue/deadletter.ts";
import { parseAckSubject } from "../../src/queue/jetstream.ts";
import {
  auditSubject,
  dlqSubject,
  durableName,
  eventSubject,
  groupCandidates,
  groupOfDurable,
  mailboxGroup,
  mailboxSubject,
  parseMailbox,
  agentShard,
  AGENT_SHARDS,
  currentMailboxSubject,
  allSeatMailboxes,
  legacyMailboxSubject,
  mailboxStream,
  parseLegacyMailbox,
  seatMailboxes,
  stateLogSubject,
  streamForSubject,
  subjectMatches,
} from "../../src/queue/topics.ts";

test("a seat is given its inbox and reflection mailboxes, and retires all three the grammar names", () => {
  expect(seatMailboxes("alice")).toEqual([
    { subject: "crewlet.seats.14.alice.inbox", group: "agent-alice" },
    { subject: "crewlet.seats.14.alice.reflect", group: "agent-alice-reflect" },
  ]);
  expect(allSeatMailboxes("alice")).toEqual([
    { subject: "crewlet.seats.14.alice.inbox", group: "agent-alice" },
    { subject: "crewlet.seats.14.alice.control", group: "agent-alice-control" },
    { subject: "crewlet.seats.14.alice.reflect", group: "agent-alice-reflect" },
  ]);
  expect(mailboxStream("alice")).toBe("CREWLET_SEATS_14");
  expect(legacyMailboxSubject("alice", "inbox")).toBe("crewlet.agent.alice.inbox");
});

// Fixed values, because every build of every node must agree on them.
test.each([["a", 3], ["alice", 14], ["bob", 6], ["bob-control", 15], ["ceo", 11], ["é", 7]] as const)("the mail shard of %p is %p", (handle, shard) => {
  expect(agentShard(handle)).toBe(shard);
});

test("a company's seats spread over every shard", () => {
  const perShard = new Array<number>(AGENT_SHARDS).fill(0);
  for (let i = 0; i < 10_000; i++) perShard[agentShard(`agent-${i}`)]! += 1;
  // 625 a shard if even; sequential names (what bench/scale.ts generates) within a tenth.
  for (const n of perShard) expect(Math.abs(n - 625)).toBeLessThan(63);
});

test.each([["a.b"], ["a*"], ["a>"], ["a b"], [""]])("handle %p is refused, naming it", (h) => {
  expect(() => mailboxSubject(h, "inbox")).toThrow(/invalid seat handle/);
});

test.each([
  ["crewlet.seats.06.bob.control", "agent-bob-control", { handle: "bob", kind: "control" }],
  ["crewlet.seats.15.bob-control.inbox", "agent-bob-control", { handle: "bob-control", kind: "inbox" }],
  ["crewlet.seats.06.bob.inbox", "agent-bob", { handle: "bob", kind: "inbox" }],
  ["crewlet.seats.06.bob.inbox", "audit-bob", null],
  ["crewlet.seats.06.bob.inbox", "agent-bob-reflect", null],
  ["crewlet.seats.06.bob.other", "agent-bob", null],
  ["crewlet.seats.05.bob.inbox", "agent-bob", null], // not bob's shard
  ["crewlet.mail.06.bob.inbox", "agent-bob", null], // an interest-retained shard of an earlier build
  ["crewlet.agent.bob.inbox", "agent-bob", null], // the stream before the shards
  ["crewlet.events.x", "agent-x", null],
] as const)("parseMailbox(%p, %p)", (subject, group, want) => {
  expect(parseMailbox(subject, group)).toEqual(want as never);
});

test.each([
  ["crewlet.agent.bob.inbox", "crewlet.seats.06.bob.inbox"],
  ["crewlet.agent.bob.reflect", "crewlet.seats.06.bob.reflect"],
  ["crewlet.mail.06.bob.inbox", "crewlet.seats.06.bob.inbox"],
  ["crewlet.mail.05.bob.inbox", "crewlet.mail.05.bob.inbox"], // not bob's shard: nobody's mailbox
  ["crewlet.seats.06.bob.inbox", "crewlet.seats.06.bob.inbox"],
  ["crewlet.agent.bob.other", "crewlet.agent.bob.other"],
  ["crewlet.events.x", "crewlet.events.x"],
] as const)("currentMailboxSubject(%p) = %p", (subject, want) => {
  expect(currentMailboxSubject(subject)).toBe(want);
});

test.each([
  ["crewlet.agent.bob.inbox", "agent-bob", { handle: "bob", kind: "inbox" }],
  ["crewlet.agent.bob.inbox", "audit-bob", null],
  ["crewlet.mail.06.bob.inbox", "agent-bob", { handle: "bob", kind: "inbox" }],
  ["crewlet.mail.06.bob.control", "agent-bob-control", { handle: "bob", kind: "control" }],
  ["crewlet.mail.05.bob.inbox", "agent-bob", null],
  ["crewlet.seats.06.bob.inbox", "agent-bob", null],
] as const)("parseLegacyMailbox(%p, %p)", (subject, group, want) => {
  expect(parseLegacyMailbox(subject, group)).toEqual(want as never);
});

test("a group name alone is ambiguous; groupCandidates lists every reading", () => {
  expect(groupCandidates("agent-bob-control")).toEqual([
    { handle: "bob-control", kind: "inbox" },
    { handle: "bob", kind: "control" },
  ]);
  expect(groupCandidates("notify-inbound")).toEqual([]);
});

test.each([["agent-alice"], ["agent-a_b"], ["agent-é.x y"], ["_5f"]])("durable name of %p is safe and reversible", (group) => {
  const d = durableName(group);
  expect(d).toMatch(/^[A-Za-z0-9_-]+$/);
  expect(groupOfDurable(d)).toBe(group);
});

test("plain groups pass through; foreign durable names do not parse", () => {
  expect(durableName(mailboxGroup("alice", "reflect"))).toBe("agent-alice-reflect");
  expect(groupOfDurable("has.dot")).toBeNull();
  expect(groupOfDurable("bad_zz")).toBeNull();
});

test("subjects map to their streams", () => {
  expect(streamForSubject(mailboxSubject("a", "inbox"))).toBe("CREWLET_SEATS_03");
  expect(streamForSubject("crewlet.seats.15.x.inbox")).toBe("CREWLET_SEATS_15");
  expect(streamForSubject("crewlet.seats.16.x.inbox")).toBeNull();
  expect(streamForSubject("crewlet.mail.15.x.inbox")).toBe("CREWLET_AGENT_15");
  expect(streamForSubject("crewlet.mail.16.x.inbox")).toBeNull();
  expect(streamForSubject("crewlet.agent.a.inbox")).toBe("CREWLET_AGENT");
  expect(streamForSubject("crewlet.notifications.inbound")).toBe("CREWLET_NOTIFICATIONS");
  expect(streamForSubject(eventSubject("seat.claimed"))).toBe("CREWLET_EVENTS");
  expect(streamForSubject(stateLogSubject("chat", "message", "42"))).toBe("CREWLET_CHAT_LOG");
  expect(streamForSubject(dlqSubject("crewlet.agent.a.inbox", "agent-a", "abc"))).toBe("CREWLET_DLQ");
  expect(streamForSubject(auditSubject("node-a"))).toBe("CREWLET_AUDIT");
  expect(streamForSubject("elsewhere.x")).toBeNull();
});

test.each([
  ["crewlet.agent.>", "crewlet.agent.a.inbox", true],
  ["crewlet.agent.>", "crewlet.agent", false],
  ["a.*.c", "a.b.c", true],
  ["a.*.c", "a.b.d", false],
  ["a.b", "a.b.c", false],
] as const)("subjectMatches(%p, %p) = %p", (p, s, want) => {
  expect(subjectMatches(p, s)).toBe(want);
});

test("ack subjects parse in both formats and refuse anything else, naming the field", () => {
  expect(parseAckSubject("$JS.ACK.CREWLET_AGENT.agent-a.3.17.5.1700000000000000000.0")).toEqual({ stream: "CREWLET_AGENT", consumer: "agent-a", deliveryCount: 3, streamSeq: 17 });
  expect(parseAckSubject("$JS.ACK.hub.ACCHASH.CREWLET_AGENT.agent-a.2.9.4.1700000000000000000.0.tok")).toEqual({ stream: "CREWLET_AGENT", consumer: "agent-a", deliveryCount: 2, streamSeq: 9 });
  expect(() => parseAckSubject("_INBOX.x")).toThrow(/not a JetStream ack subject/);
  expect(() => parseAckSubject("$JS.ACK.S.C.x.17.5.1.0")).toThrow(/delivered/);
});

test("settlement: anything short of an ack on the last delivery is dead-lettered", () => {
  expect(settlementFor("ack", MAX_DELIVERIES)).toBe("ack");
  expect(settlementFor("nak", MAX_DELIVERIES - 1)).toBe("nak");
  for (const kind of ["nak", "defer", "threw", "handback"] as const) expect(settlementFor(kind, MAX_DELIVERIES)).toBe("dead-letter");
});

test("a dead letter carries its original headers and id, and reads back", () => {
  const copy = deadLetterCopy("CREWLET_AGENT", {
    subject: "crewlet.agent.a.inbox",
    data: new Uint8Array([1]),
    headers: { "Nats-Msg-Id": "wake-1", "X-Trace": "t", "Nats-Expected-Stream": "CREWLET_AGENT", "Nats-Expected-Last-Sequence": "3" },
    msgId: "wake-1",
    deliveryCount: 25,
    streamSeq: 7,
  }, "agent-a", "nak\nagain");
  expect(copy.subject).toMatch(/^dlq\.crewlet\.agent\.a\.inbox\.agent-a\.[0-9a-f]{16}$/);
  // The copy carries no header the broker acts on at publish (the DLQ refused such copies).
  expect(Object.keys(copy.headers).filter((k) => k.startsWith("Nats-"))).toEqual([]);
  const dl = parseDeadLetter(9, copy.subject, { ...copy.headers, "Nats-Msg-Id": copy.msgId }, new Uint8Array([1]));
  expect(dl.headers).toEqual({ "Nats-Msg-Id": "wake-1", "X-Trace": "t" });
  expect(dl.reason).toBe("nak again");
  expect(dl.deliveryCount).toBe(25);
  // Kept from before the shards: replayed to where the seat reads now.
  expect(replayOf(dl).subject).toBe(mailboxSubject("a", "inbox"));
  expect(dl.id).toBe(9);
  expect(() => parseDeadLetter(1, "dlq.x", {}, new Uint8Array())).toThrow(/Crewlet-Dlq-Subject/);
});
