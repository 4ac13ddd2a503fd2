// The two NAKs of a hand-back "at once" (JetStreamSource.rawMessage: `-NAK {"delay":0}` for a
// hand-back that survives a leader change, a bare `-NAK` for first in line), on a real
// nats-server. Neither names a delivery: 2.15.2's processNak checks only that the stream
// sequence is still pending. The first case is the reproduction of a double run seen once in
// CI: the bare NAK sent some time after the delay-0 one meets the redelivery the delay-0 one's
// pending timer (10 ms) made to a waiting pull, and hands back that NEW delivery while it is
// out, so the message is delivered a third time. The second case is what the queue does
// instead: both written back to back, then the same waiting pulls and the same quiet time:
// one redelivery only.
import { afterAll, expect, test } from "bun:test";
import { createInbox, type Msg, type NatsConnection } from "nats";
import { systemClock } from "../../src/clock.ts";
import { silentLogger } from "../../src/log.ts";
import { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { durableName, mailbox, streamForSubject } from "../../src/queue/topics.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { whileForming } from "../support/forming.ts";

/** Far longer than the server's 10 ms pending timer after a delayed NAK, on a loaded box. */
const TIMER_FIRES_WITHIN_MS = 300;
const NS_PER_MS = 1_000_000;

const clusters: TestNats[] = [];
const conns: NatsConnection[] = [];
afterAll(async () => {
  for (const nc of conns) await nc.close().catch(() => {});
  for (const n of clusters) await n.stop();
});

/** Waiting pulls (batch 1 each) on one consumer, every delivery they bring kept unsettled. */
function puller(nc: NatsConnection, stream: string, durable: string) {
  const inbox = createInbox();
  const got: Msg[] = [];
  nc.subscribe(inbox, { callback: (_err, m) => m.data.length > 0 && got.push(m) });
  return {
    got,
    pull: () => nc.publish(`$JS.API.CONSUMER.MSG.NEXT.${stream}.${durable}`, JSON.stringify({ batch: 1, expires: 10_000 * NS_PER_MS }), { reply: inbox }),
  };
}

async function firstDelivery(size: number, name: string) {
  const nats = await startNats(size);
  clusters.push(nats);
  const nc = await nats.connect({ name });
  conns.push(nc);
  const q = new JetStreamQueue({ nc, replicas: size, clock: systemClock, log: silentLogger });
  await whileForming(() => q.ensureStreams());
  const box = mailbox(`handback-${name}`, "inbox");
  await q.ensureMailbox(box.subject, box.group);
  const p = puller(nc, streamForSubject(box.subject)!, durableName(box.group));
  await q.publish(box.subject, new TextEncoder().encode("m1"));
  p.pull();
  const deadline = Date.now() + 10_000;
  while (p.got.length === 0 && Date.now() < deadline) await Bun.sleep(10);
  expect(p.got).toHaveLength(1);
  p.pull(); // a second pull waits at the leader, as another attachment's would
  await nc.flush();
  return { nc, p, reply: p.got[0]!.reply! };
}

test.each([1, 3])("%d member(s): a bare NAK sent after the delay-0 one's timer redelivered hands back the new delivery (the double run)", async (size) => {
  const { nc, p, reply } = await firstDelivery(size, `apart-${size}`);
  await nc.request(reply, `-NAK ${JSON.stringify({ delay: 0 })}`, { timeout: 5_000 });
  await Bun.sleep(TIMER_FIRES_WITHIN_MS);
  expect(p.got).toHaveLength(2); // the timer's redelivery, to the waiting pull
  nc.publish(reply, "-NAK");
  p.pull();
  await nc.flush();
  await Bun.sleep(TIMER_FIRES_WITHIN_MS);
  expect(p.got).toHaveLength(3); // delivered again while the second delivery is still out
}, 60_000);

test.each([1, 3])("%d member(s): the delay-0 NAK with the bare one right behind it redelivers once", async (size) => {
  const { nc, p, reply } = await firstDelivery(size, `together-${size}`);
  const durable = nc.request(reply, `-NAK ${JSON.stringify({ delay: 0 })}`, { timeout: 5_000 });
  nc.publish(reply, "-NAK");
  await durable;
  await Bun.sleep(TIMER_FIRES_WITHIN_MS);
  expect(p.got).toHaveLength(2);
  p.pull(); // nothing is left to deliver: the timer found the redelivery restamped
  await nc.flush();
  await Bun.sleep(TIMER_FIRES_WITHIN_MS);
  expect(p.got).toHaveLength(2);
  expect(p.got.map((m) => new TextDecoder().decode(m.data))).toEqual(["m1", "m1"]);
}, 60_000);
