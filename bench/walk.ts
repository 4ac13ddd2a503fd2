// The boot walk of members booting together: one walker per member of a fresh cluster, each
// on its own connection to its own member, all walking the same company at once (what a
// full-fleet start does). Prints each walker's time and creates, then what one listing of
// the result costs. Never fails on time.
//   bun bench/walk.ts [--seats 1000] [--members 3] [--walkers M] [--idle S]
// --walkers below the member count walks on the first members only (1: no peer creates the
// same mailboxes, so no create is answered "exists"). The brokers' CPU seconds over the walk
// say whether the box, not the walk, sets the pace (2 cores: 2 CPU-s per wall second), and
// how they split: on three boxes each broker has its own cores. --idle S then leaves the
// mailboxes untouched for S seconds and prints what the brokers spend keeping them (raft
// heartbeats of every R3 consumer group): the floor under everything else on the box.
import { z } from "zod";
import { benchArgs, countFlag, wholeFlag, membersFlag } from "./args.ts";
import { cpuSeconds } from "./proc.ts";
import { systemClock } from "../src/clock.ts";
import { memoryLogger, silentLogger } from "../src/log.ts";
import { JetStreamQueue } from "../src/queue/jetstream.ts";
import { ensureSeatMailboxes, MAILBOX_CREATE_CONCURRENCY } from "../src/queue/mailboxes.ts";
import { startNats } from "../test/support/nats.ts";

const args = benchArgs(
  "walk",
  "[--seats 1000] [--members 1|3] [--walkers K] [--idle S]",
  z.object({
    seats: countFlag(1000, 20_000),
    members: membersFlag.default(3),
    walkers: wholeFlag(1, 3).optional(),
    idle: wholeFlag(0, 3_600).default(0),
  }),
);
const SEATS = args.seats;
const MEMBERS = args.members;
const WALKERS = Math.min(args.walkers ?? MEMBERS, MEMBERS);

const brokerCpus = () => nats.members.map((m) => cpuSeconds(m.proc.pid));
const spent = (before: number[]) => brokerCpus().map((c, i) => c - before[i]!);
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const fmt = (xs: number[]) => xs.map((x) => x.toFixed(1)).join("/");

const nats = await startNats(MEMBERS);
try {
  const queues = await Promise.all(
    nats.members.slice(0, WALKERS).map(async (m, i) => {
      const nc = await nats.connect({ name: `walker-${i + 1}`, servers: m.url });
      return new JetStreamQueue({ nc, replicas: MEMBERS, clock: systemClock, log: silentLogger });
    }),
  );
  await queues[0]!.ensureStreams();
  const handles = Array.from({ length: SEATS }, (_, i) => `seat${i}`);
  const t0 = performance.now();
  const cpu0 = brokerCpus();
  const walks = await Promise.all(
    queues.map(async (queue, i) => {
      const { log, sink } = memoryLogger("info");
      const res = await ensureSeatMailboxes(queue, handles, systemClock, log, MAILBOX_CREATE_CONCURRENCY);
      const line = sink.events("seat_mailbox_created")[0]!.fields;
      console.log(`walker ${i + 1}: ${(res.elapsed_ms / 1000).toFixed(1)} s, created ${line.created}, present ${line.present}`);
      return { ms: res.elapsed_ms, created: Number(line.created) };
    }),
  );
  const wall_s = (performance.now() - t0) / 1000;
  const walk_cpu = spent(cpu0);
  const listT = performance.now();
  const listed = await queues[0]!.listMailboxes();
  const list_ms = performance.now() - listT;
  const creates = walks.reduce((a, w) => a + w.created, 0);
  console.log(`one listing of ${listed.length} mailboxes: ${list_ms.toFixed(0)} ms`);
  console.log(`brokers' CPU over the walk: ${fmt(walk_cpu)} s (member 1/2/3), ${(sum(walk_cpu) / wall_s).toFixed(2)} cores`);
  let idle = "";
  if (args.idle > 0) {
    const idle0 = brokerCpus();
    await Bun.sleep(args.idle * 1000);
    const idle_cpu = spent(idle0);
    console.log(`brokers' CPU idle over ${args.idle} s: ${fmt(idle_cpu)} s, ${(sum(idle_cpu) / args.idle).toFixed(2)} cores`);
    idle = ` idle_cores=${(sum(idle_cpu) / args.idle).toFixed(2)}`;
  }
  console.log(`seats=${SEATS} members=${MEMBERS} walkers=${WALKERS} walk_s=${wall_s.toFixed(1)} broker_cpu_s=${sum(walk_cpu).toFixed(1)} creates_sent=${creates} mailboxes=${listed.length} list_ms=${list_ms.toFixed(0)}${idle}`);
  for (const q of queues) await q.close();
} finally {
  await nats.stop();
}
