// The mailbox shapes of issue 34, side by side: what each costs the brokers to create and to
// keep while nothing moves. Each shape runs on its own fresh cluster (startNats), with the
// sixteen agent shards and one seat's mailboxes per seat:
//   before      — an R3 consumer per seat mailbox (inbox and reflect; control only for a
//                 seat with a sandbox) on interest streams, memory state: the shape up to
//                 lease protocol 7, made here by hand;
//   built       — what the node's own code makes now (queue.ensureStreams and
//                 ensureSeatMailboxes): an R1 consumer per seat mailbox on limits streams,
//                 file state;
//   seat-r3     — one R3 consumer a seat over its three subjects (filter_subjects), on
//                 interest streams: a third of the raft groups;
//   seat-r1     — one R1 consumer a seat over its three subjects on limits streams (R1 is
//                 refused on interest streams, 10134): no raft group, its state on one server;
//   seat-r1-mem — as seat-r1, its state in memory.
// Per shape: the create walk (wall time, brokers' CPU), then --idle S seconds untouched (the
// brokers' CPU over it: heartbeats of every raft group, the floor under everything else),
// the brokers' RSS and the consumer count. Figures only; on a shared box they are upper
// bounds. Last line per shape: shape=… seats=… create_s=… idle_cores=… rss_mib=… consumers=…
//   bun bench/mailbox-shapes.ts [--seats 2000] [--members 3] [--idle 30] [--shapes before,built,seat-r3,seat-r1,seat-r1-mem]
import { AckPolicy, DeliverPolicy, ReplayPolicy, RetentionPolicy, StorageType, type ConsumerConfig, type JetStreamManager } from "nats";
import { z } from "zod";
import { benchArgs, countFlag, membersFlag, wholeFlag } from "./args.ts";
import { cpuSeconds, rssMiB } from "./proc.ts";
import { systemClock } from "../src/clock.ts";
import { silentLogger } from "../src/log.ts";
import { JetStreamQueue } from "../src/queue/jetstream.ts";
import { ensureSeatMailboxes, MAILBOX_CREATE_CONCURRENCY } from "../src/queue/mailboxes.ts";
import { AGENT_SHARDS, agentStream, agentSubjects, durableName, MAILBOX_KINDS, mailboxGroup, mailboxStream, mailboxSubject, SEAT_MAILBOX_KINDS } from "../src/queue/topics.ts";
import { startNats, type TestNats } from "../test/support/nats.ts";

const SHAPES = ["before", "built", "seat-r3", "seat-r1", "seat-r1-mem"] as const;
type Shape = (typeof SHAPES)[number];

const args = benchArgs(
  "mailbox-shapes",
  "[--seats 2000] [--members 1|3] [--idle 30] [--shapes before,built,seat-r3,seat-r1,seat-r1-mem]",
  z.object({
    seats: countFlag(2000, 20_000),
    members: membersFlag.default(3),
    idle: wholeFlag(1, 3_600).default(30),
    shapes: z
      .string()
      .default(SHAPES.join(","))
      .transform((s) => s.split(","))
      .pipe(z.array(z.enum(SHAPES)).min(1)),
  }),
);

/** A consumer's settings in the one-per-seat shapes: a mailbox's, over the seat's three subjects. */
function seatConsumer(handle: string, replicas: number, mem: boolean): ConsumerConfig {
  return {
    durable_name: `seat-${handle}`,
    filter_subjects: MAILBOX_KINDS.map((k) => mailboxSubject(handle, k)),
    deliver_policy: DeliverPolicy.All,
    ack_policy: AckPolicy.Explicit,
    ack_wait: 30 * 60 * 1e9,
    max_deliver: 5,
    replay_policy: ReplayPolicy.Instant,
    num_replicas: replicas,
    mem_storage: mem,
  } as ConsumerConfig;
}

async function addStreams(jsm: JetStreamManager, retention: RetentionPolicy): Promise<void> {
  for (let i = 0; i < AGENT_SHARDS; i++) {
    await jsm.streams.add({ name: agentStream(i), subjects: [agentSubjects(i)], retention, storage: StorageType.File, num_replicas: args.members });
  }
}

