// A settled message stays settled (issue 11 item 6), on real nats-server processes: three
// members, R3 mail streams, six seat inboxes (mailboxes of one replica each, spread over the
// members) drained by one queue connected to a member that survives, each delivery run as
// a turn is — the completion ledger (R3 KV, crewlet_ledger) read first, the answer given,
// the ledger written, then the ack, confirmed by the consumer's member (a double ack). The
// member holding the most inbox consumers is killed -9 at the moment one of their acks
// leaves the client, with others in flight beside it, and restarted once the mail is
// through. Its mailboxes are made again on live members (JetStreamQueue.reviveMailbox) from
// what their streams still store: the unsettled mail and what no trim had yet removed, so
// acks confirmed before the kill can come again — and the ledger skips each. Held: every
// message is answered exactly once, and in the end nothing is left pending or unacknowledged.
import { afterAll, expect, test } from "bun:test";
import { connect, type NatsConnection, type Payload, type RequestOptions } from "nats";
import { systemClock } from "../../src/clock.ts";
import { createCoordination } from "../../src/coord/index.ts";
import { whileForming } from "../support/forming.ts";
import { memoryLogger, silentLogger } from "../../src/log.ts";
import { CompletionLedger } from "../../src/agent/ledger.ts";
import { ack, type Delivery, type Outcome } from "../../src/queue/contract.ts";
import { JetStreamQueue, parseAckSubject } from "../../src/queue/jetstream.ts";
import { durableName, mailbox, streamForSubject } from "../../src/queue/topics.ts";
import { decodeTrigger, encodeTrigger } from "../../src/org/trigger.ts";
import { startNats, type TestNats } from "../support/nats.ts";

const MAILBOXES = 6;
const PER_MAILBOX = 50;
const TOTAL = MAILBOXES * PER_MAILBOX;
/** The kill comes once this share of the mail is answered: acks flowing on every inbox. */
const KILL_AFTER_ANSWERED = Math.floor(TOTAL / 3);
/**
 * The inbox consumers' ack wait: short, so an ack the next leader does not know of brings
 * the message back while the test watches (production: 30 min). Longer than a turn here
 * (a ledger read and write, well under a second) and than an R3 election (~0.3–4 s).
 */
const ACK_WAIT_MS = 6_000;
/** Generous: the rest of the mail through a new leader on a loaded 2-core box. */
const ANSWERED_WITHIN_MS = 90_000;
/** After everything is answered and the killed member is back: two ack waits and more, for
 * any redelivery still to come (the restarted member leading again with stale state). */
const QUIET_MS = 3 * ACK_WAIT_MS;

interface AckAttempt {
  consumer: string;
  seq: number;
  sent_ms: number;
  done_ms: number | null;
  confirmed: boolean;
}

const clusters: TestNats[] = [];
const conns: NatsConnection[] = [];
afterAll(async () => {
  for (const nc of conns) await nc.close().catch(() => {});
  for (const n of clusters) await n.stop();
});

/**
 * The queue's connection, with its ack requests recorded (when each left, whether the
 * consumer's leader answered it) and `onAck` called as each one leaves — every other call
 * goes to the real connection untouched.
 */
