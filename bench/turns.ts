// bench/turns.ts — inbox publish → turn start latency (median, p99) and turns per second
// on one node with the scripted provider, over a real nats-server (JetStream queue backend)
// and a real estate.db. Prints figures; never fails on time.
//   bun bench/turns.ts [--samples 200] [--turns 400] [--mode drain|each]
// --samples: idle turns timed one at a time; --turns: the throughput burst.
// --mode drain (the default) attaches each inbox as the node does: drains of INBOX_DRAIN_MAX
// through SeatInbox.batchHandler; `each` runs one delivery at a time, for comparison.
import { z } from "zod";
import { benchArgs, countFlag } from "./args.ts";
import { systemClock } from "../src/clock.ts";
import { memoryLogger } from "../src/log.ts";
import type { EventSink } from "../src/agent/events.ts";
import { SeatInbox } from "../src/agent/inbox.ts";
import { buildProviders } from "../src/agent/providers/index.ts";
import { TurnEngine } from "../src/agent/turn.ts";
import { buildOrg } from "../src/org/org.ts";
import { encodeTrigger, type Trigger } from "../src/org/trigger.ts";
import { JetStreamQueue } from "../src/queue/jetstream.ts";
import { mailbox } from "../src/queue/topics.ts";
import { INBOX_DRAIN_MAX } from "../src/seat/host.ts";
import { startNats } from "../test/support/nats.ts";
import { LocalEstate, rootCompany } from "../test/agent/support.ts";

const { samples: LATENCY_SAMPLES, turns: THROUGHPUT_TURNS, mode: MODE } = benchArgs(
  "turns",
  "[--samples 200] [--turns 400] [--mode drain|each]",
  z.object({
    samples: countFlag(200, 100_000),
    turns: countFlag(400, 100_000),
    mode: z.enum(["drain", "each"]).default("drain"),
  }),
);

const company = rootCompany();
const org = buildOrg(company);
const { log } = memoryLogger("warn");
const nats = await startNats(1);
const nc = await nats.connect();
const queue = new JetStreamQueue({ nc, replicas: 1, clock: systemClock, log });
const estate = new LocalEstate(company);
const started = new Map<string, number>();
let completed = 0;
const events: EventSink = {
  emit(name, fields) {
    if (name === "turn_started") for (const id of fields.trigger_ids as string[]) started.set(id, performance.now());
    if (name === "turn_completed") completed += 1;
  },
};
const providers = buildProviders(company.providers.llm, systemClock);
const engine = new TurnEngine({
  org: () => org,
  node_id: "bench",
  clock: systemClock,
  log,
  estate,
  queue,
  providerFor: (s) => providers.get(s.llm ?? ""),
  ledger: null,
  events,
});
const inbox = new SeatInbox({ engine, log, max_concurrent: 32 });
const seats = org.agentSeats().map((s) => s.handle);
await queue.ensureStreams();
const attachments = [];
for (const h of seats) {
  const { subject, group } = mailbox(h, "inbox");
  await queue.ensureMailbox(subject, group);
  const grant = { handle: h, epoch: 1, fence: () => true };
  attachments.push(
    MODE === "drain"
      ? await queue.attachBatch(subject, group, (ds) => inbox.batchHandler(ds, grant), { batch: INBOX_DRAIN_MAX })
      : await queue.attach(subject, group, (d) => inbox.handler(d, grant), { batch: 1 }),
  );
}

let seq = 0;
const msgId = await estate.post("general", "founder", "hello team");
function trigger(seat: string): Trigger {
  seq += 1;
  // A mention with no task: the default rule's one-round "Noted" reply (one chat write).
  return { type: "chat_mention", event_id: `bench-${seq}`, seat, conversation: `chat:general:bench-${seq}`, from: "founder", text: "hello", refs: { channel: "general", message_id: msgId }, created_at: Date.now() };
}

async function waitFor(pred: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 60_000 && !pred(); i++) await Bun.sleep(1);
  if (!pred()) throw new Error(`timed out waiting for ${what}`);
}

// Latency: one trigger at a time on an idle node.
const latencies: number[] = [];
for (let i = 0; i < LATENCY_SAMPLES; i++) {
  const t = trigger(seats[i % seats.length]!);
  const before = completed;
  const sent = performance.now();
  await queue.publish(mailbox(t.seat, "inbox").subject, encodeTrigger(t), { msgId: t.event_id });
  await waitFor(() => started.has(t.event_id) && completed > before, "a turn");
  latencies.push(started.get(t.event_id)! - sent);
}
latencies.sort((a, b) => a - b);
const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))]!;

// Throughput: publish a burst across every seat, time until every turn completed.
const before = completed;
const t0 = performance.now();
await Promise.all(
  Array.from({ length: THROUGHPUT_TURNS }, (_, i) => {
    const t = trigger(seats[i % seats.length]!);
    return queue.publish(mailbox(t.seat, "inbox").subject, encodeTrigger(t), { msgId: t.event_id });
  }),
);
await waitFor(() => completed - before >= THROUGHPUT_TURNS, "the burst");
const elapsed_s = (performance.now() - t0) / 1000;

console.log(`bench/turns: one node, ${seats.length} seats, inbox ${MODE === "drain" ? `drains of ≤ ${INBOX_DRAIN_MAX}` : "one delivery at a time"}, scripted provider, JetStream on nats-server (R1, loopback), estate.db on disk`);
console.log(`publish → turn_started latency over ${LATENCY_SAMPLES} idle turns: median ${pct(50).toFixed(2)} ms, p99 ${pct(99).toFixed(2)} ms (target ≤ 5 / 20 ms)`);
console.log(`throughput: ${THROUGHPUT_TURNS} turns in ${elapsed_s.toFixed(2)} s = ${(THROUGHPUT_TURNS / elapsed_s).toFixed(0)} turns/s (each turn: 1 model round, 1 chat write)`);

for (const a of attachments) await a.detach();
await queue.close();
await nc.close();
await nats.stop();
estate.close();
