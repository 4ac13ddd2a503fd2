// bench/integrations.ts — signed webhook accepted (the 202 answered) → turn_started for
// the routed seat, median and p99, and the deliveries per second one ingress node accepts
// (HTTP over loopback, signature checked, claimed in crewlet_claims, published to
// CREWLET_NOTIFICATIONS) while its handler turns them into wakes. Real nats-server (R1),
// real KV slots, the scripted provider. Prints figures; never fails on time.
//   bun bench/integrations.ts [--samples 200] [--deliveries 2000] [--concurrency 16]
// --samples: idle deliveries timed one at a time; --deliveries: the throughput burst;
// --concurrency: senders at once in the burst.
import { z } from "zod";
import { benchArgs, countFlag } from "./args.ts";
import { systemClock } from "../src/clock.ts";
import { companySchema } from "../src/config/company.ts";
import { createApp } from "../src/api/app.ts";
import { TokenAuth } from "../src/api/auth.ts";
import { createCoordination } from "../src/coord/index.ts";
import type { EventSink } from "../src/agent/events.ts";
import { SeatInbox } from "../src/agent/inbox.ts";
import { buildProviders } from "../src/agent/providers/index.ts";
import { TurnEngine } from "../src/agent/turn.ts";
import { Integrations } from "../src/integrations/index.ts";
import { memoryLogger } from "../src/log.ts";
import { buildOrg } from "../src/org/org.ts";
import { JetStreamQueue } from "../src/queue/jetstream.ts";
import { ensureSeatMailboxes } from "../src/queue/mailboxes.ts";
import { mailbox } from "../src/queue/topics.ts";
import { INBOX_DRAIN_MAX } from "../src/seat/host.ts";
import { LocalEstate } from "../test/agent/support.ts";
import { fixture, GH_SECRET, githubRequest, integrationsCompany } from "../test/integrations/support.ts";
import { startNats } from "../test/support/nats.ts";

const { samples: LATENCY_SAMPLES, deliveries: THROUGHPUT, concurrency: CONCURRENCY } = benchArgs(
  "integrations",
  "[--samples 200] [--deliveries 2000] [--concurrency 16]",
  z.object({
    samples: countFlag(200, 100_000),
    deliveries: countFlag(2_000, 1_000_000),
    concurrency: countFlag(16, 1_024),
  }),
);

// The test company, inbound only (no tokens: no answer back leaves the bench), at the
// highest valve rate so the latency samples are not held.
const base = integrationsCompany() as any;
const company = companySchema.parse({ ...base, integrations: base.integrations.map(({ token: _t, ...i }: any) => ({ ...i, rate_per_minute: 600 })) });
const org = buildOrg(company);
const { log } = memoryLogger("warn");
const nats = await startNats(1);
const nc = await nats.connect();
const queue = new JetStreamQueue({ nc, replicas: 1, clock: systemClock, log });
await queue.ensureStreams();
const coord = await createCoordination({ type: "local", nc, replicas: 1, clock: systemClock, log });
const seats = org.agentSeats().map((s) => s.handle);
await ensureSeatMailboxes(queue, seats, systemClock, log);
const integrations = new Integrations({ nodeId: "bench", company: () => company, queue, claims: coord.slot("claims"), rate: coord.slot("rate"), clock: systemClock, log });
await integrations.ensureMailbox();
await integrations.startHandler();

const estate = new LocalEstate(company);
const started = new Map<string, number>();
const events: EventSink = {
  emit(name, fields) {
    if (name === "turn_started") for (const id of fields.trigger_ids as string[]) started.set(id, performance.now());
  },
};
const providers = buildProviders(company.providers.llm, systemClock);
const engine = new TurnEngine({ org: () => org, node_id: "bench", clock: systemClock, log, estate, queue, providerFor: (s) => providers.get(s.llm ?? ""), ledger: null, events });
const inbox = new SeatInbox({ engine, log, max_concurrent: 32 });
const attachments = [];
for (const h of seats) {
  const { subject, group } = mailbox(h, "inbox");
  attachments.push(await queue.attachBatch(subject, group, (ds) => inbox.batchHandler(ds, { handle: h, epoch: 1, fence: () => true }), { batch: INBOX_DRAIN_MAX }));
}

const app = createApp({ auth: new TokenAuth([]), log, health: { health: () => ({}), notReadyReason: () => null }, groups: [integrations.routeGroup()] });
const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => app.fetch(req) });
const url = `http://127.0.0.1:${server.port}/hooks/github/gh`;
const f = fixture("github-issues-opened");

async function deliver(): Promise<{ status: number; delivery: string | null; at: number; sent: number }> {
  const req = githubRequest(f, GH_SECRET, { delivery: crypto.randomUUID() });
  const sent = performance.now();
  const res = await fetch(url, { method: "POST", headers: req.headers, body: req.body });
  const at = performance.now();
  const json = (await res.json()) as { delivery?: string };
  return { status: res.status, delivery: json.delivery ?? null, at, sent };
}

async function waitFor(pred: () => boolean, what: string, timeout_ms = 60_000): Promise<void> {
  const deadline = performance.now() + timeout_ms;
  while (!pred()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(1);
  }
}

// Latency: one delivery at a time on an idle node (issues.opened → @cto).
const latencies: number[] = [];
const fromSent: number[] = [];
for (let i = 0; i < LATENCY_SAMPLES; i++) {
  const d = await deliver();
  if (d.status !== 202 || !d.delivery) throw new Error(`delivery answered ${d.status}`);
  const id = `hook.${d.delivery.slice(2)}.cto`;
  await waitFor(() => started.has(id), "a turn");
  latencies.push(started.get(id)! - d.at);
  fromSent.push(started.get(id)! - d.sent);
}
latencies.sort((a, b) => a - b);
fromSent.sort((a, b) => a - b);
const pctOf = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const pct = (p: number) => pctOf(latencies, p);

// Throughput: CONCURRENCY senders, THROUGHPUT deliveries, timed until the last 202.
let sent = 0;
let accepted = 0;
const t0 = performance.now();
await Promise.all(
  Array.from({ length: CONCURRENCY }, async () => {
    while (sent < THROUGHPUT) {
      sent += 1;
      if ((await deliver()).status === 202) accepted += 1;
    }
  }),
);
const elapsed_s = (performance.now() - t0) / 1000;

console.log(`bench/integrations: one node (ingress + seats), ${seats.length} seats, scripted provider, nats-server R1 on loopback, Bun.serve HTTP`);
console.log(`webhook accepted (202 received) → turn_started over ${LATENCY_SAMPLES} idle deliveries: median ${pct(50).toFixed(2)} ms, p99 ${pct(99).toFixed(2)} ms`);
console.log(`webhook sent → turn_started (includes the HTTP round trip, HMAC, claim, publish): median ${pctOf(fromSent, 50).toFixed(2)} ms, p99 ${pctOf(fromSent, 99).toFixed(2)} ms`);
console.log(`ingress: ${accepted}/${THROUGHPUT} deliveries accepted in ${elapsed_s.toFixed(2)} s = ${(accepted / elapsed_s).toFixed(0)} deliveries/s (${CONCURRENCY} concurrent senders; each: HMAC check, claim CAS, publish, claim update)`);

server.stop(true);
await integrations.stop();
for (const a of attachments) await a.detach();
await coord.close();
await queue.close();
await nc.close();
await nats.stop();
estate.close();
