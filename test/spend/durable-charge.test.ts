// A charge the store did not take is kept in node.db and applied exactly once (issue 16:
// "never a lost charge"): across a nats-server killed and started again and a restart of
// the node (a new BudgetCounters on the same node.db), and when a write landed but its
// answer was lost (the record's marks make the retry a no-op). While the counters cannot
// be read, no model call may start (unknown spend is not spend under the cap).
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { systemClock } from "../../src/clock.ts";
import { budgetsSchema } from "../../src/config/budgets.ts";
import type { KvSlot } from "../../src/coord/contract.ts";
import { createCoordination, type CoordinationHandle } from "../../src/coord/index.ts";
import { memoryLogger } from "../../src/log.ts";
import { windowOf } from "../../src/spend/budget.ts";
import { BudgetCounters, BudgetUnknown, counterKey } from "../../src/spend/counters.ts";
import { BudgetGate } from "../../src/spend/gate.ts";
import { startNats, type TestNats } from "../support/nats.ts";

const WAIT_MS = 30_000;
const budgets = budgetsSchema.parse({ org: { day: { tokens: 1_000 } }, seats: { default: { day: { tokens: 10_000 } } } });

let nats: TestNats;
let dir: string;
beforeAll(async () => {
  nats = await startNats(1);
  dir = mkdtempSync(join(tmpdir(), "crewlet-charge-"));
});
afterAll(async () => {
  await nats?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function waitFor(what: string, ok: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${WAIT_MS} ms`);
    await Bun.sleep(50);
  }
}

function counters(db: Database, slot: KvSlot) {
  const { log, sink } = memoryLogger("debug");
  return { c: new BudgetCounters({ db, slot, clock: systemClock, log, budgets: () => budgets, timezone: () => "UTC", pricing: () => ({ input_per_million: 3, output_per_million: 15 }) }), sink };
}

async function record(slot: KvSlot, key: string) {
  const e = await slot.get(key);
  return e ? (JSON.parse(new TextDecoder().decode(e.value)) as { input_tokens: number; output_tokens: number; cost_micros: number; charges: number }) : null;
}

const orgKey = () => counterKey({ kind: "org" }, "day", windowOf("day", Date.now(), "UTC").reset_at);
const seatKey = (h: string) => counterKey({ kind: "seat", handle: h }, "day", windowOf("day", Date.now(), "UTC").reset_at);

test("a charge made while nats-server is down waits in node.db and lands once after the server and the node restart; meanwhile no call may start", async () => {
  const dbFile = join(dir, "node.db");
  let db = new Database(dbFile, { create: true, strict: true });
  let nc = await nats.connect();
  let coord: CoordinationHandle = await createCoordination({ type: "embedded-kv", nc, replicas: 1, clock: systemClock, log: memoryLogger("warn").log });
  const first = counters(db, coord.slot("budgets"));
  await first.c.charge("cto", "model", { input_tokens: 100, output_tokens: 20 });
  expect(first.c.pendingCount()).toBe(0);
  expect(await record(coord.slot("budgets"), orgKey())).toMatchObject({ input_tokens: 100, output_tokens: 20, charges: 1 });

  // The store goes away mid-company.
  await nats.members[0]!.kill();
  await first.c.charge("cto", "model", { input_tokens: 40, output_tokens: 10 });
  await first.c.charge("cto", "model", { input_tokens: 7, output_tokens: 3 });
  // Two rounds × two capped records (org, seat), owed.
  expect(first.c.pendingCount()).toBe(4);
  expect(first.sink.events("budget_charge_deferred").length).toBeGreaterThan(0);
  // Unknown spend: the check refuses, and the gate turns that into a transient "unknown".
  await expect(first.c.check("cto")).rejects.toBeInstanceOf(BudgetUnknown);
  const events = new MemoryEventSink();
  const gate = new BudgetGate({ counters: first.c, timezone: () => "UTC", events, log: memoryLogger("warn").log, node_id: "a" });
  const verdict = await gate.check("cto", "model");
  expect(typeof verdict === "object" && verdict !== null && verdict.unknown.includes("cannot be read")).toBe(true);
  expect(events.named("budget_unknown")).toHaveLength(1);

  // The node stops (its process ends: only node.db survives), the server comes back, the node starts.
  first.c.stop();
  db.close();
  await nc.close().catch(() => undefined);
  await nats.members[0]!.restart();
  nc = await nats.connect();
  coord = await createCoordination({ type: "embedded-kv", nc, replicas: 1, clock: systemClock, log: memoryLogger("warn").log });
  db = new Database(dbFile, { create: true, strict: true });
  const second = counters(db, coord.slot("budgets"));
  expect(second.c.pendingCount()).toBe(4);
  second.c.start();
  try {
    await waitFor("the owed charges landed", () => second.c.pendingCount() === 0);
    // Exactly the three rounds, once each, on both records.
    for (const key of [orgKey(), seatKey("cto")]) {
      expect({ key, ...(await record(coord.slot("budgets"), key)) }).toMatchObject({ key, input_tokens: 147, output_tokens: 33, charges: 3, cost_micros: 147 * 3 + 33 * 15 });
    }
  } finally {
    second.c.stop();
    db.close();
    await coord.close();
    await nc.close();
  }
}, 120_000);

test("a write that landed but whose answer was lost is not charged again when retried", async () => {
  const nc = await nats.connect();
  const coord = await createCoordination({ type: "embedded-kv", nc, replicas: 1, clock: systemClock, log: memoryLogger("warn").log });
  const real = coord.slot("budgets");
  // The store applies the write, then the answer is lost (a timeout after the commit): once.
  let lose = 1;
  const lossy: KvSlot = Object.create(real);
  lossy.create = async (k, v) => {
    const r = await real.create(k, v);
    if (lose-- > 0) throw new Error("TIMEOUT");
    return r;
  };
  lossy.update = async (k, v, rev) => {
    const r = await real.update(k, v, rev);
    if (lose-- > 0) throw new Error("TIMEOUT");
    return r;
  };
  const db = new Database(":memory:");
  const { c } = counters(db, lossy);
  try {
    await c.charge("cfo", "model", { input_tokens: 11, output_tokens: 2 });
    // The org record took it (before the answer was lost); the seat record may or may not
    // have been the lossy one — either way something is still owed locally.
    expect(c.pendingCount()).toBeGreaterThan(0);
    c.start();
    await waitFor("the retry settled", () => c.pendingCount() === 0);
    const orgBefore = await record(real, orgKey());
    expect(await record(real, seatKey("cfo"))).toMatchObject({ input_tokens: 11, output_tokens: 2, charges: 1 });
    // A later round adds once more, and nothing twice.
    await c.charge("cfo", "model", { input_tokens: 5, output_tokens: 1 });
    expect(await record(real, seatKey("cfo"))).toMatchObject({ input_tokens: 16, output_tokens: 3, charges: 2 });
    expect((await record(real, orgKey()))!.charges).toBe(orgBefore!.charges + 1);
  } finally {
    c.stop();
    db.close();
    await coord.close();
    await nc.close();
  }
}, 60_000);
