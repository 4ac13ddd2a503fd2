// Cost of spend control per model round: the check before the call (one read per capped
// scope) and the charge after it (read + compare-and-set per capped scope), on R1 (one
// member) and R3 (three members, each "node" on its own member), with an org cap and a seat
// cap (two records per round), one turn at a time and NODES turns at once on one org cap.
// The charge includes its durable outbox row in a file-backed node.db (src/spend/outbox.ts).
// Prints figures; never passes or fails on time.
//   bun bench/budgets.ts [--rounds 300]
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { systemClock } from "../src/clock.ts";
import { budgetsSchema } from "../src/config/budgets.ts";
import { createCoordination } from "../src/coord/index.ts";
import { memoryLogger } from "../src/log.ts";
import { BudgetCounters } from "../src/spend/counters.ts";
import { startNats } from "../test/support/nats.ts";

const roundsArg = process.argv.indexOf("--rounds");
const ROUNDS = roundsArg > 0 ? Number(process.argv[roundsArg + 1]) : 300;

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

await run(1);
await run(3);
