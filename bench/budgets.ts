// Cost of spend control per model round: the check before the call (one read per capped
// scope) and the charge after it (read + compare-and-set per capped scope), on R1 (one
// member) and R3 (three members, each "node" on its own member), with an org cap and a seat
// cap (two records per round), one turn at a time and NODES turns at once on one org cap.
// The charge includes its durable outbox row in a file-backed node.db (src/spend/outbox.ts).
// Then the choice the counters rest on (src/spend/counters.ts): one charge to one record as
// the engine writes it (KV read + compare-and-set) beside one publish to a nats-server
// distributed-counter stream (allow_msg_counter, header Nats-Incr; the ack carries the total),
// one at a time (p50/p99) and SIX chargers at once on one record (throughput), R1 and R3.
// Prints figures; never passes or fails on time.
//   bun bench/budgets.ts [--rounds 300] [--only-choice]
import { Database } from "bun:sqlite";
import { headers as natsHeaders, type NatsConnection } from "nats";
import { join } from "node:path";
import { z } from "zod";
import { benchArgs, countFlag } from "./args.ts";
import { systemClock } from "../src/clock.ts";
import { budgetsSchema } from "../src/config/budgets.ts";
import { createCoordination } from "../src/coord/index.ts";
import { memoryLogger } from "../src/log.ts";
import { CasConflict, type KvSlot } from "../src/coord/contract.ts";
import { BudgetCounters } from "../src/spend/counters.ts";
import { startNats } from "../test/support/nats.ts";

const { rounds: ROUNDS, "only-choice": ONLY_CHOICE } = benchArgs(
  "budgets",
  "[--rounds 300] [--only-choice]",
  z.object({ rounds: countFlag(300, 100_000), "only-choice": z.boolean().default(false) }),
  ["only-choice"],
);
/** Chargers at once on one record in the side-by-side: two turns on each of three nodes. */
const CHARGERS = 6;

