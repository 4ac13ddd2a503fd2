// The audit log is the fleet's (issue 16): two nodes (each its own node.db and connection)
// on one real nats-server share CREWLET_AUDIT, so GET /audit on either lists both nodes'
// actions newest first, paged; an entry written while the broker is away stays in node.db
// and reaches the stream once after it returns, published by a restarted node.
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NatsConnection } from "nats";
import { createApp } from "../../src/api/app.ts";
import { AuditLog } from "../../src/api/audit.ts";
import { AuditPublisher, fleetAuditReader } from "../../src/api/audit-stream.ts";
import { TokenAuth } from "../../src/api/auth.ts";
import { auditGroup } from "../../src/api/routes/audit.ts";
import { systemClock } from "../../src/clock.ts";
import { memoryLogger } from "../../src/log.ts";
import { streamConfig, streamSpecs } from "../../src/queue/streams.ts";
import { STREAM_AUDIT } from "../../src/queue/topics.ts";
import { startNats, type TestNats } from "../support/nats.ts";

const TOKEN = "ops-token-0123456789abcdefgh";
let nats: TestNats;
let dir: string;
beforeAll(async () => {
  nats = await startNats(1);
  dir = mkdtempSync(join(tmpdir(), "crewlet-audit-fleet-"));
  const nc = await nats.connect();
  const jsm = await nc.jetstreamManager();
  await jsm.streams.add(streamConfig(streamSpecs().find((s) => s.name === STREAM_AUDIT)!, 1));
  await nc.close();
});
afterAll(async () => {
  await nats?.stop();
  rmSync(dir, { recursive: true, force: true });
});

type Page = { entries: { seq: number; node: string; token_id: string; action: string; path: string; status: number; outcome: string }[]; next: number | null };

async function nodeOf(id: string, nc: NatsConnection) {
  const db = new Database(join(dir, `${id}.db`), { create: true, strict: true });
  const audit = new AuditLog(db);
  const { log, sink } = memoryLogger("debug");
  const publisher = new AuditPublisher({ audit, js: nc.jetstream(), node: id, clock: systemClock, log });
  const reader = fleetAuditReader({ js: nc.jetstream(), jsm: await nc.jetstreamManager(), publisher });
  const app = createApp({
    auth: new TokenAuth([{ id: "ops", token: TOKEN, grants: ["state:read", "fleet:operate"] }]),
    log,
    health: { health: () => ({}), notReadyReason: () => null },
    groups: [auditGroup(reader)],
    audit: (e) => {
      audit.append({ ...e, at: Date.now() });
      void publisher.flush();
    },
  });
  const get = async (path: string) => (await app.request(path, { headers: { authorization: `Bearer ${TOKEN}` } }));
  const act = (path: string) => app.request(path, { method: "POST", headers: { authorization: `Bearer ${TOKEN}` } });
  return { db, audit, publisher, app, get, act, sink };
}

test("either node's GET /audit lists both nodes' actions newest first, paged; an entry made while the broker was away lands once after it is back", async () => {
  const ncA = await nats.connect();
  const ncB = await nats.connect();
  const a = await nodeOf("a", ncA);
  const b = await nodeOf("b", ncB);
  // Operator actions (unrouted here: a 404 is still a write request, audited as refused).
  await a.act("/fleet/drain");
  await b.act("/agents/cto/pause");
  await a.act("/agents/cto/resume");
  // A node's own entries are on the stream before its own reads; a peer's within its
  // publish (immediate, retried every 5 s): here, waited for.
  await a.publisher.flush();
  const all = (await (await b.get("/audit?limit=10")).json()) as Page;
  expect(all.entries.map((e) => [e.node, e.action])).toEqual([
    ["a", "agent.resume"],
    ["b", "agent.pause"],
    ["a", "fleet.drain"],
  ]);
  expect(all.entries.every((e) => e.token_id === "ops" && e.outcome === "refused")).toBe(true);
  // Paged from the other node, one at a time, the same order.
  const seen: string[] = [];
  let before: number | null = null;
  for (let i = 0; i < 5; i++) {
    const page = (await (await a.get(`/audit?limit=1${before ? `&before=${before}` : ""}`)).json()) as Page;
    seen.push(...page.entries.map((e) => `${e.node}:${e.action}`));
    before = page.next;
    if (before === null) break;
  }
  expect(seen).toEqual(["a:agent.resume", "b:agent.pause", "a:fleet.drain"]);

  // The broker goes away: a's next entry stays in its node.db; a's read is a 503, not an empty log.
  await nats.members[0]!.kill();
  await a.act("/agents/cto/stop");
  await a.publisher.flush();
  expect(a.audit.unpublished(10).map((e) => e.action)).toEqual(["agent.stop"]);
  expect(a.sink.events("audit_publish_deferred").length).toBeGreaterThan(0);
  expect((await a.get("/audit")).status).toBe(503);
  a.publisher.stop();
  a.db.close();
  b.db.close();
  await ncA.close().catch(() => undefined);
  await ncB.close().catch(() => undefined);

  // Broker back, node a restarted on its node.db: the entry is published at start, once.
  await nats.members[0]!.restart();
  const ncA2 = await nats.connect();
  const a2 = await nodeOf("a", ncA2);
  a2.publisher.start();
  try {
    const deadline = Date.now() + 30_000;
    while (a2.audit.unpublished(10).length > 0 && Date.now() < deadline) await Bun.sleep(50);
    expect(a2.audit.unpublished(10)).toEqual([]);
    await a2.publisher.flush();
    const after = (await (await a2.get("/audit?limit=10")).json()) as Page;
    expect(after.entries.map((e) => `${e.node}:${e.action}`)).toEqual(["a:agent.stop", "a:agent.resume", "b:agent.pause", "a:fleet.drain"]);
  } finally {
    a2.publisher.stop();
    a2.db.close();
    await ncA2.close();
  }
}, 120_000);
