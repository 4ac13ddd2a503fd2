// Issue 12, item 4: honest status codes. Booting or stopping → 503 with Retry-After (the
// probes still answer); a closed estate or a closed broker connection → 503 with
// Retry-After, never 500; an unrouted method on a known path → 405 with Allow, an unimplemented one elsewhere → 501;
// GET /pages pages past 500 with a cursor. (Over the broker's max payload → 413 is in
// test/estate/integrity.test.ts.)
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { NatsConnection } from "nats";
import { createApp, RETRY_AFTER_SECONDS } from "../../src/api/app.ts";
import { TokenAuth } from "../../src/api/auth.ts";
import { GRANTS } from "../../src/config/tier-a.ts";
import { silentLogger } from "../../src/log.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { removeTempDirs, startTestEstate, type TestEstate } from "../estate/support.ts";

/** Generous: real nats-servers on a slow 2-core CI box. */
const TEST_TIMEOUT_MS = 120_000;
const OPS = "ops-token-0123456789abcdefghij";
const auth = new TokenAuth([{ id: "ops", token: OPS, grants: GRANTS }]);
const health = { health: () => ({ ok: true }), notReadyReason: () => null };

let nats: TestNats;
const conns: NatsConnection[] = [];
let node: TestEstate;

beforeAll(async () => {
  nats = await startNats(1);
  const nc = await nats.connect();
  conns.push(nc);
  node = await startTestEstate({ nc, nodeId: "a", dataNodes: () => ["a"] });
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  await node?.estate.stop();
  for (const nc of conns) await nc.close().catch(() => {});
  await nats?.stop();
  removeTempDirs();
}, TEST_TIMEOUT_MS);

const H = { authorization: `Bearer ${OPS}`, "content-type": "application/json" };

test("booting and stopping: every route but the probes is 503 with Retry-After, naming which", async () => {
  let state: { code: "starting" | "stopping"; message: string } | null = { code: "starting", message: "node a is starting (estate)" };
  const app = createApp({ auth, log: silentLogger, health, groups: node.estate.routeGroups, unavailable: () => state });
  for (const [method, path] of [["GET", "/work"], ["POST", "/work"], ["GET", "/no/such/route"], ["DELETE", "/deadletters/1"]] as const) {
    const res = await app.request(path, { method, headers: H, body: method === "GET" ? undefined : "{}" });
    expect({ path, status: res.status }).toEqual({ path, status: 503 });
    expect(res.headers.get("retry-after")).toBe(String(RETRY_AFTER_SECONDS));
    expect(await res.json()).toMatchObject({ error: { code: "starting" } });
  }
  expect((await app.request("/health")).status).toBe(200);
  expect((await app.request("/ready")).status).toBe(200);
  expect((await app.request("/ready/")).status).toBe(200);
  state = { code: "stopping", message: "node a is stopping" };
  expect(await (await app.request("/work", { headers: H })).json()).toMatchObject({ error: { code: "stopping" } });
  state = null;
  expect((await app.request("/work", { headers: H })).status).toBe(200);
}, TEST_TIMEOUT_MS);

test("405 with Allow for a known path under another method, 501 for a method implemented nowhere, 404 for no path; over real HTTP too", async () => {
  const app = createApp({ auth, log: silentLogger, health, groups: node.estate.routeGroups });
  const del = await app.request("/work", { method: "DELETE", headers: H });
  expect(del.status).toBe(405);
  expect(del.headers.get("allow")).toBe("GET, POST");
  expect((await app.request("/work/ENG-1", { method: "PUT", headers: H })).status).toBe(405);
  expect((await app.request("/nowhere", { headers: H })).status).toBe(404);
  // A trailing slash is the same path: served, or refused naming what it takes — never
  // "GET is not allowed … allowed: GET".
  expect((await app.request("/work/", { headers: H })).status).toBe(200);
  const slashDel = await app.request("/work/", { method: "DELETE", headers: H });
  expect(slashDel.status).toBe(405);
  expect(slashDel.headers.get("allow")).toBe("GET, POST");
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => app.fetch(req) });
  try {
    const url = `http://127.0.0.1:${server.port}`;
    // A method the API implements nowhere, on a path it has: 405 naming what the path takes.
    const propfind = await fetch(`${url}/work`, { method: "PROPFIND", headers: H, signal: AbortSignal.timeout(10_000) });
    expect(propfind.status).toBe(405);
    expect(propfind.headers.get("allow")).toBe("GET, POST");
    // …on a path it does not have: 501.
    const nowhere = await fetch(`${url}/nowhere`, { method: "PROPFIND", headers: H, signal: AbortSignal.timeout(10_000) });
    expect(nowhere.status).toBe(501);
    expect(await nowhere.json()).toMatchObject({ error: { code: "not_implemented" } });
    expect((await fetch(`${url}/work`, { method: "PATCH", headers: H, body: "{}", signal: AbortSignal.timeout(10_000) })).status).toBe(405);
    // A method Bun's HTTP parser does not know never reaches the app: Bun closes the
    // connection at once (oven-sh/bun#6556). Not an answer, but never a hung connection.
    const started = Date.now();
    const brew = await fetch(`${url}/work`, { method: "BREW", headers: H, signal: AbortSignal.timeout(10_000) }).then(
      (r) => r.status,
      (e: Error) => e.name,
    );
    expect(brew).not.toBe("TimeoutError");
    expect(Date.now() - started).toBeLessThan(10_000);
  } finally {
    server.stop(true);
  }
}, TEST_TIMEOUT_MS);

