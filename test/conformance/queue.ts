// ONE conformance suite for the queue contract, run against every backend by a *.test.ts per
// backend. It asserts behaviour, never timing: a broker that got slower passes; a broker
// that stopped behaving this way fails.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { MemorySink } from "../../src/log.ts";
import { memoryLogger } from "../../src/log.ts";
import { systemClock } from "../../src/clock.ts";
import { ack, defer, MAX_DELIVERIES, nak, reject, type Attachment, type Delivery, type MailboxRef, type Outcome, type Queue } from "../../src/queue/contract.ts";
import { ensureSeatMailboxes } from "../../src/queue/mailboxes.ts";
import { PULL_EXPIRES_MS, type Pacing } from "../../src/queue/attachment.ts";
import { agentShard, mailbox, mailboxGroup, mailboxStream, mailboxSubject } from "../../src/queue/topics.ts";

export interface QueueHarness {
  /**
   * The queue under test, streams ensured. Its mailboxes (and the peer's) have the
   * production ack wait, far longer than any wait here: a delivery a backend strands comes
   * back only after it, so a strand fails the test that caused it instead of hiding behind
   * a redelivery.
   */
  queue: Queue;
  /** A second node's queue on the same broker. */
  peer: Queue;
  /** Lines the queue under test logged. */
  logs: MemorySink;
  /**
   * A queue on the same broker whose mailboxes lapse after `ackWait_ms` and whose idle
   * attachments keep `lapsingPacing`: the tests that wait for an ack wait or a safety pull
   * use it, on mailboxes nothing else touches.
   */
  lapsing: Queue;
  /** The ack wait `lapsing` creates its mailboxes with. */
  ackWait_ms: number;
  /** `lapsing`'s safety pull and first nap: production's on a fake clock, shorter on a real one.
   *  The safety pull must outlast 3 × PULL_EXPIRES_MS for the tests below to tell it from a ring. */
  lapsingPacing: Pacing;
  /** Let `ms` pass on the backend's clock (a fake clock advances; a real one is waited on). */
  elapse(ms: number): Promise<void>;
  teardown(): Promise<void>;
}

/** Generous: only a hung backend takes this long; nothing here measures speed. */
const EVENTUALLY_MS = 20_000;