/** A node.db as the engine opens it (a file, WAL, synchronous NORMAL): the charge's outbox row is part of its cost. */
function nodeDb(dir: string): Database {
  const db = new Database(join(dir, `node-${crypto.randomUUID()}.db`), { create: true, strict: true });
  db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
  return db;
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

async function run(members: 1 | 3): Promise<void> {
  const nats = await startNats(members);
  const { log } = memoryLogger("warn");
  const budgets = budgetsSchema.parse({ org: { day: { tokens: 1e12 } }, seats: { default: { day: { tokens: 1e12 } } } });
  const nodes = [];
  for (const m of nats.members) {
    const nc = await nats.connect({ servers: m.url });
    const coord = await createCoordination({ type: "embedded-kv", nc, replicas: members, clock: systemClock, log });
    nodes.push({ nc, coord, counters: new BudgetCounters({ db: nodeDb(nats.dir), slot: coord.slot("budgets"), clock: systemClock, log, budgets: () => budgets, timezone: () => "UTC", pricing: () => ({ input_per_million: 3, output_per_million: 15 }) }) });
  }
  const round = async (c: BudgetCounters, seat: string, checks: number[], charges: number[]) => {
    let t = performance.now();
    await c.check(seat);
    checks.push(performance.now() - t);
    t = performance.now();
    await c.charge(seat, "model", { input_tokens: 200, output_tokens: 50 });
    charges.push(performance.now() - t);
  };
  // Warm up (bucket leaders, connections).
  for (let i = 0; i < 20; i++) await round(nodes[0]!.counters, "warm", [], []);
  {
    const checks: number[] = [];
    const charges: number[] = [];
    for (let i = 0; i < ROUNDS; i++) await round(nodes[0]!.counters, "solo", checks, charges);
    console.log(`R${members} one turn:            check p50 ${pct(checks, 50).toFixed(2)} ms p99 ${pct(checks, 99).toFixed(2)} ms · charge p50 ${pct(charges, 50).toFixed(2)} ms p99 ${pct(charges, 99).toFixed(2)} ms (2 capped scopes)`);
  }
  {
    const checks: number[] = [];
    const charges: number[] = [];
    const started = performance.now();
    await Promise.all(
      nodes.flatMap((n, i) =>
        [0, 1].map(async (j) => {
          for (let r = 0; r < ROUNDS / 2; r++) await round(n.counters, `seat-${i}-${j}`, checks, charges);
        }),
      ),
    );
    const secs = (performance.now() - started) / 1000;
    console.log(`R${members} ${nodes.length * 2} turns at once: check p50 ${pct(checks, 50).toFixed(2)} ms p99 ${pct(checks, 99).toFixed(2)} ms · charge p50 ${pct(charges, 50).toFixed(2)} ms p99 ${pct(charges, 99).toFixed(2)} ms · ${(charges.length / secs).toFixed(0)} rounds/s on one org record`);
  }
  for (const n of nodes) {
    await n.coord.close();
    await n.nc.close();
  }
  await nats.stop();
}


// ---- The choice: KV compare-and-set vs a distributed-counter stream (nats-server 2.12+) ----

const enc = new TextEncoder();
const dec = new TextDecoder();

/** One charge as counters.ts writes it: read the record, add, compare-and-set; again on a conflict. */
async function casCharge(slot: KvSlot, key: string, tokens: number): Promise<number> {
  for (let attempt = 1; attempt <= 64; attempt++) {
    const e = await slot.get(key);
    const cur = e && e.operation === "put" ? (JSON.parse(dec.decode(e.value)) as { input_tokens: number; output_tokens: number; cost_micros: number; charges: number; alerted: boolean; marks: Record<string, number> }) : { input_tokens: 0, output_tokens: 0, cost_micros: 0, charges: 0, alerted: false, marks: {} };
    const next = { ...cur, input_tokens: cur.input_tokens + tokens, charges: cur.charges + 1, marks: { ...cur.marks, bench: cur.charges + 1 } };
    try {
      if (!e) await slot.create(key, enc.encode(JSON.stringify(next)));
      else await slot.update(key, enc.encode(JSON.stringify(next)), e.revision);
      return attempt - 1;
    } catch (err) {
      if (err instanceof CasConflict) continue;
      throw err;
    }
  }
  throw new Error("64 conflicts in a row");
}

/** One Nats-Incr publish; the ack's `val` is the subject's total after it. */
async function incr(nc: NatsConnection, subject: string, by: number): Promise<bigint> {
  const h = natsHeaders();
  h.set("Nats-Incr", String(by));
  const m = await nc.request(subject, new Uint8Array(0), { headers: h, timeout: 10_000 });
  const ack = JSON.parse(dec.decode(m.data)) as { val?: string; error?: { description: string } };
  if (ack.error || ack.val === undefined) throw new Error(`counter publish refused: ${ack.error?.description ?? dec.decode(m.data)}`);
  return BigInt(ack.val);
}

async function choice(members: 1 | 3): Promise<void> {
  const nats = await startNats(members);
  const { log } = memoryLogger("warn");
  const conns: NatsConnection[] = [];
  const slots: KvSlot[] = [];
  const coords = [];
  for (const m of nats.members) {
    const nc = await nats.connect({ servers: m.url });
    const coord = await createCoordination({ type: "embedded-kv", nc, replicas: members, clock: systemClock, log });
    conns.push(nc);
    coords.push(coord);
    slots.push(coord.slot("budgets"));
  }
  // The counter stream, created by a plain API request (the client's stream config type
  // predates allow_msg_counter).
  const created = JSON.parse(dec.decode((await conns[0]!.request("$JS.API.STREAM.CREATE.BENCH_COUNTERS", enc.encode(JSON.stringify({ name: "BENCH_COUNTERS", subjects: ["bench.counter.>"], storage: "file", num_replicas: members, allow_msg_counter: true, allow_direct: true })), { timeout: 20_000 })).data)) as { error?: { description: string } };
  if (created.error) throw new Error(`counter stream: ${created.error.description}`);
  // Warm up both (leaders, connections).
  for (let i = 0; i < 20; i++) {
    await casCharge(slots[0]!, "warm.cas", 1);
    await incr(conns[0]!, "bench.counter.warm", 1);
  }
  const solo = async (op: (i: number) => Promise<unknown>) => {
    const xs: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const t = performance.now();
      await op(i);
      xs.push(performance.now() - t);
    }
    return `p50 ${pct(xs, 50).toFixed(2)} ms p99 ${pct(xs, 99).toFixed(2)} ms`;
  };
  console.log(`R${members} choice, one charger:  KV CAS (read + update) ${await solo(() => casCharge(slots[0]!, "solo.cas", 250))} · Nats-Incr publish ${await solo(() => incr(conns[0]!, "bench.counter.solo", 250))}`);
  const many = async (op: (c: number) => Promise<number>) => {
    const xs: number[] = [];
    let retries = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CHARGERS }, async (_, c) => {
        for (let r = 0; r < Math.ceil(ROUNDS / CHARGERS) * 2; r++) {
          const t = performance.now();
          retries += await op(c);
          xs.push(performance.now() - t);
        }
      }),
    );
    const secs = (performance.now() - started) / 1000;
    return { text: `${(xs.length / secs).toFixed(0)} charges/s, p50 ${pct(xs, 50).toFixed(2)} ms p99 ${pct(xs, 99).toFixed(2)} ms`, n: xs.length, retries };
  };
  // Six chargers, spread over the members as six turns on three nodes would be.
  const cas = await many((c) => casCharge(slots[c % slots.length]!, "many.cas", 250));
  const inc = await many(async (c) => (await incr(conns[c % conns.length]!, "bench.counter.many", 250), 0));
  const casTotal = (JSON.parse(dec.decode((await slots[0]!.get("many.cas"))!.value)) as { input_tokens: number }).input_tokens;
  const incTotal = await incr(conns[0]!, "bench.counter.many", 0);
  console.log(`R${members} choice, ${CHARGERS} chargers on one record: KV CAS ${cas.text} (${cas.retries} conflicts retried, total ${casTotal} = ${cas.n * 250}) · Nats-Incr ${inc.text} (total ${incTotal} = ${inc.n * 250})`);
  for (const c of coords) await c.close();
  for (const nc of conns) await nc.close();
  await nats.stop();
}

if (!ONLY_CHOICE) {
  await run(1);
  await run(3);
}
await choice(1);
await choice(3);
