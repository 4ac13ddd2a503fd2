// The queue conformance suite on real nats-servers: one member (R1), and a 3-member
// cluster (R3) where consumer creation is a raft campaign and the consumer leader may be
// on another member than the client's connection.
import { describe, expect, test } from "bun:test";
import { systemClock } from "../../src/clock.ts";
import { memoryLogger, silentLogger } from "../../src/log.ts";
import { JetStreamQueue, mailboxSettingsDiffer } from "../../src/queue/jetstream.ts";
import { mailbox, mailboxStream, NOTIFICATIONS_SUBJECT } from "../../src/queue/topics.ts";
import { startNats } from "../support/nats.ts";
import { queueConformance } from "../conformance/queue.ts";
import { whileForming } from "../support/forming.ts";

/**
 * The ack wait is a consumer setting on the broker, and one test proves the redelivery that
 * follows it; 30 minutes would be a 30-minute test. Only the harness's `lapsing` queue uses
 * it (its own mailboxes); the queue and peer keep the production ack wait, so a delivery
 * stranded on the broker fails the test instead of coming back 3 s later. Long enough that
 * no healthy handler in that test comes near it on a loaded CI box.
 */
const TEST_ACK_WAIT_MS = 3_000;
/** The lapsing queue's idle attachments: a safety pull of 15 s (3 × PULL_EXPIRES_MS, as the
 *  suite needs) and a first nap after 2 s, where production's are 45 s and 15 s. */
const TEST_PACING = { safetyPull_ms: 15_000, napAfterStart_ms: 2_000 };

for (const members of [1, 3]) {
  queueConformance(`jetstream (${members === 1 ? "single member, R1" : "3-member cluster, R3"})`, async () => {
    const nats = await startNats(members);
    const nc = await nats.connect({ name: "queue-under-test" });
    const peerNc = await nats.connect({ name: "queue-peer" });
    const { log, sink } = memoryLogger();
    const replicas = members;
    const queue = new JetStreamQueue({ nc, replicas, clock: systemClock, log });
    const peer = new JetStreamQueue({ nc: peerNc, replicas, clock: systemClock, log: silentLogger });
    const lapsing = new JetStreamQueue({ nc, replicas, clock: systemClock, log: silentLogger, ackWait_ms: TEST_ACK_WAIT_MS, pacing: TEST_PACING });
    await whileForming(() => queue.ensureStreams());
    await whileForming(() => peer.ensureStreams()); // a second node's boot: idempotent
    return {
      queue,
      peer,
      logs: sink,
      lapsing,
      ackWait_ms: TEST_ACK_WAIT_MS,
      lapsingPacing: TEST_PACING,
      elapse: (ms) => Bun.sleep(ms),
      async teardown() {
        await queue.close();
        await peer.close();
        await lapsing.close();
        await nc.close();
        await peerNc.close();
        await nats.stop();
      },
    };
  });
}

describe("listMailboxes on a cluster", () => {
  /** Over one LIST page (256): nats-server 2.9 stopped at the first page in a cluster. */
  const MAILBOXES = 300;
  test(`lists all ${MAILBOXES} mailboxes, past the API's first page`, async () => {
    const nats = await startNats(3);
    const nc = await nats.connect({ name: "list" });
    try {
      const queue = new JetStreamQueue({ nc, replicas: 3, clock: systemClock, log: silentLogger });
      await whileForming(() => queue.ensureStreams());
      const boxes = Array.from({ length: MAILBOXES }, (_, i) => mailbox(`list-${i}`, i % 3 === 0 ? "inbox" : i % 3 === 1 ? "control" : "reflect"));
      for (let i = 0; i < boxes.length; i += 25) await Promise.all(boxes.slice(i, i + 25).map((b) => queue.ensureMailbox(b.subject, b.group)));
      const listed = await queue.listMailboxes();
      expect(listed.filter((r) => r.handle.startsWith("list-")).length).toBe(MAILBOXES);
      expect(listed).toContainEqual({ handle: "list-299", kind: "reflect" });
      await queue.close();
    } finally {
      await nc.close();
      await nats.stop();
    }
  }, 120_000);
});

