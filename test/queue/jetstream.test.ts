// The queue conformance suite on real nats-servers: one member (R1), and a 3-member
// cluster (R3) where consumer creation is a raft campaign and the consumer leader may be
// on another member than the client's connection.
import { systemClock } from "../../src/clock.ts";
import { memoryLogger, silentLogger } from "../../src/log.ts";
import { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { startNats } from "../support/nats.ts";
import { queueConformance } from "../conformance/queue.ts";

/**
 * The ack wait is a consumer setting on the broker, and one test proves the redelivery that
 * follows it; 30 minutes would be a 30-minute test. Only the harness's `lapsing` queue uses
 * it (its own mailboxes); the queue and peer keep the production ack wait, so a delivery
 * stranded on the broker fails the test instead of coming back 3 s later. Long enough that
 * no healthy handler in that test comes near it on a loaded CI box.
 */
const TEST_ACK_WAIT_MS = 3_000;

for (const members of [1, 3]) {
  queueConformance(`jetstream (${members === 1 ? "single member, R1" : "3-member cluster, R3"})`, async () => {
    const nats = await startNats(members);
    const nc = await nats.connect({ name: "queue-under-test" });
    const peerNc = await nats.connect({ name: "queue-peer" });
    const { log, sink } = memoryLogger();
    const replicas = members;
    const queue = new JetStreamQueue({ nc, replicas, clock: systemClock, log });
    const peer = new JetStreamQueue({ nc: peerNc, replicas, clock: systemClock, log: silentLogger });
    const lapsing = new JetStreamQueue({ nc, replicas, clock: systemClock, log: silentLogger, ackWait_ms: TEST_ACK_WAIT_MS });
    await queue.ensureStreams();
    await peer.ensureStreams(); // a second node's boot: idempotent
    return {
      queue,
      peer,
      logs: sink,
      lapsing,
      ackWait_ms: TEST_ACK_WAIT_MS,
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