/** Runs `each` over `items`, `limit` at a time. */
async function pool<T>(items: T[], limit: number, each: (x: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: limit }, async () => {
    while (next < items.length) await each(items[next++]!);
  }));
}

async function create(nats: TestNats, shape: Shape, handles: string[]): Promise<void> {
  const nc = await nats.connect({ name: `shape-${shape}` });
  try {
    if (shape === "before") {
      const jsm = await nc.jetstreamManager({ timeout: 30_000 });
      await addStreams(jsm, RetentionPolicy.Interest);
      const boxes = handles.flatMap((h) => SEAT_MAILBOX_KINDS.map((kind) => ({ h, kind })));
      await pool(boxes, MAILBOX_CREATE_CONCURRENCY, ({ h, kind }) =>
        jsm.consumers.add(mailboxStream(h), { ...seatConsumer(h, args.members, args.members > 1), durable_name: durableName(mailboxGroup(h, kind)), filter_subjects: undefined, filter_subject: mailboxSubject(h, kind) } as ConsumerConfig),
      );
      return;
    }
    if (shape === "built") {
      const queue = new JetStreamQueue({ nc, replicas: args.members, clock: systemClock, log: silentLogger });
      await queue.ensureStreams();
      await ensureSeatMailboxes(queue, handles, systemClock, silentLogger, MAILBOX_CREATE_CONCURRENCY);
      await queue.close();
      return;
    }
    const jsm = await nc.jetstreamManager({ timeout: 30_000 });
    await addStreams(jsm, shape === "seat-r3" ? RetentionPolicy.Interest : RetentionPolicy.Limits);
    const replicas = shape === "seat-r3" ? args.members : 1;
    const mem = shape === "seat-r1-mem" || (shape === "seat-r3" && args.members > 1);
    await pool(handles, MAILBOX_CREATE_CONCURRENCY, (h) => jsm.consumers.add(mailboxStream(h), seatConsumer(h, replicas, mem)));
  } finally {
    await nc.close();
  }
}

/** Consumers on the agent shards, from each stream's own count (R1 consumers live on one member each). */
async function consumerCount(nats: TestNats): Promise<number> {
  const nc = await nats.connect({ name: "shape-count" });
  try {
    const jsm = await nc.jetstreamManager({ timeout: 30_000 });
    let n = 0;
    for (let i = 0; i < AGENT_SHARDS; i++) n += (await jsm.streams.info(agentStream(i))).state.consumer_count;
    return n;
  } finally {
    await nc.close();
  }
}

const fmt = (xs: number[]) => xs.map((x) => x.toFixed(1)).join("/");
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

async function measure(shape: Shape): Promise<void> {
  const nats = await startNats(args.members);
  const cpus = () => nats.members.map((m) => cpuSeconds(m.proc.pid));
  try {
    const handles = Array.from({ length: args.seats }, (_, i) => `seat${i}`);
    const c0 = cpus();
    const t0 = performance.now();
    await create(nats, shape, handles);
    const create_s = (performance.now() - t0) / 1000;
    const create_cpu = cpus().map((c, i) => c - c0[i]!);
    console.log(`${shape}: created in ${create_s.toFixed(1)} s, brokers' CPU ${fmt(create_cpu)} s`);
    // The first seconds after a walk still settle raft groups: measured from a quiet start.
    await Bun.sleep(5_000);
    const i0 = cpus();
    await Bun.sleep(args.idle * 1000);
    const idle = cpus().map((c, i) => c - i0[i]!);
    const idle_cores = sum(idle) / args.idle;
    const rss = nats.members.map((m) => rssMiB(m.proc.pid));
    const consumers = await consumerCount(nats);
    console.log(`${shape}: idle ${args.idle} s: brokers' CPU ${fmt(idle)} s (${idle_cores.toFixed(3)} cores); RSS ${fmt(rss)} MiB; consumers ${consumers}`);
    console.log(`shape=${shape} seats=${args.seats} members=${args.members} create_s=${create_s.toFixed(1)} idle_cores=${idle_cores.toFixed(3)} rss_mib=${sum(rss).toFixed(0)} consumers=${consumers}`);
  } finally {
    await nats.stop();
  }
}

for (const shape of args.shapes) await measure(shape);
