// Three real members charging one org cap at once (crewlet_budgets at R3, each node on its
// own member): the overshoot is at most one round per turn in flight, no charge is lost
// (the counter equals the sum of the usage every "turn" reported), and the soft alert fires
// once fleet-wide.
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { NatsConnection } from "nats";
import { systemClock } from "../../src/clock.ts";
import { budgetsSchema } from "../../src/config/budgets.ts";
import { createCoordination, type CoordinationHandle } from "../../src/coord/index.ts";
import { memoryLogger } from "../../src/log.ts";
import { BudgetCounters, type BudgetAlert } from "../../src/spend/counters.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { whileForming } from "../support/forming.ts";

let nats: TestNats;
const conns: NatsConnection[] = [];
const coords: CoordinationHandle[] = [];
beforeAll(async () => {
  nats = await startNats(3);
  const { log } = memoryLogger("warn");
  for (const m of nats.members) {
    const nc = await nats.connect({ servers: m.url });
    conns.push(nc);
    // One after the other: the first creates the R3 buckets, the rest adopt them.
    coords.push(await whileForming(() => createCoordination({ type: "embedded-kv", nc, replicas: 3, clock: systemClock, log })));
  }
  // Every member must take writes to the budgets bucket before the race starts: on a
  // cluster formed a moment ago one member answered 503 to every write for the whole case
  // (its reads worked), so its charges stayed owed and the others overshot (CI, c70fb64).
  // A node's counters retry those (CHARGE_RETRY_MS); the bound here is the settled fleet's.
  for (const c of coords) await whileForming(() => c.slot("budgets").put("probe.writable", new Uint8Array([1])));
}, 60_000);
afterAll(async () => {
  for (const c of coords) await c.close();
  for (const nc of conns) await nc.close();
  await nats.stop();
});

const CAP = 20_000;

// One turn in flight per node is the bound as written (spent ≤ cap + nodes × the
// biggest round); three per node is the general form (one round per turn in flight). Each
// row charges its own window's org record, so the two never share a figure.
const ROWS = [
  { in_flight_per_node: 1, window: "week" },
  { in_flight_per_node: 3, window: "month" },
] as const;

for (const { in_flight_per_node: IN_FLIGHT_PER_NODE, window } of ROWS)
test(`3 members, ${IN_FLIGHT_PER_NODE} turn(s) in flight each, one org cap: overshoot ≤ one round per turn in flight, sum of counters = sum of usage, one alert`, async () => {
  const budgets = budgetsSchema.parse({ org: { [window]: { tokens: CAP } }, soft_alert: 0.5 });
  const alerts: BudgetAlert[] = [];
  const { log, sink } = memoryLogger("warn");
  const nodes = coords.map(
    (c) => new BudgetCounters({ db: new Database(":memory:"), slot: c.slot("budgets"), clock: systemClock, log, budgets: () => budgets, timezone: () => "UTC", pricing: () => ({ input_per_million: 3, output_per_million: 15 }), onAlert: (a) => alerts.push(a) }),
  );
  let seed = 12016;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const reported = { input: 0, output: 0, rounds: 0, biggest: 0 };
  // A "turn": check before each model call, charge its usage after, until refused.
  const turn = async (counters: BudgetCounters, seat: string) => {
    for (;;) {
      if (await counters.check(seat)) return;
      const usage = { input_tokens: 50 + Math.floor(random() * 250), output_tokens: 10 + Math.floor(random() * 140) };
      reported.input += usage.input_tokens;
      reported.output += usage.output_tokens;
      reported.rounds += 1;
      reported.biggest = Math.max(reported.biggest, usage.input_tokens + usage.output_tokens);
      await counters.charge(seat, "model", usage);
    }
  };
  await Promise.all(nodes.flatMap((n, i) => Array.from({ length: IN_FLIGHT_PER_NODE }, (_, j) => turn(n, `seat-${i}-${j}`))));
  // What a charge left owed is named by its deferral's log line, so a failure says why.
  const pending = nodes.map((n) => n.pendingCount());
  const deferred = pending.some((p) => p > 0) ? sink.events("budget_charge_deferred") : [];
  expect({ pending, deferred }).toEqual({ pending: [0, 0, 0], deferred: [] });

  // Every node reads the same figure.
  const views = await Promise.all(nodes.map((n) => n.status([])));
  for (const v of views) expect(v).toEqual(views[0]!);
  const org = views[0]![0]!;
  expect(org.scope).toBe("org");
  expect(org.window).toBe(window);
  // Never a lost charge.
  expect(org.spent.input_tokens).toBe(reported.input);
  expect(org.spent.output_tokens).toBe(reported.output);
  expect(org.spent.charges).toBe(reported.rounds);
  expect(org.spent.money).toBeCloseTo((reported.input * 3 + reported.output * 15) / 1e6, 6);
  // Reached, and overshot by at most one round per turn in flight.
  expect(org.spent.tokens).toBeGreaterThanOrEqual(CAP);
  const overshoot = org.spent.tokens - CAP;
  expect(org.spent.tokens).toBeLessThanOrEqual(CAP + nodes.length * IN_FLIGHT_PER_NODE * reported.biggest);
  expect(org.exhausted).toBe(true);
  // The soft alert: once, fleet-wide.
  expect(alerts).toHaveLength(1);
  expect(alerts[0]!.fraction).toBeGreaterThanOrEqual(0.5);
  console.log(`rounds ${reported.rounds}, spent ${org.spent.tokens}/${CAP}, overshoot ${overshoot} tokens (bound ${nodes.length * IN_FLIGHT_PER_NODE} × ${reported.biggest})`);
}, 120_000);
