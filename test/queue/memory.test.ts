// The queue conformance suite on the in-memory twin, on a FakeClock: the 30-minute ack wait
// is the real one, passed by advancing the clock.
import { FakeClock } from "../../src/clock.ts";
import { memoryLogger } from "../../src/log.ts";
import { ACK_WAIT_MS } from "../../src/queue/contract.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { PRODUCTION_PACING } from "../../src/queue/attachment.ts";
import { queueConformance } from "../conformance/queue.ts";

queueConformance("memory (FakeClock)", async () => {
  const clock = new FakeClock();
  const { log, sink } = memoryLogger("debug", clock);
  // One in-process broker: a peer node is a second handle on the same instance.
  const queue = new MemoryQueue({ clock, log });
  await queue.ensureStreams();
  return {
    queue,
    peer: queue,
    logs: sink,
    lapsing: queue,
    ackWait_ms: ACK_WAIT_MS,
    lapsingPacing: PRODUCTION_PACING,
    elapse: (ms) => clock.advance(ms),
    teardown: () => queue.close(),
  };
});