describe("ensureMailbox on a cluster", () => {
  /** Ensures of one mailbox that already exists: what members walking together send. */
  const ENSURES = 10;
  test("a mailbox a peer already made is read, not proposed to the meta group again", async () => {
    const nats = await startNats(3);
    const nc = await nats.connect({ name: "maker" });
    const peerNc = await nats.connect({ name: "peer", servers: nats.members[1]!.url });
    try {
      const queue = new JetStreamQueue({ nc, replicas: 3, clock: systemClock, log: silentLogger });
      const peer = new JetStreamQueue({ nc: peerNc, replicas: 3, clock: systemClock, log: silentLogger });
      await whileForming(() => queue.ensureStreams());
      const box = mailbox("walked-twice", "inbox");
      await whileForming(() => queue.ensureMailbox(box.subject, box.group));
      /** The meta group's committed index, the highest any member reports: one per proposal. */
      const metaCommitted = async () => {
        const seen = await Promise.all(
          nats.members.map(async (m) => {
            const z = (await (await fetch(`http://127.0.0.1:${m.monitor}/raftz`)).json()) as { $SYS?: { _meta_?: { committed?: number } } };
            return z.$SYS?._meta_?.committed ?? 0;
          }),
        );
        return Math.max(...seen);
      };
      await Bun.sleep(500);
      const before = await metaCommitted();
      for (let i = 0; i < ENSURES; i++) await peer.ensureMailbox(box.subject, box.group);
      await Bun.sleep(500);
      // Other meta traffic (a group's leader report) may land in the window; a proposal per
      // ensure would be ENSURES.
      expect((await metaCommitted()) - before).toBeLessThan(ENSURES / 2);
      await queue.close();
      await peer.close();
    } finally {
      await nc.close();
      await peerNc.close();
      await nats.stop();
    }
  }, 120_000);
});

describe("mailbox settings a cluster finds", () => {
  test("a mailbox this build made differs in nothing; one made with another ack wait and three replicas is named, not remade", async () => {
    const nats = await startNats(3);
    const nc = await nats.connect({ name: "maker" });
    try {
      const { log, sink } = memoryLogger();
      const queue = new JetStreamQueue({ nc, replicas: 3, clock: systemClock, log });
      await whileForming(() => queue.ensureStreams());
      const ours = mailbox("made-here", "inbox");
      await whileForming(() => queue.ensureMailbox(ours.subject, ours.group));
      await queue.ensureMailbox(ours.subject, ours.group); // read, found, compared
      expect(sink.events("queue_mailbox_settings_differ")).toEqual([]);

      const older = mailbox("made-before", "inbox");
      const olderConfig = queue.consumerConfig(older.subject, older.group);
      const jsm = await nc.jetstreamManager();
      await whileForming(() => jsm.consumers.add(mailboxStream("made-before"), { ...olderConfig, ack_wait: 30_000_000_000, num_replicas: 3 }));
      await queue.ensureMailbox(older.subject, older.group);
      const [warned] = sink.events("queue_mailbox_settings_differ");
      expect(warned?.fields).toMatchObject({ group: older.group, settings: ["ack_wait", "num_replicas"] });
      const kept = await jsm.consumers.info(mailboxStream("made-before"), olderConfig.durable_name!);
      expect(kept.config.ack_wait).toBe(30_000_000_000);
      await queue.close();
    } finally {
      await nc.close();
      await nats.stop();
    }
  }, 120_000);

  test.each([
    [{ ack_wait: 1, mem_storage: true }, { ack_wait: 1, mem_storage: true }, []],
    [{ ack_wait: 1, mem_storage: false }, { ack_wait: 1 }, []],
    [{ max_batch: 0 }, {}, []],
    [{ ack_wait: 1, max_deliver: 5 }, { ack_wait: 2, max_deliver: 5 }, ["ack_wait"]],
    [{ mem_storage: true, num_replicas: 3 }, { num_replicas: 1 }, ["num_replicas", "mem_storage"]],
  ] as const)("mailboxSettingsDiffer(%o, %o) = %o", (want, found, differ) => {
    expect(mailboxSettingsDiffer(want as never, found as never)).toEqual([...differ]);
  });
});

describe("a leaf's mailboxes", () => {
  test("a leaf makes a missing seat mailbox itself (its settings do not depend on replicas) and waits for the members' other consumers", async () => {
    const nats = await startNats(1);
    const nc = await nats.connect({ name: "leaf-maker" });
    try {
      const member = new JetStreamQueue({ nc, replicas: 1, clock: systemClock, log: silentLogger });
      await member.ensureStreams();
      const leaf = new JetStreamQueue({ nc, replicas: 1, clock: systemClock, log: silentLogger, decidesStreams: false });
      const control = mailbox("leafy", "control");
      await leaf.ensureMailbox(control.subject, control.group);
      const jsm = await nc.jetstreamManager();
      const made = await jsm.consumers.info(mailboxStream("leafy"), "agent-leafy-control");
      expect(made.config.filter_subject).toBe(control.subject);
      expect(made.config.num_replicas ?? 1).toBe(member.consumerConfig(control.subject, control.group).num_replicas!);
      await expect(leaf.ensureMailbox(NOTIFICATIONS_SUBJECT, "leaf-own-group")).rejects.toThrow(/not there yet/);
      await member.close();
      await leaf.close();
    } finally {
      await nc.close();
      await nats.stop();
    }
  }, 60_000);
});
