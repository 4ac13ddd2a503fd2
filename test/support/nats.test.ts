import { afterAll, expect, test } from "bun:test";
import { startNats, type TestNats } from "./nats.ts";

const started: TestNats[] = [];
afterAll(async () => {
  for (const s of started) await s.stop();
});

test("a 3-member test cluster serves R3 JetStream", async () => {
  const nats = await startNats(3);
  started.push(nats);
  const nc = await nats.connect();
  const jsm = await nc.jetstreamManager();
  const info = await jsm.streams.add({ name: "T", subjects: ["t.>"], num_replicas: 3 });
  expect(info.config.num_replicas).toBe(3);
  const js = nc.jetstream();
  const ack = await js.publish("t.x", new TextEncoder().encode("hi"));
  expect(ack.seq).toBe(1);
  await nc.close();
});
