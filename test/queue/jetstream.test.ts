// The queue conformance suite on real nats-servers: one member (R1), and a 3-member
// cluster (R3) where consumer creation is a raft campaign and the consumer leader may be
// on another member than the client's connection.
import { systemClock } from "../../src/clock.ts";
import { memoryLogger, silentLogger } from "../../src/log.ts";
import { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { startNats } from "../support/nats.ts";
import { queueConformance } from "../conformance/queue.ts";

/**
 * The ack wait is a consumer setting on the broker, and the suite proves the redelivery
 * that follows it; 30 minutes would be a 30-minute test. Long enough that no healthy
 * handler in the suite comes near it on a loaded CI box.
 */
const TEST_ACK_WAIT_MS = 3_000;

for (const members of [1, 3]) {
  queueConformance(`jetstream (${members === 1 ? "single member, R1" : "3-member cluster, R3"})`, async () => {
    const nats = await startNats(members);
    const nc = await nats.connect({ name: "queue-under-test" });
    const peerNc = await nats.connect({ name: "queue-peer" });
    const { log, sink } = memoryLogger();
    const replicas = members;
    const queue = new JetStreamQueue({ nc, replicas, clock: systemClock, log, ackWait_ms: TEST_ACK_WAIT_MS });
    const peer = new JetStreamQueue({ nc: peerNc, replicas, clock: systemClock, log: silentLogger, ackWait_ms: TEST_ACK_WAIT_MS });
    await queue.ensureStreams();
    await peer.ensureStreams(); // a second node's boot: idempotent
    return {
      queue,
      peer,
      logs: sink,
      ackWait_ms: TEST_ACK_WAIT_MS,
      elapse: (ms) => Bun.sleep(ms),
      async teardown() {
        await queue.close();
        await peer.close();
        await nc.close();
        await peerNc.close();
        await nats.stop();
      },
    };
  });
}
