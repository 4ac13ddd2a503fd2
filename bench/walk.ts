// The boot walk of members booting together: one walker per member of a fresh cluster, each
// on its own connection to its own member, all walking the same company at once (what a
// full-fleet start does). Prints each walker's time and creates, then what one listing of
// the result costs. Never fails on time.
//   bun bench/walk.ts [--seats 1000] [--members 3]
import { systemClock } from "../src/clock.ts";
import { memoryLogger, silentLogger } from "../src/log.ts";
import { JetStreamQueue } from "../src/queue/jetstream.ts";
import { ensureSeatMailboxes, MAILBOX_CREATE_CONCURRENCY } from "../src/queue/mailboxes.ts";
import { startNats } from "../test/support/nats.ts";

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${name} must be a positive integer`);
  return v;
}
const SEATS = arg("seats", 1000);
const MEMBERS = arg("members", 3);

const nats = await startNats(MEMBERS);
try {
  const queues = await Promise.all(
    nats.members.map(async (m, i) => {
      const nc = await nats.connect({ name: `walker-${i + 1}`, servers: m.url });
      return new JetStreamQueue({ nc, replicas: MEMBERS, clock: systemClock, log: silentLogger });
    }),
  );
  await queues[0]!.ensureStreams();
  const handles = Array.from({ length: SEATS }, (_, i) => `seat${i}`);
  const t0 = performance.now();
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
  const listT = performance.now();
  const listed = await queues[0]!.listMailboxes();
  const list_ms = performance.now() - listT;
  const creates = walks.reduce((a, w) => a + w.created, 0);
  console.log(`one listing of ${listed.length} mailboxes: ${list_ms.toFixed(0)} ms`);
  console.log(`seats=${SEATS} members=${MEMBERS} walk_s=${wall_s.toFixed(1)} creates_sent=${creates} mailboxes=${listed.length} list_ms=${list_ms.toFixed(0)}`);
  for (const q of queues) await q.close();
} finally {
  await nats.stop();
}