test("GET /pages pages past 500 with a cursor", async () => {
  const app = createApp({ auth, log: silentLogger, health, groups: node.estate.routeGroups });
  const TOTAL = 520;
  for (let i = 0; i < TOTAL; i += 40) {
    await Promise.all(
      Array.from({ length: Math.min(40, TOTAL - i) }, (_, j) =>
        node.estate.router.write("pages", { op: "page.put", container: "eng-docs", title: `P${String(i + j).padStart(4, "0")}`, body: "b", labels: [], author: "a", base_revision: null }),
      ),
    );
  }
  const seen: string[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 10; pages++) {
    const res: Response = await app.request(`/pages?container=eng-docs&limit=500${cursor ? `&cursor=${cursor}` : ""}`, { headers: H });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { pages: { title: string }[]; next: string | null };
    seen.push(...body.pages.map((p) => p.title));
    cursor = body.next;
    if (cursor === null) break;
  }
  expect(seen.length).toBe(TOTAL);
  expect(new Set(seen).size).toBe(TOTAL);
  expect(seen).toEqual([...seen].sort());
  expect((await app.request("/pages?cursor=garbage", { headers: H })).status).toBe(400);
}, TEST_TIMEOUT_MS);

test("an estate closed under a stop, or a closed broker connection, is 503 with Retry-After — never 500", async () => {
  // A node holding no data whose connection is closed: nothing can be asked.
  const nc = await nats.connect();
  conns.push(nc);
  const leaf = await startTestEstate({ nc, nodeId: "l", roles: ["seats"], dataNodes: () => ["a"] });
  const leafApp = createApp({ auth, log: silentLogger, health, groups: leaf.estate.routeGroups });
  expect((await leafApp.request("/work", { headers: H })).status).toBe(200);
  await nc.close();
  for (const [method, path, body] of [["GET", "/work", undefined], ["POST", "/chat/channels/general/messages", { body: "x" }]] as const) {
    const res = await leafApp.request(path, { method, headers: H, body: body ? JSON.stringify(body) : undefined });
    expect({ path, status: res.status }).toEqual({ path, status: 503 });
    expect(res.headers.get("retry-after")).toBe(String(RETRY_AFTER_SECONDS));
  }
  await leaf.estate.stop();
  // A data node's estate closed under a stop (its sqlite closed): its own copy answers no more.
  const nc2 = await nats.connect();
  conns.push(nc2);
  const other = await startTestEstate({ nc: nc2, nodeId: "b", dataNodes: () => ["b"] });
  const app = createApp({ auth, log: silentLogger, health, groups: other.estate.routeGroups });
  await other.estate.stop();
  for (const [method, path, body] of [["GET", "/work", undefined], ["POST", "/work", { project: "ENG", title: "late" }]] as const) {
    const res = await app.request(path, { method, headers: H, body: body ? JSON.stringify(body) : undefined });
    expect({ path, status: res.status }).toEqual({ path, status: 503 });
    expect(res.headers.get("retry-after")).toBe(String(RETRY_AFTER_SECONDS));
  }
}, TEST_TIMEOUT_MS);

test("while this node's broker is gone, a write is 503 with Retry-After at once, and reads of its own copy still answer", async () => {
  const own = await startNats(1);
  try {
    const nc = await own.connect({ reconnect: true, maxReconnectAttempts: -1, reconnectTimeWait: 200 });
    conns.push(nc);
    const solo = await startTestEstate({ nc, nodeId: "s", dataNodes: () => ["s"] });
    const app = createApp({ auth, log: silentLogger, health, groups: solo.estate.routeGroups });
    expect((await app.request("/chat/channels/general/messages", { method: "POST", headers: H, body: JSON.stringify({ body: "up" }) })).status).toBe(200);
    await own.members[0]!.kill();
    for (let i = 0; i < 200 && (nc as unknown as { protocol: { connected: boolean } }).protocol.connected; i++) await Bun.sleep(25);
    const started = Date.now();
    const res = await app.request("/chat/channels/general/messages", { method: "POST", headers: H, body: JSON.stringify({ body: "down" }) });
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe(String(RETRY_AFTER_SECONDS));
    expect(Date.now() - started).toBeLessThan(5_000);
    expect((await app.request("/chat/channels/general/messages", { headers: H })).status).toBe(200);
    await solo.estate.stop();
  } finally {
    await own.stop();
  }
}, TEST_TIMEOUT_MS);
