// What one mailbox's message costs the broker as the mailboxes on its stream grow. The agent
// stream (CREWLET_AGENT) keeps one durable consumer per seat mailbox (two per seat) and uses
// interest retention, and nats-server 2.15.2 answers every ack on an interest stream by
// asking each consumer of the stream whether it still needs the message
// (stream.checkForInterestWithSubject, under the stream's lock) — a cost that grows with the
// consumers, paid by every message, probe and reflection notice. A limits stream skips it.
//   bun bench/interest-acks.ts [--consumers 100,2000,10000,20000] [--messages 2000]
// Per row: a fresh single server, N filtered durable pull consumers on one stream, then
// `--messages` rounds of publish → pull one → ack (confirmed) spread over 64 of them, in
// sequence. Prints round-trip p50/p99 and rounds a second, for interest and for limits.
// Wall times use Date.now(): this measures the server, not product scheduling.
import { AckPolicy, DeliverPolicy, RetentionPolicy, StorageType, type NatsConnection } from "nats";
import { z } from "zod";
import { benchArgs, numberListFlag, wholeFlag } from "./args.ts";
import { eachInFlight } from "../src/in-flight.ts";
import { startNats } from "../test/support/nats.ts";

const args = benchArgs(
  "interest-acks",
  "[--consumers 100,2000,10000,20000] [--messages 2000]",
  z.object({
    consumers: numberListFlag("100,2000,10000,20000", z.number().int().min(64).max(40_000)),
    messages: wholeFlag(100, 100_000).default(2_000),
  }),
);

/** Consumer creates kept in flight: the product's boot walk runs 32–64. */
const CREATE_IN_FLIGHT = 64;
/** Mailboxes the rounds go to (each message to the next, round robin). */
const ACTIVE = 64;

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
}

async function row(consumers: number, messages: number, retention: RetentionPolicy): Promise<string> {
  const nats = await startNats(1);
  let nc: NatsConnection | null = null;
  try {
    nc = await nats.connect();
    const jsm = await nc.jetstreamManager();
    const js = nc.jetstream();
    await jsm.streams.add({ name: "BENCH", subjects: ["bench.>"], retention, storage: StorageType.File, num_replicas: 1 });
    const names = Array.from({ length: consumers }, (_, i) => `m${i}`);
    const t0 = Date.now();
    let made = 0;
    await eachInFlight(names, CREATE_IN_FLIGHT, async (n) => {
      await jsm.consumers.add("BENCH", { durable_name: n, filter_subject: `bench.${n}.inbox`, ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All });
      if (++made % 5_000 === 0) console.error(`  … ${made}/${consumers} consumers (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
    });
    const handles = await Promise.all(names.slice(0, ACTIVE).map((n) => js.consumers.get("BENCH", n)));
    const rtt: number[] = [];
    const started = Date.now();
    for (let i = 0; i < messages; i++) {
      const k = i % ACTIVE;
      const at = performance.now();
      await js.publish(`bench.m${k}.inbox`, "x");
      const m = await handles[k]!.next({ expires: 5_000 });
      if (!m) throw new Error(`round ${i}: nothing delivered to m${k}`);
      await m.ackAck();
      rtt.push(performance.now() - at);
    }
    const secs = (Date.now() - started) / 1000;
    const kind = retention === RetentionPolicy.Interest ? "interest" : "limits";
    return `${kind.padEnd(8)} ${String(consumers).padStart(6)} consumers: publish → pull → ack p50 ${pct(rtt, 50).toFixed(2)} ms, p99 ${pct(rtt, 99).toFixed(2)} ms, ${(messages / secs).toFixed(0)} rounds/s`;
  } finally {
    await nc?.close();
    await nats.stop();
  }
}

console.log(`interest-acks: ${args.messages} rounds a row, ${ACTIVE} mailboxes active, one member`);
for (const n of args.consumers) {
  for (const r of [RetentionPolicy.Interest, RetentionPolicy.Limits]) console.log(await row(n, args.messages, r));
}
