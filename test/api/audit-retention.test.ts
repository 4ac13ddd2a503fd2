// The audit log's named horizon (issue 16: "kept by the maintenance sweep for a named
// horizon"): node.db's rows go past AUDIT_RETENTION_MS on each node's maintenance tick (the
// sweep the node runs, startAuditTrim), and CREWLET_AUDIT, as the node creates it on a real
// nats-server, ages its entries out at the same horizon.
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { AuditLog, AUDIT_RETENTION_MS, AUDIT_TRIM_BATCH, startAuditTrim } from "../../src/api/audit.ts";
import { FakeClock } from "../../src/clock.ts";
import { MAINTENANCE_TICK_MS } from "../../src/duty/duties.ts";
import { memoryLogger } from "../../src/log.ts";
import { AUDIT_MAX_AGE_MS, ensureStreams } from "../../src/queue/streams.ts";
import { STREAM_AUDIT } from "../../src/queue/topics.ts";
import { startNats, type TestNats } from "../support/nats.ts";

const DAY_MS = 86_400_000;
let nats: TestNats;
beforeAll(async () => {
  nats = await startNats(1);
});
afterAll(async () => {
  await nats.stop();
});

test("the horizon is named: 90 days, the same for node.db and the fleet's stream", () => {
  expect(AUDIT_RETENTION_MS).toBe(90 * DAY_MS);
  expect(AUDIT_RETENTION_MS).toBe(AUDIT_MAX_AGE_MS);
});

test("each maintenance tick lets node.db's rows past the horizon go, in batches, and keeps the rest", async () => {
  const start = Date.UTC(2026, 0, 1);
  const clock = new FakeClock(start);
  const { log, sink } = memoryLogger("debug", clock);
  const db = new Database(":memory:");
  const audit = new AuditLog(db);
  const row = (at: number, path: string) => audit.append({ at, token_id: "ops", method: "POST", path, status: 200 });
  // An old backlog bigger than one batch, one row a day short of the horizon, one fresh.
  const old = AUDIT_TRIM_BATCH + 5;
  const insert = db.transaction(() => {
    for (let i = 0; i < old; i++) row(start - AUDIT_RETENTION_MS - DAY_MS + i, "/fleet/drain");
  });
  insert();
  row(start - AUDIT_RETENTION_MS + DAY_MS, "/agents/w/pause");
  row(start, "/agents/w/resume");
  const count = () => (db.query("SELECT COUNT(*) AS n FROM audit").get() as { n: number }).n;
  const timer = startAuditTrim({ audit, clock, log, every_ms: MAINTENANCE_TICK_MS });
  try {
    await clock.advance(MAINTENANCE_TICK_MS - 1);
    expect(count()).toBe(old + 2); // nothing before the first tick
    await clock.advance(1);
    expect(count()).toBe(old + 2 - AUDIT_TRIM_BATCH);
    await clock.advance(MAINTENANCE_TICK_MS);
    expect(count()).toBe(2);
    expect(audit.page({ limit: 10 }).entries.map((e) => e.action)).toEqual(["agent.resume", "agent.pause"]);
    expect(sink.events("audit_trimmed").map((l) => [l.fields.rows, l.fields.horizon_ms])).toEqual([
      [AUDIT_TRIM_BATCH, AUDIT_RETENTION_MS],
      [5, AUDIT_RETENTION_MS],
    ]);
    // A day later the pause row is past the horizon too; the fresh one stays.
    await clock.advance(DAY_MS);
    expect(audit.page({ limit: 10 }).entries.map((e) => e.action)).toEqual(["agent.resume"]);
    // A trim that fails is logged, and the sweep carries on at the next tick.
    db.close();
    await clock.advance(MAINTENANCE_TICK_MS);
    expect(sink.events("audit_trim_failed").length).toBeGreaterThanOrEqual(1);
  } finally {
    timer.cancel();
  }
});

test("CREWLET_AUDIT as the node creates it ages entries out at the horizon (and caps its bytes)", async () => {
  const nc = await nats.connect();
  try {
    const jsm = await nc.jetstreamManager();
    await ensureStreams(jsm, 1, memoryLogger("warn").log);
    const info = await jsm.streams.info(STREAM_AUDIT);
    expect(info.config.max_age).toBe(AUDIT_MAX_AGE_MS * 1_000_000);
    expect(String(info.config.retention)).toBe("limits");
    expect(info.config.max_bytes).toBeGreaterThan(0);
  } finally {
    await nc.close();
  }
});