async function eventually(what: string, pred: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + EVENTUALLY_MS;
  for (;;) {
    if (await pred()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await Bun.sleep(5);
  }
}

const enc = (s: string) => new TextEncoder().encode(s);
const text = (d: Delivery) => new TextDecoder().decode(d.data);

let serial = 0;
function handle(): string {
  serial += 1;
  return `t${serial}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Every mailbox, asking again (a few times, bounded) when a cluster member did not
 *  describe a consumer in time: the listing says so rather than leave it out, and a caller
 *  is told to ask again (seen in CI on a loaded 3-member cluster, just after the creates). */
async function listedMailboxes(queue: Queue): Promise<MailboxRef[]> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await queue.listMailboxes();
    } catch (err) {
      if (attempt >= 5 || !String((err as Error).message).includes("ask again")) throw err;
      await Bun.sleep(500);
    }
  }
}

/** A handler that records what it saw and answers with `decide`. */
function recorder(decide: (d: Delivery, nth: number) => Promise<Outcome> | Outcome = () => ack()) {
  const seen: Delivery[] = [];
  const handler = async (d: Delivery): Promise<Outcome> => {
    seen.push(d);
    return decide(d, seen.length);
  };
  return { seen, handler, texts: () => seen.map(text) };
}

/** A drain handler that records each drain it got and answers with `decide`. */
function drainRecorder(decide: (ds: Delivery[], nth: number) => Promise<Outcome[]> | Outcome[] = (ds) => ds.map(() => ack())) {
  const drains: Delivery[][] = [];
  const handler = async (ds: Delivery[]): Promise<Outcome[]> => {
    drains.push(ds);
    return decide(ds, drains.length);
  };
  return {
    drains,
    handler,
    /** Each drain's texts. */
    texts: () => drains.map((ds) => ds.map(text)),
    /** Every delivery's text, in the order they ran. */
    flat: () => drains.flat().map(text),
  };
}

function gate<T>() {
  let open!: (v: T) => void;
  const p = new Promise<T>((r) => (open = r));
  return { p, open };
}

export function queueConformance(name: string, setup: () => Promise<QueueHarness>): void {
  describe(`queue contract: ${name}`, () => {
    let h: QueueHarness;
    const attached: Attachment[] = [];
    const track = (a: Attachment) => (attached.push(a), a);

    beforeAll(async () => {
      h = await setup();
    });
    afterAll(async () => {
      for (const a of attached) await a.detach();
      await h?.teardown();
    });

    async function publishAll(subject: string, texts: string[]): Promise<void> {
      for (const t of texts) await h.queue.publish(subject, enc(t));
    }

    /** A holder that takes `texts` and dies in m2's turn (its attachment gone, m2 never
     * settled): the starting point of the reset and rewind cases. `hung` settles m2 late. */
    async function holderDiedDuringM2(box: { subject: string; group: string }, texts: string[]) {
      await h.queue.ensureMailbox(box.subject, box.group);
      await publishAll(box.subject, texts);
      const hung = gate<Outcome>();
      const dead = recorder((d) => (text(d) === "m2" ? hung.p : ack()));
      const a = track(await h.queue.attach(box.subject, box.group, dead.handler));
      await eventually("the holder is running m2", () => dead.seen.length === 2 && a.inFlight === 1);
      await a.detach();
      return { hung, dead };
    }

    /** Publishes a sentinel and waits for `rec` to see it: everything queued ahead of it has arrived too. */
    async function throughSentinel(subject: string, rec: { texts(): string[] }): Promise<void> {
      const s = `sentinel-${Math.random()}`;
      await h.queue.publish(subject, enc(s));
      await eventually(`sentinel ${s}`, () => rec.texts().includes(s));
    }

    test("a mailbox retains mail with nothing attached, and an attach replays it in order", async () => {
      const box = mailbox(handle(), "inbox");
      await h.queue.ensureMailbox(box.subject, box.group);
      await publishAll(box.subject, ["m1", "m2", "m3"]);
      const rec = recorder();
      track(await h.queue.attach(box.subject, box.group, rec.handler));
      await eventually("3 deliveries", () => rec.seen.length >= 3);
      expect(rec.texts()).toEqual(["m1", "m2", "m3"]);
      expect(rec.seen.map((d) => d.deliveryCount)).toEqual([1, 1, 1]);
      expect(rec.seen[0]!.streamSeq).toBeLessThan(rec.seen[2]!.streamSeq);
    });

    test("re-attaching after a detach replays what was left, in order", async () => {
      const box = mailbox(handle(), "inbox");
      await h.queue.ensureMailbox(box.subject, box.group);
      const first = recorder((d) => (text(d) === "m1" ? ack() : defer("leaving")));
      const a = track(await h.queue.attach(box.subject, box.group, first.handler));
      await publishAll(box.subject, ["m1", "m2"]);
      await eventually("first attachment deferred", () => first.seen.length >= 2 && a.quiesced);
      await a.detach();
      await publishAll(box.subject, ["m3", "m4"]);
      const second = recorder();
      track(await h.queue.attach(box.subject, box.group, second.handler));
      await eventually("replay", () => second.seen.length >= 3);
      expect(second.texts()).toEqual(["m2", "m3", "m4"]);
      expect(first.texts()).toEqual(["m1", "m2"]);
    });

    test("a successor receives exactly what its predecessor never acked", async () => {
      const box = mailbox(handle(), "inbox");
      await h.queue.ensureMailbox(box.subject, box.group);
      await publishAll(box.subject, ["m1", "m2", "m3", "m4", "m5"]);
      const hold = gate<Outcome>();
      const pred = recorder((d) => (text(d) === "m3" ? hold.p : ack()));
      const a = track(await h.queue.attach(box.subject, box.group, pred.handler));
      await eventually("predecessor is running m3", () => pred.seen.length === 3 && a.inFlight === 1);
      await a.detach();
      const succ = recorder();
      track(await h.queue.attach(box.subject, box.group, succ.handler));
      hold.open(nak()); // the predecessor's turn ends without acking m3: it goes back
      await eventually("successor has m3, m4, m5", () => succ.seen.length >= 3);
      await throughSentinel(box.subject, succ);
      expect(succ.texts().slice(0, 3).sort()).toEqual(["m3", "m4", "m5"]);
      expect(succ.texts()).toHaveLength(4);
      expect(succ.seen.find((d) => text(d) === "m3")!.deliveryCount).toBe(2);
      expect(pred.texts()).toEqual(["m1", "m2", "m3"]);
    });

    test("one attachment's detach leaves a peer attached", async () => {
      const box = mailbox(handle(), "inbox");
      const a = recorder();
      const b = recorder();
      const aa = track(await h.queue.attach(box.subject, box.group, a.handler));
      track(await h.peer.attach(box.subject, box.group, b.handler));
      await aa.detach();
      await publishAll(box.subject, ["m1", "m2", "m3"]);
      await eventually("peer received all", () => b.seen.length >= 3);
      await throughSentinel(box.subject, b);
      // The detached attachment's last pull outlives the detach and may catch a message: it
      // hands it back unrun (one delivery), so it may reach the peer behind later ones.
      expect(b.texts().slice(0, 3).sort()).toEqual(["m1", "m2", "m3"]);
      expect(b.texts()).toHaveLength(4);
      expect(b.seen.every((d) => d.deliveryCount <= 2)).toBe(true);
      expect(a.seen).toHaveLength(0);
    });

    test("defer hands the message back at once (count + 1 for the next attach) and quiesces", async () => {
      const box = mailbox(handle(), "inbox");
      await h.queue.ensureMailbox(box.subject, box.group);
      const a = recorder(() => defer("seat is not owned here"));
      const att = track(await h.queue.attach(box.subject, box.group, a.handler));
      await h.queue.publish(box.subject, enc("m1"));
      await eventually("deferred", () => a.seen.length === 1 && att.quiesced && att.inFlight === 0);
      await h.queue.publish(box.subject, enc("m2"));
      const b = recorder();
      track(await h.queue.attach(box.subject, box.group, b.handler));
      await eventually("next attachment has both", () => b.seen.length >= 2);
      expect(b.seen.map((d) => [text(d), d.deliveryCount])).toEqual([["m1", 2], ["m2", 1]]);
      expect(a.seen).toHaveLength(1);
      expect(att.quiesced).toBe(true);
      expect(att.holds.size).toBe(0);
    });

    test("an idle seat mailbox is rung by a publish: its mail comes at once, not at the next safety pull", async () => {
      const box = mailbox(handle(), "inbox");
      const rec = recorder();
      track(await h.lapsing.attach(box.subject, box.group, rec.handler));
      await throughSentinel(box.subject, rec);
      // Past its first nap's wait, its last pull expired with nothing: it waits for its doorbell now.
      await h.elapse(h.lapsingPacing.napAfterStart_ms + PULL_EXPIRES_MS + 1_000);
      await h.lapsing.publish(box.subject, enc("rung"));
      await h.elapse(PULL_EXPIRES_MS);
      expect(rec.texts()).toContain("rung");
    });

    test("mail that rang nobody (a reset's) waits for the safety pull, unless the attachment is rung: then it comes at once", async () => {
      const box = mailbox(handle(), "inbox");
      const rec = recorder((d, nth) => (nth === 1 ? nak(10 * 60_000) : ack()));
      const att = track(await h.lapsing.attach(box.subject, box.group, rec.handler));
      await h.elapse(h.lapsingPacing.napAfterStart_ms + PULL_EXPIRES_MS + 1_000);
      await h.lapsing.publish(box.subject, enc("m1"));
      await eventually("m1 NAK'd for ten minutes", () => rec.seen.length === 1 && att.inFlight === 0);
      await h.elapse(PULL_EXPIRES_MS + 1_000); // its next pull expired empty: napping
      expect(await h.lapsing.resetMailbox(box.subject, box.group)).toBe(true);
      await h.elapse(PULL_EXPIRES_MS);
      expect(rec.seen).toHaveLength(1);
      att.ring();
      await eventually("m1 again, at once", () => rec.seen.length === 2);
      expect(text(rec.seen[1]!)).toBe("m1");
    });

    test("nak asks for the message back, counts a delivery and keeps consuming", async () => {
      const box = mailbox(handle(), "inbox");
      const rec = recorder((d) => (d.deliveryCount === 1 && text(d) === "m1" ? nak() : ack()));
      const att = track(await h.queue.attach(box.subject, box.group, rec.handler));
      await h.queue.publish(box.subject, enc("m1"));
      await eventually("redelivered", () => rec.seen.filter((d) => text(d) === "m1").length === 2);
      expect(rec.seen.filter((d) => text(d) === "m1").map((d) => d.deliveryCount)).toEqual([1, 2]);
      expect(att.quiesced).toBe(false);
      await throughSentinel(box.subject, rec);
    });

    test("a nak with a delay holds the message back that long, then redelivers it (count + 1); other mail flows meanwhile", async () => {
      const box = mailbox(handle(), "inbox");
      const delay_ms = 2_000;
      const rec = recorder((d) => (d.deliveryCount === 1 && text(d) === "later" ? nak(delay_ms) : ack()));
      const att = track(await h.queue.attach(box.subject, box.group, rec.handler));
      expect(att.backingOffUntil).toBe(0);
      await h.queue.publish(box.subject, enc("later"));
      await eventually("first delivery", () => rec.texts().includes("later"));
      // Mail behind it is not held up, and the delayed message has not come back with it.
      await throughSentinel(box.subject, rec);
      expect(rec.texts().filter((t) => t === "later")).toHaveLength(1);
      // The attachment says it is backing off (the deaf-seat watch reads it): its own mail waits.
      expect(att.backingOffUntil).toBeGreaterThan(0);
      await h.elapse(delay_ms + 100);
      await eventually("redelivered after the delay", () => rec.texts().filter((t) => t === "later").length === 2);
      expect(rec.seen.filter((d) => text(d) === "later").map((d) => d.deliveryCount)).toEqual([1, 2]);
      expect(att.quiesced).toBe(false);
    });

    test("reject dead-letters the message at once with its reason; it never comes back", async () => {
      const box = mailbox(handle(), "inbox");
      const rec = recorder((d) => (text(d) === "hopeless" ? reject("permanent: HTTP 401 from the model endpoint") : ack()));
      track(await h.queue.attach(box.subject, box.group, rec.handler));
      await h.queue.publish(box.subject, enc("hopeless"), { msgId: `hopeless-${box.group}` });
      const mine = async () => (await h.queue.deadLetters()).filter((d) => d.originalSubject === box.subject);
      await eventually("dead-lettered", async () => (await mine()).length === 1);
      await throughSentinel(box.subject, rec);
      expect(rec.seen.filter((d) => text(d) === "hopeless").map((d) => d.deliveryCount)).toEqual([1]);
      const [dl] = await mine();
      expect(dl!.deliveryCount).toBe(1);
      expect(dl!.reason).toContain("HTTP 401");
      expect(new TextDecoder().decode(dl!.data)).toBe("hopeless");
    });

    test("a handler that throws is a NAK, and is logged", async () => {
      const box = mailbox(handle(), "inbox");
      const rec = recorder((d) => {
        if (d.deliveryCount === 1) throw new Error("boom");
        return ack();
      });
      track(await h.queue.attach(box.subject, box.group, rec.handler));
      await h.queue.publish(box.subject, enc("m1"));
      await eventually("redelivered after the throw", () => rec.seen.length === 2);
      expect(rec.seen.map((d) => d.deliveryCount)).toEqual([1, 2]);
      expect(h.logs.events("queue_handler_failed").some((l) => l.fields.subject === box.subject)).toBe(true);
    });

    test("the 26th delivery never happens; the message is in the DLQ with its headers and a reason", async () => {
      const box = mailbox(handle(), "inbox");
      const rec = recorder((d) => (text(d) === "poison" ? nak() : ack()));
      const att = track(await h.queue.attach(box.subject, box.group, rec.handler));
      await h.queue.publish(box.subject, enc("poison"), { msgId: `poison-${box.group}`, headers: { "X-Trace": "t-1" } });
      const mine = async () => (await h.queue.deadLetters()).filter((d) => d.originalSubject === box.subject);
      await eventually("dead-lettered", async () => (await mine()).length === 1);
      await throughSentinel(box.subject, rec);
      await att.detach();
      const poison = rec.seen.filter((d) => text(d) === "poison");
      expect(poison.map((d) => d.deliveryCount)).toEqual(Array.from({ length: MAX_DELIVERIES }, (_, i) => i + 1));
      const [dl] = await mine();
      expect(dl!.group).toBe(box.group);
      expect(dl!.deliveryCount).toBe(MAX_DELIVERIES);
      expect(dl!.reason).toContain("nak");
      expect(dl!.headers["X-Trace"]).toBe("t-1");
      expect(dl!.headers["Nats-Msg-Id"]).toBe(`poison-${box.group}`);
      expect(new TextDecoder().decode(dl!.data)).toBe("poison");
      expect(dl!.subject.startsWith(`dlq.${box.subject}.`)).toBe(true);
      // Terminated on the mailbox: a fresh attach finds nothing of it.
      const after = recorder();
      track(await h.queue.attach(box.subject, box.group, after.handler));
      await throughSentinel(box.subject, after);
      expect(after.texts()).toHaveLength(1);
    });

    test("mail published expecting its stream (as wakes are) reaches the DLQ after 25 deliveries; it can be listed, replayed and deleted", async () => {
      const seat = handle();
      const box = mailbox(seat, "inbox");
      let replayed = false;
      const rec = recorder((d) => (text(d) === "expecting" && !replayed ? nak() : ack()));
      const att = track(await h.queue.attach(box.subject, box.group, rec.handler));
      // The wake feed publishes with Nats-Expected-Stream: the seat's mail stream. A copy keeping it
      // was refused by the dead-letter stream ("expected stream does not match") and lost.
      await h.queue.publish(box.subject, enc("expecting"), { msgId: `exp-${box.group}`, headers: { "Nats-Expected-Stream": mailboxStream(seat), "X-Trace": "t-2" } });
      const mine = async () => (await h.queue.deadLetters()).filter((d) => d.originalSubject === box.subject);
      await eventually("dead-lettered", async () => (await mine()).length === 1);
      expect(h.logs.events("queue_settle_failed").filter((l) => String(l.fields.subject) === box.subject)).toEqual([]);
      const [dl] = await mine();
      expect(dl!.deliveryCount).toBe(MAX_DELIVERIES);
      expect(dl!.reason).toContain("nak");
      expect(dl!.headers["X-Trace"]).toBe("t-2");
      expect(Object.keys(dl!.headers).filter((k) => k.startsWith("Nats-Expected"))).toEqual([]);
      expect(await h.queue.deadLetter(dl!.id)).toMatchObject({ id: dl!.id, originalSubject: box.subject });
      // Replay: back to the mailbox as a fresh message, gone from the DLQ.
      replayed = true;
      const before = rec.texts().filter((t) => t === "expecting").length;
      const again = await h.queue.replayDeadLetter(dl!.id);
      expect(again).not.toBeNull();
      await eventually("replayed", () => rec.texts().filter((t) => t === "expecting").length === before + 1);
      expect(rec.seen.filter((d) => text(d) === "expecting").at(-1)!.deliveryCount).toBe(1);
      expect(await h.queue.deadLetter(dl!.id)).toBeNull();
      expect(await h.queue.replayDeadLetter(dl!.id)).toBeNull();
      await att.detach();
      // Delete: a second poison, deleted by id.
      const box2 = mailbox(handle(), "inbox");
      track(await h.queue.attach(box2.subject, box2.group, async () => nak()));
      await h.queue.publish(box2.subject, enc("doomed"));
      const mine2 = async () => (await h.queue.deadLetters()).filter((d) => d.originalSubject === box2.subject);
      await eventually("dead-lettered", async () => (await mine2()).length === 1);
      const [dl2] = await mine2();
      expect(await h.queue.deleteDeadLetter(dl2!.id)).toBe(true);
      expect(await h.queue.deleteDeadLetter(dl2!.id)).toBe(false);
      expect(await mine2()).toEqual([]);
    });

    test("mail published before its mailbox exists is kept and delivered first, in order (limits retention)", async () => {
      const box = mailbox(handle(), "inbox");
      const res = await h.queue.publish(box.subject, enc("early"));
      expect(res.duplicate).toBe(false);
      await h.queue.ensureMailbox(box.subject, box.group);
      await h.queue.publish(box.subject, enc("kept"));
      const rec = recorder();
      track(await h.queue.attach(box.subject, box.group, rec.handler));
      await throughSentinel(box.subject, rec);
      expect(rec.texts().slice(0, 2)).toEqual(["early", "kept"]);
      expect(rec.texts()).toHaveLength(3);
    });

    test("a publish nothing captures is an error", async () => {
      await expect(h.queue.publish("crewlet-nowhere.x", enc("x"))).rejects.toThrow();
    });

    test("detach with a running handler returns without waiting; the handler's ack still lands", async () => {
      const box = mailbox(handle(), "inbox");
      const hold = gate<Outcome>();
      let finished = false;
      const rec = recorder(async () => {
        const o = await hold.p;
        finished = true;
        return o;
      });
      const att = track(await h.queue.attach(box.subject, box.group, rec.handler));
      await h.queue.publish(box.subject, enc("m1"));
      await eventually("running", () => att.inFlight === 1);
      await att.detach();
      expect(finished).toBe(false);
      expect(att.inFlight).toBe(1);
      hold.open(ack());
      await att.idle();
      expect(finished).toBe(true);
      const next = recorder();
      track(await h.queue.attach(box.subject, box.group, next.handler));
      await throughSentinel(box.subject, next);
      expect(next.texts()).toHaveLength(1); // m1 was acked by the detached handler
    });

    test("named holds survive resume() until released; a held attachment takes nothing", async () => {
      const box = mailbox(handle(), "inbox");
      const a = recorder();
      const att = track(await h.queue.attach(box.subject, box.group, a.handler, { holds: ["pause"] }));
      expect(att.quiesced).toBe(true);
      att.resume();
      att.hold("drain");
      att.resume();
      expect(att.quiesced).toBe(true);
      expect([...att.holds].sort()).toEqual(["drain", "pause"]);
      await h.queue.publish(box.subject, enc("m1"));
      // A peer attaching now gets m1 on its first delivery: the held attachment never took it.
      const b = recorder();
      const batt = track(await h.peer.attach(box.subject, box.group, b.handler));
      await eventually("peer has m1", () => b.seen.length === 1);
      expect(b.seen[0]!.deliveryCount).toBe(1);
      await batt.detach();
      att.releaseHold("pause");
      expect(att.quiesced).toBe(true);
      att.releaseHold("drain");
      expect(att.quiesced).toBe(false);
      await h.queue.publish(box.subject, enc("m2"));
      await eventually("released attachment consumes", () => a.seen.length === 1);
      expect(a.texts()).toEqual(["m2"]);
      // The peer's last pull outlives its detach and may catch m2 first: it hands it back
      // at once, unrun (one delivery), and never keeps it.
      expect(a.seen[0]!.deliveryCount).toBeLessThanOrEqual(2);
      expect(b.seen).toHaveLength(1);
    });

    test("a quiesced attachment runs nothing: what its last pull catches goes back at once; resume picks up", async () => {
      const box = mailbox(handle(), "inbox");
      const a = recorder();
      const att = track(await h.queue.attach(box.subject, box.group, a.handler));
      att.quiesce();
      await h.queue.publish(box.subject, enc("m1"));
      const b = recorder();
      const batt = track(await h.peer.attach(box.subject, box.group, b.handler));
      await eventually("peer has m1", () => b.seen.length === 1);
      // The pull made before the quiesce cannot be withdrawn and may catch m1: handed back
      // unrun at once (one delivery), not held for the ack wait.
      expect(b.seen[0]!.deliveryCount).toBeLessThanOrEqual(2);
      expect(a.seen).toHaveLength(0);
      await batt.detach();
      att.resume();
      await h.queue.publish(box.subject, enc("m2"));
      await eventually("resumed", () => a.seen.length === 1);
      expect(a.texts()).toEqual(["m2"]);
      expect(a.seen[0]!.deliveryCount).toBeLessThanOrEqual(2); // the peer's last pull may bounce it once
      expect(b.seen).toHaveLength(1);
    });

    test("a quiesced attachment's batch pull bounces a message at most once, and a resume runs it", async () => {
      const box = mailbox(handle(), "inbox");
      const a = recorder();
      const att = track(await h.queue.attach(box.subject, box.group, a.handler, { batch: 4 }));
      att.quiesce(); // its pull for 4 stays waiting, and it is the only one
      await h.queue.publish(box.subject, enc("m1"));
      // Long enough for a message that keeps bouncing to spend the pull's whole batch.
      await Bun.sleep(200);
      await h.elapse(0);
      expect(a.seen).toHaveLength(0);
      att.resume();
      await eventually("resumed attachment runs m1", () => a.seen.length === 1);
      await throughSentinel(box.subject, a);
      expect(a.texts().filter((t) => t === "m1")).toHaveLength(1);
      // Caught once while quiesced and handed back; back on the same pull it is kept unrun.
      expect(a.seen[0]!.deliveryCount).toBeLessThanOrEqual(2);
    });

    test("quiesce/resume racing publishes strands nothing: every message is run once, none while quiesced", async () => {
      // Two nodes' attachments on each of several mailboxes (in a cluster, some consumer
      // leaders sit on another member than either connection), flipped between quiesced and
      // running while mail arrives. A delivery dropped on its way to a withdrawn pull would
      // come back only after the ack wait, far past this test's waits.
      const BOXES = 4;
      const PER_BOX = 30;
      const FLIPS_PER_PUBLISH = 3;
      const boxes = Array.from({ length: BOXES }, () => mailbox(handle(), "inbox"));
      const handled = new Map<string, number>();
      let ranWhileQuiesced = 0;
      const atts: Attachment[] = [];
      for (const box of boxes) {
        for (const q of [h.queue, h.peer]) {
          let att: Attachment | null = null;
          const handler = async (d: Delivery): Promise<Outcome> => {
            if (!att || att.quiesced) ranWhileQuiesced += 1;
            handled.set(text(d), (handled.get(text(d)) ?? 0) + 1);
            return ack();
          };
          att = track(await q.attach(box.subject, box.group, handler));
          atts.push(att);
        }
      }
      const published: string[] = [];
      const sends: Promise<unknown>[] = [];
      for (let i = 0; i < PER_BOX; i++) {
        for (const [b, box] of boxes.entries()) {
          const body = `b${b}-m${i}`;
          published.push(body);
          sends.push((i % 2 === 0 ? h.queue : h.peer).publish(box.subject, enc(body)));
        }
        for (let f = 0; f < FLIPS_PER_PUBLISH; f++) {
          const att = atts[Math.floor(Math.random() * atts.length)]!;
          if (att.quiesced) att.resume();
          else att.quiesce();
          await Bun.sleep(Math.random() < 0.5 ? 0 : 1);
        }
      }
      await Promise.all(sends);
      for (const att of atts) att.resume();
      await eventually("every message handled", () => published.every((p) => handled.has(p)));
      for (const box of boxes) await throughSentinel(box.subject, { texts: () => [...handled.keys()] });
      expect(ranWhileQuiesced).toBe(0);
      expect(published.filter((p) => handled.get(p) !== 1)).toEqual([]);
      const dead = (await h.queue.deadLetters()).filter((d) => boxes.some((b) => b.subject === d.originalSubject));
      expect(dead).toEqual([]);
    });

    test("an unsettled delivery comes back after the ack wait with count + 1 (rung by nothing: by the safety pull)", async () => {
      const box = mailbox(handle(), "inbox");
      const never = recorder(() => new Promise<Outcome>(() => undefined)); // a dead node's turn
      const att = track(await h.lapsing.attach(box.subject, box.group, never.handler));
      await h.lapsing.publish(box.subject, enc("m1"));
      await eventually("taken", () => att.inFlight === 1);
      await att.detach();
      const next = recorder();
      track(await h.lapsing.attach(box.subject, box.group, next.handler));
      await h.elapse(h.ackWait_ms + h.lapsingPacing.safetyPull_ms);
      await eventually("redelivered after the ack wait", () => next.seen.length === 1);
      expect(next.seen[0]!.deliveryCount).toBe(2);
      expect(text(next.seen[0]!)).toBe("m1");
    });

    test("reset hands back at once what a dead holder never settled, as first deliveries; what it acked stays settled", async () => {
      const box = mailbox(handle(), "inbox");
      const { hung, dead } = await holderDiedDuringM2(box, ["m1", "m2", "m3"]); // killed during m2's turn
      expect(await h.queue.resetMailbox(box.subject, box.group)).toBe(true);
      const succ = recorder();
      track(await h.peer.attach(box.subject, box.group, succ.handler));
      // Without the reset m2 would wait out the production ack wait (30 min), far past EVENTUALLY_MS.
      await eventually("successor has m2 and m3", () => succ.seen.length >= 2);
      await throughSentinel(box.subject, succ);
      expect(succ.seen.slice(0, 2).map((d) => [text(d), d.deliveryCount])).toEqual([["m2", 1], ["m3", 1]]);
      expect(succ.texts()).toHaveLength(3);
      hung.open(ack()); // the dead holder's late ack: m2 is settled already, nothing changes
      await throughSentinel(box.subject, succ);
      expect(succ.texts()).toHaveLength(4);
      expect(dead.texts()).toEqual(["m1", "m2"]);
    });

    test("reset brings a message held back by a NAK's delay out now, to the attachment already waiting, its count renewed", async () => {
      const box = mailbox(handle(), "inbox");
      const rec = recorder((d, nth) => (nth === 1 ? nak(10 * 60_000) : ack())); // far past the test
      const att = track(await h.queue.attach(box.subject, box.group, rec.handler));
      await h.queue.publish(box.subject, enc("m1"));
      await eventually("the NAK is settled", () => rec.seen.length === 1 && att.inFlight === 0);
      expect(await h.queue.resetMailbox(box.subject, box.group)).toBe(true);
      await eventually("m1 again, before its delay", () => rec.seen.length === 2);
      await throughSentinel(box.subject, rec);
      expect(rec.seen.slice(0, 2).map((d) => [text(d), d.deliveryCount])).toEqual([["m1", 1], ["m1", 1]]);
      expect(rec.texts()).toHaveLength(3);
    });

    test("a reset with nothing unsettled changes nothing: new mail flows, nothing comes twice", async () => {
      const box = mailbox(handle(), "inbox");
      const rec = recorder();
      const att = track(await h.queue.attach(box.subject, box.group, rec.handler));
      await publishAll(box.subject, ["m1", "m2"]);
      await throughSentinel(box.subject, rec);
      await att.idle(); // every ack confirmed, so "nothing unsettled" is true at the reset
      expect(await h.queue.resetMailbox(box.subject, box.group)).toBe(true);
      await h.queue.publish(box.subject, enc("m3"));
      await throughSentinel(box.subject, rec);
      expect(rec.texts().filter((t) => !t.startsWith("sentinel-"))).toEqual(["m1", "m2", "m3"]);
      expect(rec.seen.every((d) => d.deliveryCount === 1)).toBe(true);
    });

    test("rewind delivers again everything stored for the subject from its start, as first deliveries", async () => {
      const box = mailbox(handle(), "inbox");
      const { hung } = await holderDiedDuringM2(box, ["m1", "m2"]);
      await h.queue.publish(box.subject, enc("m3"));
      expect(await h.queue.rewindMailbox(box.subject, box.group)).toBe(true);
      const succ = recorder();
      track(await h.peer.attach(box.subject, box.group, succ.handler));
      await eventually("successor has m2 and m3", () => succ.seen.length >= 2);
      await throughSentinel(box.subject, succ);
      expect(succ.seen.slice(0, 2).map((d) => [text(d), d.deliveryCount])).toEqual([["m2", 1], ["m3", 1]]);
      expect(succ.texts()).toHaveLength(3);
      hung.open(nak());
    });

    test("rewinding an empty mailbox delivers the next publish and nothing before it", async () => {
      const box = mailbox(handle(), "inbox");
      const rec = recorder();
      const att = track(await h.queue.attach(box.subject, box.group, rec.handler));
      await publishAll(box.subject, ["m1"]);
      await throughSentinel(box.subject, rec);
      await att.idle(); // the sentinel's ack confirmed: a rewind before it would rightly send it again
      expect(await h.queue.rewindMailbox(box.subject, box.group)).toBe(true);
      await h.queue.publish(box.subject, enc("m2"));
      await throughSentinel(box.subject, rec);
      expect(rec.texts().filter((t) => !t.startsWith("sentinel-"))).toEqual(["m1", "m2"]);
      expect(rec.texts()).toHaveLength(4);
    });

    test("reset and rewind of a mailbox that does not exist are errors", async () => {
      const box = mailbox(handle(), "inbox");
      await expect(h.queue.resetMailbox(box.subject, box.group)).rejects.toThrow(/no such mailbox/);
      await expect(h.queue.rewindMailbox(box.subject, box.group)).rejects.toThrow(/no such mailbox/);
    });

    test("a batch is pulled only when it can be run; a defer hands back what it left unrun", async () => {
      const box = mailbox(handle(), "inbox");
      await h.queue.ensureMailbox(box.subject, box.group);
      await publishAll(box.subject, ["m1", "m2", "m3", "m4", "m5", "m6"]);
      let maxInFlight = 0;
      let att: Attachment | null = null;
      const a = recorder((d) => {
        maxInFlight = Math.max(maxInFlight, att?.inFlight ?? 0);
        return text(d) === "m2" ? defer("handoff") : ack();
      });
      att = track(await h.queue.attach(box.subject, box.group, a.handler, { batch: 4 }));
      await eventually("deferred", () => a.seen.length === 2 && att!.quiesced && att!.inFlight === 0);
      expect(maxInFlight).toBeLessThanOrEqual(1);
      const b = recorder();
      track(await h.queue.attach(box.subject, box.group, b.handler));
      await eventually("rest delivered", () => b.seen.length >= 5);
      const counts = Object.fromEntries(b.seen.map((d) => [text(d), d.deliveryCount]));
      // m2 was deferred, m3 and m4 were taken by the batch and handed back; m5, m6 never taken.
      expect(counts).toEqual({ m2: 2, m3: 2, m4: 2, m5: 1, m6: 1 });
      expect(a.texts()).toEqual(["m1", "m2"]);
    });

    test("a drain gets what was waiting, in order, in one call; a larger backlog comes as full drains", async () => {
      const box = mailbox(handle(), "inbox");
      await h.queue.ensureMailbox(box.subject, box.group);
      const backlog = Array.from({ length: 10 }, (_, i) => `m${i + 1}`);
      await publishAll(box.subject, backlog);
      const rec = drainRecorder();
      const att = track(await h.queue.attachBatch(box.subject, box.group, rec.handler, { batch: 4 }));
      await eventually("the backlog drained", () => rec.drains.flat().length >= 10);
      // Up to the batch, never a wait for it: the last drain runs with the two left.
      expect(rec.texts()).toEqual([backlog.slice(0, 4), backlog.slice(4, 8), backlog.slice(8)]);
      expect(rec.drains.flat().every((d) => d.deliveryCount === 1)).toBe(true);
      // What arrives later is a drain of its own, with whatever was there.
      await h.queue.publish(box.subject, enc("later"));
      await eventually("a later drain", () => rec.flat().includes("later"));
      expect(rec.texts().at(-1)).toEqual(["later"]);
      expect(att.quiesced).toBe(false);
      // All acked: a fresh attachment finds nothing but the sentinel.
      await att.detach();
      const after = recorder();
      track(await h.queue.attach(box.subject, box.group, after.handler));
      await throughSentinel(box.subject, after);
      expect(after.texts()).toHaveLength(1);
    });

    test("a drain's outcomes settle each delivery on its own; a nak comes back and consuming goes on", async () => {
      const box = mailbox(handle(), "inbox");
      await h.queue.ensureMailbox(box.subject, box.group);
      await publishAll(box.subject, ["m1", "m2", "m3"]);
      const rec = drainRecorder((ds) => ds.map((d) => (text(d) === "m2" && d.deliveryCount === 1 ? nak() : ack())));
      const att = track(await h.queue.attachBatch(box.subject, box.group, rec.handler, { batch: 8 }));
      await eventually("m2 back", () => rec.drains.length >= 2);
      expect(rec.texts()[0]).toEqual(["m1", "m2", "m3"]);
      expect(rec.drains[1]!.map((d) => [text(d), d.deliveryCount])).toEqual([["m2", 2]]);
      expect(att.quiesced).toBe(false);
      await throughSentinel(box.subject, { texts: rec.flat });
      expect(rec.flat().filter((t) => !t.startsWith("sentinel-"))).toEqual(["m1", "m2", "m3", "m2"]);
    });

    test("a defer in a drain quiesces it and hands back the rest; no pull is out afterwards", async () => {
      const box = mailbox(handle(), "inbox");
      await h.queue.ensureMailbox(box.subject, box.group);
      await publishAll(box.subject, ["m1", "m2", "m3", "m4", "m5"]);
      // m1 acked, m2 deferred, m3 nak'd, m4 and m5 left without an outcome (handed back).
      const rec = drainRecorder(() => [ack(), defer("seat moved"), nak()]);
      const att = track(await h.queue.attachBatch(box.subject, box.group, rec.handler, { batch: 8 }));
      await eventually("deferred", () => rec.drains.length === 1 && att.quiesced && att.inFlight === 0);
      expect(att.holds.size).toBe(0);
      // Quiesced by the defer with no pull out: mail published now reaches a peer untouched.
      await h.queue.publish(box.subject, enc("m6"));
      const b = recorder();
      track(await h.peer.attach(box.subject, box.group, b.handler));
      await eventually("peer has the rest", () => b.seen.length >= 5);
      await throughSentinel(box.subject, b);
      const counts = Object.fromEntries(b.seen.map((d) => [text(d), d.deliveryCount]));
      expect(counts).toMatchObject({ m2: 2, m3: 2, m4: 2, m5: 2, m6: 1 });
      expect(b.texts()).not.toContain("m1");
      expect(b.texts()).toHaveLength(6); // the five and the sentinel, each once
      expect(rec.drains).toHaveLength(1);
      expect(rec.texts()[0]).toEqual(["m1", "m2", "m3", "m4", "m5"]);
    });

    test("a defer in a drain, then resume on the same attachment: the deferred mail runs at once, in order", async () => {
      // A seat's inbox when a turn is refused for a renew not yet back: it defers, quiesces,
      // and the renew's return resumes it; what it handed back must come straight back here.
      const box = mailbox(handle(), "inbox");
      await h.queue.ensureMailbox(box.subject, box.group);
      let refusing = true;
      const ran: string[] = [];
      const rec = drainRecorder((ds) => ds.map((d) => (refusing ? defer("renew not back") : (ran.push(text(d)), ack()))));
      await publishAll(box.subject, ["m1", "m2"]);
      const att = track(await h.queue.attachBatch(box.subject, box.group, rec.handler, { batch: 8 }));
      await eventually("deferred", () => rec.drains.length >= 1 && att.quiesced && att.inFlight === 0);
      await h.queue.publish(box.subject, enc("m3"));
      refusing = false;
      att.resume();
      await eventually("the deferred mail and the new run here", () => ran.length >= 3);
      expect(ran).toEqual(["m1", "m2", "m3"]);
      expect(rec.drains[0]!.map(text)).toEqual(["m1", "m2"]);
    });

    test("a drain handler that throws NAKs the whole drain, and is logged", async () => {
      const box = mailbox(handle(), "inbox");
      await h.queue.ensureMailbox(box.subject, box.group);
      await publishAll(box.subject, ["m1", "m2"]);
      const rec = drainRecorder((ds, nth) => {
        if (nth === 1) throw new Error("drain boom");
        return ds.map(() => ack());
      });
      const att = track(await h.queue.attachBatch(box.subject, box.group, rec.handler, { batch: 8 }));
      await eventually("redelivered after the throw", () => rec.flat().length >= 4);
      expect(rec.texts()[0]).toEqual(["m1", "m2"]);
      // Both come back, in either order: nats-server 2.15.2 on 3 members can deliver m1's
      // redelivery behind m2's and behind the 408 ending that pull; then it is handed back
      // once more (delivery 3) rather than lost (pull-inboxes.ts).
      const reruns = rec.drains.slice(1).flat();
      expect(reruns.map(text).sort()).toEqual(["m1", "m2"]);
      for (const d of reruns) expect([2, 3]).toContain(d.deliveryCount);
      expect(att.quiesced).toBe(false);
      const failed = h.logs.events("queue_handler_failed").filter((l) => l.fields.subject === box.subject);
      expect(failed).toHaveLength(1);
      expect(failed[0]!.fields.deliveries).toBe(2);
    });

    test("nothing is pulled while a drain runs or while held; a drain is only pulled when it can run", async () => {
      const box = mailbox(handle(), "inbox");
      await h.queue.ensureMailbox(box.subject, box.group);
      const hold = gate<void>();
      const rec = drainRecorder(async (ds) => {
        await hold.p;
        return ds.map(() => ack());
      });
      const att = track(await h.queue.attachBatch(box.subject, box.group, rec.handler, { batch: 8 }));
      await h.queue.publish(box.subject, enc("m1"));
      await eventually("m1 running", () => rec.drains.length === 1 && att.inFlight === 1);
      // While it runs, no pull of its is out: a peer gets the new mail on its first delivery.
      await publishAll(box.subject, ["m2", "m3"]);
      const b = recorder();
      const batt = track(await h.peer.attach(box.subject, box.group, b.handler));
      await eventually("peer has m2, m3", () => b.seen.length === 2);
      expect(b.seen.map((d) => [text(d), d.deliveryCount])).toEqual([["m2", 1], ["m3", 1]]);
      att.hold("pause");
      hold.open();
      await att.idle();
      await batt.detach();
      // Held: it takes nothing. The peer's last pull may have bounced m4 once on its way out.
      await h.queue.publish(box.subject, enc("m4"));
      const c = recorder();
      const catt = track(await h.peer.attach(box.subject, box.group, c.handler));
      await eventually("second peer has m4", () => c.seen.length === 1);
      expect(text(c.seen[0]!)).toBe("m4");
      expect(c.seen[0]!.deliveryCount).toBeLessThanOrEqual(2);
      await catt.detach();
      expect(rec.drains).toHaveLength(1);
      // Released, it drains again; nothing of m1..m4 comes back (all settled).
      att.releaseHold("pause");
      await throughSentinel(box.subject, { texts: rec.flat });
      expect(rec.flat().filter((t) => !t.startsWith("sentinel-"))).toEqual(["m1"]);
    });

    test("in a drain, the 25th-delivery dead-letter rule applies to each delivery on its own", async () => {
      const box = mailbox(handle(), "inbox");
      await h.queue.ensureMailbox(box.subject, box.group);
      await publishAll(box.subject, ["poison", "fine"]);
      const rec = drainRecorder((ds) => ds.map((d) => (text(d) === "poison" ? nak() : ack())));
      const att = track(await h.queue.attachBatch(box.subject, box.group, rec.handler, { batch: 8 }));
      const mine = async () => (await h.queue.deadLetters()).filter((d) => d.originalSubject === box.subject);
      await eventually("dead-lettered", async () => (await mine()).length === 1);
      await throughSentinel(box.subject, { texts: rec.flat });
      await att.detach();
      const all = rec.drains.flat();
      expect(all.filter((d) => text(d) === "poison").map((d) => d.deliveryCount)).toEqual(Array.from({ length: MAX_DELIVERIES }, (_, i) => i + 1));
      expect(all.filter((d) => text(d) === "fine").map((d) => d.deliveryCount)).toEqual([1]);
      const [dl] = await mine();
      expect(new TextDecoder().decode(dl!.data)).toBe("poison");
      expect(dl!.deliveryCount).toBe(MAX_DELIVERIES);
    });

    test("publishing with a message id de-duplicates", async () => {
      const box = mailbox(handle(), "inbox");
      const rec = recorder();
      track(await h.queue.attach(box.subject, box.group, rec.handler));
      const first = await h.queue.publish(box.subject, enc("once"), { msgId: `wake-${box.group}` });
      const again = await h.queue.publish(box.subject, enc("once"), { msgId: `wake-${box.group}` });
      expect(first.duplicate).toBe(false);
      expect(again.duplicate).toBe(true);
      expect(again.seq).toBe(first.seq);
      await throughSentinel(box.subject, rec);
      expect(rec.texts().filter((t) => t === "once")).toHaveLength(1);
      expect(rec.seen[0]!.msgId).toBe(`wake-${box.group}`);
    });

    test("ensureMailbox is idempotent, and a mailbox a peer created first is the same mailbox", async () => {
      const box = mailbox(handle(), "control");
      await h.peer.ensureMailbox(box.subject, box.group);
      await h.queue.ensureMailbox(box.subject, box.group);
      await h.queue.ensureMailbox(box.subject, box.group);
      await h.peer.publish(box.subject, enc("c1"));
      const rec = recorder();
      track(await h.queue.attach(box.subject, box.group, rec.handler));
      await eventually("delivered", () => rec.seen.length === 1);
      expect(rec.texts()).toEqual(["c1"]);
    });

    test("listMailboxes returns what the grammar produces, parsed back to handle and kind", async () => {
      const a = handle();
      const b = handle();
      const tricky = `${b}-control`; // its inbox group agent-{b}-control reads like b's control group
      await ensureSeatMailboxes(h.queue, [a], systemClock, memoryLogger().log);
      // A control mailbox as an earlier build made it: the grammar still names it.
      await h.queue.ensureMailbox(mailboxSubject(a, "control"), mailboxGroup(a, "control"));
      await h.queue.ensureMailbox(mailboxSubject(tricky, "inbox"), mailboxGroup(tricky, "inbox"));
      await h.queue.ensureMailbox(mailboxSubject(a, "inbox"), `audit-${a}`); // somebody else's consumer
      const key = (r: { handle: string; kind: string }) => `${r.handle}/${r.kind}`;
      const mine = (await listedMailboxes(h.queue)).filter((r) => [a, b, tricky].includes(r.handle));
      expect(mine.map(key).sort()).toEqual([`${a}/control`, `${a}/inbox`, `${a}/reflect`, `${tricky}/inbox`].sort());
      await h.queue.deleteMailbox(mailboxSubject(a, "reflect"), mailboxGroup(a, "reflect"));
      await h.queue.deleteMailbox(mailboxSubject(a, "reflect"), mailboxGroup(a, "reflect")); // gone already: fine
      const after = (await listedMailboxes(h.queue)).filter((r) => r.handle === a);
      expect(after.map(key).sort()).toEqual([`${a}/control`, `${a}/inbox`]);
    });

    /** A handle b whose `${b}-control` is (or is not) in b's mail shard. */
    const collidingPair = (sameShard: boolean): [string, string] => {
      for (let i = 0; i < 10_000; i++) {
        const b = handle();
        if ((agentShard(b) === agentShard(`${b}-control`)) === sameShard) return [b, `${b}-control`];
      }
      throw new Error(`no handle pair ${sameShard ? "shares" : "splits"} a shard in 10,000 tries: the shard hash is broken`);
    };

    test("a group already used on another subject of its stream is refused, not silently shared", async () => {
      const [b, tricky] = collidingPair(true);
      await h.queue.ensureMailbox(mailboxSubject(tricky, "inbox"), mailboxGroup(tricky, "inbox"));
      // b's control group has the same name as tricky's inbox group: the grammar collides.
      await expect(h.queue.ensureMailbox(mailboxSubject(b, "control"), mailboxGroup(b, "control"))).rejects.toThrow();
    });

    test("the same group name in two mail shards is two mailboxes, each with only its own mail", async () => {
      const [b, tricky] = collidingPair(false);
      const boxes = [mailbox(tricky, "inbox"), mailbox(b, "control")];
      expect(boxes[0]!.group).toBe(boxes[1]!.group);
      const recs = boxes.map(() => recorder(() => ack()));
      for (const [i, box] of boxes.entries()) track(await h.queue.attach(box.subject, box.group, recs[i]!.handler));
      for (const box of boxes) await h.queue.publish(box.subject, enc(box.subject));
      for (const [i, box] of boxes.entries()) {
        await eventually(`${box.subject} delivered`, () => recs[i]!.texts().length === 1);
        expect(recs[i]!.texts()).toEqual([box.subject]);
      }
    });

    test("deleting a mailbox deletes its mail; a new one starts empty", async () => {
      const box = mailbox(handle(), "reflect");
      await h.queue.ensureMailbox(box.subject, box.group);
      await h.queue.publish(box.subject, enc("old"));
      await h.queue.deleteMailbox(box.subject, box.group);
      await h.queue.ensureMailbox(box.subject, box.group);
      const rec = recorder();
      track(await h.queue.attach(box.subject, box.group, rec.handler));
      await throughSentinel(box.subject, rec);
      expect(rec.texts()).toHaveLength(1);
      expect(rec.texts()[0]).toStartWith("sentinel-");
    });

    test("the boot walk ensures every seat's inbox and reflect mailboxes and logs seat_mailbox_created once", async () => {
      const handles = [handle(), handle(), handle(), handle(), handle()];
      const { log, sink } = memoryLogger();
      const res = await ensureSeatMailboxes(h.queue, [...handles, handles[0]!], systemClock, log, 4);
      expect(res.count).toBe(10);
      const lines = sink.events("seat_mailbox_created");
      expect(lines).toHaveLength(1);
      expect(lines[0]!.fields.count).toBe(10);
      expect(typeof lines[0]!.fields.elapsed_ms).toBe("number");
      const listed = (await listedMailboxes(h.queue)).filter((r) => handles.includes(r.handle));
      expect(listed.map((r) => r.kind).sort()).toEqual([...Array(5).fill("inbox"), ...Array(5).fill("reflect")]);
    });

    test("a second walk creates only what the broker lacks: one listing spares the rest", async () => {
      const handles = [handle(), handle(), handle()];
      await ensureSeatMailboxes(h.queue, handles, systemClock, memoryLogger().log, 4);
      await h.queue.deleteMailbox(mailboxSubject(handles[1]!, "reflect"), mailboxGroup(handles[1]!, "reflect"));
      const extra = handle();
      const { log, sink } = memoryLogger();
      const res = await ensureSeatMailboxes(h.queue, [...handles, extra], systemClock, log, 4);
      expect(res.count).toBe(8);
      const line = sink.events("seat_mailbox_created")[0]!.fields;
      // The deleted reflect box and the new seat's two; the rest were listed as present.
      expect(line.created).toBe(3);
      expect(line.present).toBe(5);
      const listed = (await listedMailboxes(h.queue)).filter((r) => [...handles, extra].includes(r.handle));
      expect(listed).toHaveLength(8);
    });

    test("scatter collects answers from up to N responders; silence and the budget end it", async () => {
      const subject = `crewlet.test.scatter.${handle()}`;
      const s1 = await h.queue.serve(subject, async (r) => enc(`a:${new TextDecoder().decode(r.data)}`));
      const s2 = await h.peer.serve(subject, async () => enc("b"));
      const s3 = await h.peer.serve(subject, async () => null); // silent
      // A serve is known to its own broker member when it returns; on a cluster the other
      // members learn of it over the routes a moment later (under load, later than this
      // test's next line), and a scatter is one publish. So first wait until a short
      // scatter reaches both, then hold the contract to a long budget.
      await eventually("both responders reachable from the scatterer", async () => {
        const probe = h.queue.scatter(subject, enc("probe"), { responders: 2, budget_ms: 200 });
        await h.elapse(250);
        return (await probe).length === 2;
      });
      const both = await h.queue.scatter(subject, enc("q"), { responders: 2, budget_ms: 60_000 });
      expect(both.map((a) => new TextDecoder().decode(a.data)).sort()).toEqual(["a:q", "b"]);
      const pending = h.queue.scatter(subject, enc("q"), { responders: 3, budget_ms: 500 });
      await h.elapse(600);
      const partial = await pending;
      expect(partial).toHaveLength(2);
      s1.stop();
      s2.stop();
      s3.stop();
      expect(await h.queue.scatter(`crewlet.test.nobody.${handle()}`, enc("q"), { responders: 1, budget_ms: 60_000 })).toEqual([]);
    });

    test("serve with a queue group: one member of the group answers each request", async () => {
      const subject = `crewlet.test.group.${handle()}`;
      const s1 = await h.queue.serve(subject, async () => enc("x"), "readers");
      const s2 = await h.peer.serve(subject, async () => enc("y"), "readers");
      const pending = h.queue.scatter(subject, enc("q"), { responders: 2, budget_ms: 500 });
      await h.elapse(600);
      expect(await pending).toHaveLength(1);
      s1.stop();
      s2.stop();
    });
  });
}