function recordingAcks(nc: NatsConnection, attempts: AckAttempt[], onAck: (a: AckAttempt) => void): NatsConnection {
  return new Proxy(nc, {
    get(target, prop) {
      if (prop === "request") {
        return (subject: string, data?: Payload, opts?: RequestOptions) => {
          const reply = target.request(subject, data, opts);
          if (!subject.startsWith("$JS.ACK.")) return reply;
          const info = parseAckSubject(subject);
          const a: AckAttempt = { consumer: info.consumer, seq: info.streamSeq, sent_ms: Date.now(), done_ms: null, confirmed: false };
          attempts.push(a);
          onAck(a);
          return reply.then(
            (m) => ((a.done_ms = Date.now()), (a.confirmed = true), m),
            (err) => {
              a.done_ms = Date.now();
              throw err;
            },
          );
        };
      }
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

test("kill -9 of the inbox consumers' leader with acks in flight: nothing acked is answered twice, nothing is lost", async () => {
  const nats = await startNats(3);
  clusters.push(nats);
  const setupNc = await nats.connect({ name: "setup" });
  conns.push(setupNc);
  const setup = new JetStreamQueue({ nc: setupNc, replicas: 3, clock: systemClock, log: silentLogger, ackWait_ms: ACK_WAIT_MS });
  await whileForming(() => setup.ensureStreams());
  const seats = Array.from({ length: MAILBOXES }, (_, i) => `settle-${i}`);
  const boxes = seats.map((s) => mailbox(s, "inbox"));
  for (const b of boxes) await setup.ensureMailbox(b.subject, b.group);

  // The victim: the member leading the most inbox consumers. The queue under test talks to
  // another member only, so its connection outlives the kill and its acks reach the
  // consumers' leaders over the cluster's routes, as a node's do.
  const jsm = await setupNc.jetstreamManager({ timeout: 10_000 });
  const leaderOf = new Map<string, string>();
  for (const b of boxes) leaderOf.set(durableName(b.group), (await jsm.consumers.info(streamForSubject(b.subject)!, durableName(b.group))).cluster?.leader ?? "");
  const tally = new Map<string, number>();
  for (const l of leaderOf.values()) tally.set(l, (tally.get(l) ?? 0) + 1);
  const victimName = [...tally.entries()].sort((x, y) => y[1] - x[1])[0]![0];
  const victim = nats.members.find((m) => m.name === victimName)!;
  const via = nats.members.find((m) => m !== victim)!;
  const ledByVictim = new Set([...leaderOf].filter(([, l]) => l === victimName).map(([c]) => c));
  expect(ledByVictim.size).toBeGreaterThan(0);

  // The mail, stored before anything is attached: one ledgered trigger per message.
  for (const [i, b] of boxes.entries()) {
    for (let k = 0; k < PER_MAILBOX; k++) {
      const event_id = `settle-${i}-${k}`;
      const t = { type: "task_assigned" as const, event_id, seat: seats[i]!, conversation: `work:S-${i}`, from: "test", text: `job ${k}`, refs: {}, created_at: Date.now() };
      await setup.publish(b.subject, encodeTrigger(t), { msgId: event_id });
    }
  }

  const rawNc = await connect({ servers: via.url, name: "seat-holder", reconnect: true, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  conns.push(rawNc);
  const attempts: AckAttempt[] = [];
  const answers = new Map<string, number>();
  let killed_ms: number | null = null;
  const nc = recordingAcks(rawNc, attempts, (a) => {
    // The kill, as this ack leaves: it and whatever else is in flight meet a dying leader.
    if (killed_ms === null && ledByVictim.has(a.consumer) && answers.size >= KILL_AFTER_ANSWERED) {
      killed_ms = Date.now();
      victim.proc.kill("SIGKILL");
    }
  });
  const { log, sink } = memoryLogger("debug");
  const queue = new JetStreamQueue({ nc, replicas: 3, clock: systemClock, log, ackWait_ms: ACK_WAIT_MS });
  const coordNc = await nats.connect({ name: "ledger" });
  conns.push(coordNc);
  const coord = await whileForming(() => createCoordination({ type: "embedded-kv", nc: coordNc, replicas: 3, lease_ttl_ms: 45_000, clock: systemClock, log: silentLogger }));
  const ledger = new CompletionLedger(coord.slot("ledger"), systemClock, log);

  /** Every delivery, in order: what came back is judged against the acks confirmed before it. */
  const deliveries: { event_id: string; consumer: string; seq: number; count: number; at_ms: number }[] = [];
  const skipped: string[] = [];
  const confirmedThenRedelivered: string[] = [];
  const turn = (seat: string, consumer: string) => async (d: Delivery): Promise<Outcome> => {
    const decoded = decodeTrigger(d.data);
    if (!decoded.ok) throw new Error(`not a trigger: ${decoded.error}`);
    const t = decoded.trigger;
    const at_ms = Date.now();
    // Came back although an ack for it was confirmed before this delivery was pulled (a
    // pull is only sent once the last delivery's settle is over).
    if (attempts.some((a) => a.consumer === consumer && a.seq === d.streamSeq && a.confirmed && a.done_ms! <= at_ms)) confirmedThenRedelivered.push(t.event_id);
    deliveries.push({ event_id: t.event_id, consumer, seq: d.streamSeq, count: d.deliveryCount, at_ms });
    const check = await ledger.check([t]);
    if (check.skip.length > 0) {
      skipped.push(t.event_id);
      return ack();
    }
    answers.set(t.event_id, (answers.get(t.event_id) ?? 0) + 1);
    await ledger.record({ seat, turn_id: `turn-${t.event_id}-${d.deliveryCount}`, node: "holder", outcome: "completed", triggers: [t], answered_messages: [] });
    return ack();
  };
  for (const [i, b] of boxes.entries()) await queue.attach(b.subject, b.group, turn(seats[i]!, durableName(b.group)));

  const deadline = Date.now() + ANSWERED_WITHIN_MS;
  while (answers.size < TOTAL && Date.now() < deadline) await Bun.sleep(200);
  expect(killed_ms).not.toBeNull();
  expect(answers.size).toBe(TOTAL);

  // The killed member comes back (as a killed node's sidecar does) and may lead again.
  await victim.restart();
  await Bun.sleep(QUIET_MS);

  const inFlightAtKill = attempts.filter((a) => a.sent_ms <= killed_ms! && (a.done_ms === null || a.done_ms >= killed_ms!));
  const redelivered = deliveries.filter((d) => d.count > 1 || deliveries.some((e) => e.event_id === d.event_id && e.at_ms < d.at_ms));
  const settleFailed = sink.events("queue_settle_failed");
  console.log(
    `settle under a leader kill: ${TOTAL} messages, ${deliveries.length} deliveries, ${attempts.length} ack requests` +
      ` (${attempts.filter((a) => !a.confirmed).length} unanswered), ${inFlightAtKill.length} in flight at the kill on ${ledByVictim.size} consumer(s) it led;` +
      ` ${redelivered.length} redelivered (${confirmedThenRedelivered.length} after a confirmed ack), ${skipped.length} skipped by the ledger, ${settleFailed.length} settle(s) unconfirmed,` +
      ` ledger writes retried ${sink.events("ledger_write_retried").length}, failed ${sink.events("ledger_write_failed").length}`,
  );

  // The kill met acks in flight; the victim's mailboxes were made again on live members.
  expect(inFlightAtKill.length).toBeGreaterThan(0);
  expect(sink.events("queue_mailbox_revived").length).toBeGreaterThanOrEqual(1);
  // A settle given up (its consumer's member dead) is a message that came again and was
  // the ledger's to skip, as is every delivery after a confirmed ack.
  for (const e of settleFailed) {
    const again = deliveries.filter((d) => d.consumer === durableName(String(e.fields.group)) && d.seq === e.fields.seq);
    expect(again.some((d) => skipped.includes(d.event_id))).toBe(true);
  }
  for (const id of confirmedThenRedelivered) expect(skipped).toContain(id);
  // Nothing answered twice, nothing unanswered: every redelivery was the ledger's to skip.
  expect([...answers].filter(([, n]) => n !== 1)).toEqual([]);
  expect(answers.size).toBe(TOTAL);
  expect(skipped.length).toBe(deliveries.length - TOTAL);
  expect(sink.events("ledger_write_failed")).toEqual([]);
  // Every message settled in the end: nothing pending, nothing held unacknowledged.
  for (const b of boxes) {
    const state = await setup.inspectMailbox(b.subject, b.group);
    expect({ box: b.group, pending: state.num_pending, ack_pending: state.num_ack_pending }).toEqual({ box: b.group, pending: 0, ack_pending: 0 });
  }
  await queue.close();
  await coord.close();
}, 240_000);
