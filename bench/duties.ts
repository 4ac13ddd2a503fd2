// Singleton duty figures (issue 14) on a real nats-server (one member, R1, and a 3-member
// cluster, R3): the duty runner's ticks per second (each tick a duty-lease renew and the
// last-tick stamp), the scheduler's fire latency (due instant → trigger in the seat's
// inbox, a 1 s cron under the runner, the scheduler wired as src/node/duties.ts wires it:
// each tick and each fire re-read the fleet's activation pointer, cursors in their own
// bucket, every call bounded), and retirement time per removed seat (the seat's lease
// claimed, mark, three deletes, record delete, release).
// Prints numbers; never fails on time.  Run: bun bench/duties.ts [--members 1|3]
// (both, R1 then R3, unless --members names one).
import { z } from "zod";
import { benchArgs, membersFlag } from "./args.ts";
import { systemClock } from "../src/clock.ts";
import { companySchema } from "../src/config/company.ts";
import { createCoordination } from "../src/coord/index.ts";
import { ensureRegisteredMailboxes } from "../src/duty/mailbox-registry.ts";
import { MailboxSweep } from "../src/duty/retirement.ts";
import { DUTY_CLAIM_BOUND_MS, DutyRunner, type DutyWork } from "../src/duty/runner.ts";
import { Scheduler } from "../src/duty/scheduler.ts";
import { memoryLogger } from "../src/log.ts";
import { decodeTrigger } from "../src/org/trigger.ts";
import { ack } from "../src/queue/contract.ts";
import { JetStreamQueue } from "../src/queue/jetstream.ts";
import { mailbox } from "../src/queue/topics.ts";
import { CompanyRevisions, currentRevisionReader } from "../src/config/company-revisions.ts";
import { startNats } from "../test/support/nats.ts";

const args = benchArgs("duties", "[--members 1|3 (default: both)]", z.object({ members: membersFlag.optional() }));

const RUNNER_SECONDS = 5;
const FIRES = 15;
const RETIRE_SEATS = 50;

function stats(xs: number[]): { median: number; p99: number; max: number } {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  return { median: at(0.5), p99: at(0.99), max: s[s.length - 1]! };
}

async function bench(members: 1 | 3): Promise<void> {
  const nats = await startNats(members);
  const nc = await nats.connect({ name: "bench-duties" });
  const { log, sink } = memoryLogger("info", systemClock);
  try {
    const coord = await createCoordination({ type: "embedded-kv", nc, replicas: members, lease_ttl_ms: 45_000, clock: systemClock, log });
    const queue = new JetStreamQueue({ nc, replicas: members, clock: systemClock, log });
    await queue.ensureStreams();

    // 1. Runner ticks per second: a duty with nothing to do, due again at once.
    let ticks = 0;
    const spin: DutyWork = { name: "bench-spin", ttl_ms: 30_000, nextTickIn: () => 0, tick: async () => void ticks++ };
    const runner = new DutyRunner({ node_id: "bench", store: coord.duties, clock: systemClock, log, duties: [spin] });
    runner.start();
    await Bun.sleep(RUNNER_SECONDS * 1000);
    await runner.stop();
    console.log(`R${members} runner: ${(ticks / RUNNER_SECONDS).toFixed(0)} ticks/s (claim-renew + tick + last-tick stamp each)`);

    // 2. Fire latency: due instant → the trigger delivered from the seat's inbox.
    const company = companySchema.parse({ name: "Bench", roles: [{ name: "Ops", handle: "ops" }], schedules: [{ id: "beat", cron: "* * * * * *", seat: "ops", prompt: "tick" }] });
    const inbox = mailbox("ops", "inbox");
    await queue.ensureMailbox(inbox.subject, inbox.group);
    const latencies: number[] = [];
    const done = Promise.withResolvers<void>();
    const att = await queue.attach(inbox.subject, inbox.group, async (d) => {
      const t = decodeTrigger(d.data);
      if (t.ok) latencies.push(Date.now() - t.trigger.created_at);
      if (latencies.length >= FIRES) done.resolve();
      return ack();
    });
    // As the node: the company stored and activated in crewlet_config, the scheduler judging
    // each tick and each fire against the pointer (currentRevisionReader), calls bounded by
    // the node's rule (src/node/duties.ts callBound).
    const revisions = new CompanyRevisions(coord.slot("config"), coord.slot("status"), "bench", systemClock, log);
    await revisions.activate(company);
    const callBound = () => Math.min(DUTY_CLAIM_BOUND_MS, Math.floor(coord.lease_ttl_ms / 3));
    const sched = new Scheduler({
      owner: "bench:sched",
      fires: coord.slot("fires"),
      cursors: coord.slot("schedules"),
      queue,
      company: () => company,
      current: currentRevisionReader(revisions),
      clock: systemClock,
      log,
      call_bound_ms: callBound,
    });
    const schedRunner = new DutyRunner({ node_id: "bench", store: coord.duties, clock: systemClock, log, claim_bound_ms: callBound, duties: [sched] });
    schedRunner.start();
    await Promise.race([done.promise, Bun.sleep((FIRES + 10) * 1000)]);
    await schedRunner.stop();
    await att.detach();
    const f = stats(latencies);
    console.log(`R${members} fire latency (due → delivered from the inbox), 1 s cron: median ${f.median} ms, p99 ${f.p99} ms, max ${f.max} ms (n=${latencies.length})`);

    // 3. Retirement time per seat: RETIRE_SEATS registered seats, none in the roster.
    const handles = Array.from({ length: RETIRE_SEATS }, (_, i) => `gone-${members}-${i}`);
    await ensureRegisteredMailboxes(queue, coord.slot("mailboxes"), handles, systemClock, log);
    const sweep = new MailboxSweep({
      owner: "bench:retire.1",
      node_id: "bench",
      registry: coord.slot("mailboxes"),
      leases: coord.leases,
      queue,
      roster: async () => ({ ok: true, epoch: 1, seats: new Set<string>() }),
      lease_ttl_ms: () => coord.lease_ttl_ms,
      grace_ms: 1,
      clock: systemClock,
      log,
    });
    await sweep.tick(); // stamps every absence
    await Bun.sleep(5);
    const t0 = performance.now();
    const s = await sweep.tick(); // retires
    const total = performance.now() - t0;
    const each = sink.events("seat_mailbox_retired").map((l) => Number(l.fields.elapsed_ms));
    const r = stats(each);
    console.log(
      `R${members} retirement: ${s.retired} seats in ${total.toFixed(0)} ms (${(total / Math.max(1, s.retired)).toFixed(1)} ms per seat in a sweep); one retirement (lease → record gone): median ${r.median} ms, p99 ${r.p99} ms`,
    );
    await coord.close();
    await queue.close();
  } finally {
    await nc.close();
    await nats.stop();
  }
}

const members = args.members ? [args.members] : ([1, 3] as const);
for (const m of members) await bench(m);
