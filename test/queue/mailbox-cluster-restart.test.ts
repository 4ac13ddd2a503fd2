// On a cluster a mailbox's consumer keeps its state in memory, replicated on its three
// members (see JetStreamQueue.consumerConfig: mem_storage), so a kill -9 of every member at
// once loses that state while the mail itself is in the file-stored stream; a standalone
// server keeps it on file. Held, on real nats-server processes, R1 and R3: after every
// member is killed and restarted, the broker still has the mailbox (nothing re-creates it), what
// was acknowledged before the kill is never delivered again (interest retention removed it
// from the stream), and everything that was not is delivered, in order.
import { afterAll, expect, test } from "bun:test";
import type { NatsConnection } from "nats";
import { systemClock } from "../../src/clock.ts";
import { silentLogger } from "../../src/log.ts";
import { ack, type Delivery, type Outcome } from "../../src/queue/contract.ts";
import { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { mailbox } from "../../src/queue/topics.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { whileForming } from "../support/forming.ts";

/** Generous: three members electing every group again on a loaded 2-core box. */
const WITHIN_MS = 90_000;

const clusters: TestNats[] = [];
const conns: NatsConnection[] = [];
afterAll(async () => {
  for (const nc of conns) await nc.close().catch(() => {});
  for (const n of clusters) await n.stop();
});

async function until(what: string, probe: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + WITHIN_MS;
  while (Date.now() < deadline) {
    try {
      if (await probe()) return;
    } catch {
      // the cluster is still electing
    }
    await Bun.sleep(200);
  }
  throw new Error(`${what}: not within ${WITHIN_MS} ms`);
}

test.each([1, 3])("%d member(s): every member killed -9 and restarted: acked mail never comes back, unacked mail all does, in order", async (size) => {
  const nats = await startNats(size);
  clusters.push(nats);
  const box = mailbox("restart-seat", "inbox");
  const text = (d: Delivery) => new TextDecoder().decode(d.data);

  const nc1 = await nats.connect({ name: "before" });
  conns.push(nc1);
  const q1 = new JetStreamQueue({ nc: nc1, replicas: size, clock: systemClock, log: silentLogger });
  await whileForming(() => q1.ensureStreams());
  await q1.ensureMailbox(box.subject, box.group);
  for (let i = 0; i < 10; i++) await q1.publish(box.subject, new TextEncoder().encode(`m${i}`), { msgId: `restart-${i}` });
  // The first four acked (each ack confirmed by the consumer's leader before the next).
  const acked: string[] = [];
  const first = await q1.attach(box.subject, box.group, async (d): Promise<Outcome> => {
    if (acked.length >= 4) return { kind: "defer", reason: "holding the rest" };
    acked.push(text(d));
    return ack();
  });
  await until("four acked", () => acked.length === 4);
  await first.detach();
  await nc1.close();

  for (const m of nats.members) await m.kill();
  await Promise.all(nats.members.map((m) => m.restart()));

  const nc2 = await nats.connect({ name: "after" });
  conns.push(nc2);
  const q2 = new JetStreamQueue({ nc: nc2, replicas: size, clock: systemClock, log: silentLogger });
  const got: string[] = [];
  // Kept by the broker itself: nothing here creates it again.
  await until("the mailbox is listed again", async () => (await q2.listMailboxes()).some((m) => m.handle === "restart-seat" && m.kind === "inbox"));
  const second = await q2.attach(box.subject, box.group, async (d) => {
    got.push(text(d));
    return ack();
  });
  await until("the six unacked delivered", () => got.length >= 6);
  // A quiet moment for anything delivered twice or out of the stream's past.
  await Bun.sleep(2_000);
  await second.detach();
  expect(acked).toEqual(["m0", "m1", "m2", "m3"]);
  expect(got).toEqual(["m4", "m5", "m6", "m7", "m8", "m9"]);
}, 240_000);
