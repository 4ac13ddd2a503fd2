// Issue 12, item 5: every write route accepts an Idempotency-Key; a retry with the same
// key — after a lost answer (504, a timeout) or sent to another node — answers the first
// outcome and writes nothing new. Two data nodes, each with its own API, on one broker and
// one coordination store; a third API on node b remembers nothing, so the op id derived
// from the key is shown to dedupe on its own.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { NatsConnection } from "nats";
import { createApp } from "../../src/api/app.ts";
import { TokenAuth } from "../../src/api/auth.ts";
import { REPLAYED_HEADER, scopeOf } from "../../src/api/idempotency.ts";
import { systemClock } from "../../src/clock.ts";
import { GRANTS } from "../../src/config/tier-a.ts";
import { createCoordination, type CoordinationHandle } from "../../src/coord/index.ts";
import { DOMAINS } from "../../src/estate/schema.ts";
import { StateLog } from "../../src/estate/statelog.ts";
import { silentLogger } from "../../src/log.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { removeTempDirs, startTestEstate, type TestEstate } from "./support.ts";

/** Generous: real nats-servers on a slow 2-core CI box. */
const TEST_TIMEOUT_MS = 60_000;
const OPS = "ops-token-0123456789abcdefghij";
const auth = new TokenAuth([{ id: "ops", token: OPS, grants: GRANTS }]);

let nats: TestNats;
const conns: NatsConnection[] = [];
const coords: CoordinationHandle[] = [];
const nodes: TestEstate[] = [];
type App = ReturnType<typeof createApp>;
let appA: App;
let appB: App;
/** Node b's API without a remembered-answer store: only the derived op id dedupes. */
let appBare: App;

beforeAll(async () => {
  nats = await startNats(1);
  for (const id of ["a", "b"]) {
    const nc = await nats.connect();
    conns.push(nc);
    nodes.push(await startTestEstate({ nc, nodeId: id, dataNodes: () => ["a", "b"] }));
    coords.push(await createCoordination({ type: "embedded-kv", nc, replicas: 1, clock: systemClock, log: silentLogger }));
  }
  const mk = (i: number, slot: boolean) =>
    createApp({ auth, log: silentLogger, health: { health: () => ({}), notReadyReason: () => null }, groups: nodes[i]!.estate.routeGroups, idempotencySlot: slot ? coords[i]!.slot("claims") : null });
  appA = mk(0, true);
  appB = mk(1, true);
  appBare = mk(1, false);
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  for (const n of nodes) await n.estate.stop();
  for (const c of coords) await c.close();
  for (const nc of conns) await nc.close();
  await nats?.stop();
  removeTempDirs();
}, TEST_TIMEOUT_MS);

function call(app: App, method: string, path: string, body: unknown, key?: string) {
  const headers: Record<string, string> = { authorization: `Bearer ${OPS}`, "content-type": "application/json" };
  if (key !== undefined) headers["idempotency-key"] = key;
  return app.request(path, { method, headers, body: JSON.stringify(body) });
}

async function logEnds(): Promise<number[]> {
  const log = new StateLog(conns[0]!, silentLogger);
  return Promise.all(DOMAINS.map(async (d) => (await log.position(d)).last_seq));
}

/** Messages in a channel as node `i` reads them (its router's floor covers its own writes). */
async function messagesIn(channel: string, i = 0): Promise<number> {
  const page = await nodes[i]!.estate.router.read({ q: "chat.messages", channel, limit: 500 });
  return page.messages.length;
}

test("a chat post retried with its key on another node answers the first outcome and writes nothing new", async () => {
  const key = crypto.randomUUID();
  const first = await call(appA, "POST", "/chat/channels/general/messages", { body: "once" }, key);
  expect(first.status).toBe(200);
  const a = (await first.json()) as { message_id: string; position: number };
  const ends = await logEnds();
  const count = await messagesIn("general");

  const again = await call(appB, "POST", "/chat/channels/general/messages", { body: "once" }, key);
  expect(again.status).toBe(200);
  expect(again.headers.get(REPLAYED_HEADER)).toBe("true");
  expect(await again.json()).toEqual(a);
  // Node b remembering nothing: the op id the key names is already on the log and applied.
  const bare = await call(appBare, "POST", "/chat/channels/general/messages", { body: "once" }, key);
  expect(bare.status).toBe(200);
  expect(((await bare.json()) as { message_id: string }).message_id).toBe(a.message_id);
  expect(await logEnds()).toEqual(ends);
  expect(await messagesIn("general")).toBe(count);

  // The same key for another body is another request: refused, nothing written.
  const reused = await call(appB, "POST", "/chat/channels/general/messages", { body: "twice" }, key);
  expect(reused.status).toBe(422);
  expect(await reused.json()).toMatchObject({ error: { code: "idempotency_key_reused", field: "Idempotency-Key" } });
  // Without a key, the same body is a new message.
  expect((await call(appB, "POST", "/chat/channels/general/messages", { body: "once" })).status).toBe(200);
  expect(await messagesIn("general", 1)).toBe(count + 1);
}, TEST_TIMEOUT_MS);

test("after an answer that never arrived (the write landed, the client saw a 504 or a timeout), the retry elsewhere returns it", async () => {
  const key = crypto.randomUUID();
  // The first attempt reached the log through node a, and its answer was lost.
  const { op_id } = scopeOf("ops", "POST", "/chat/channels/general/messages", key);
  const landed = await nodes[0]!.estate.router.write("chat", { op: "chat.post", channel: "general", author: "token:ops", body: "lost answer", thread_parent: null, mentions: [], dm: null }, { op_id });
  expect(landed.status).toBe("applied");
  const count = await messagesIn("general");
  const ends = await logEnds();
  const retry = await call(appBare, "POST", "/chat/channels/general/messages", { body: "lost answer" }, key);
  expect(retry.status).toBe(200);
  expect(((await retry.json()) as { message_id: string }).message_id).toBe(op_id);
  expect(await messagesIn("general")).toBe(count);
  expect(await logEnds()).toEqual(ends);
}, TEST_TIMEOUT_MS);

test("the same key sent to both nodes at once is one write", async () => {
  const key = crypto.randomUUID();
  const count = await messagesIn("general", 1);
  const [x, y] = await Promise.all([
    call(appA, "POST", "/chat/channels/general/messages", { body: "racing" }, key),
    call(appBare, "POST", "/chat/channels/general/messages", { body: "racing" }, key),
  ]);
  expect([x.status, y.status]).toEqual([200, 200]);
  const [mx, my] = [(await x.json()) as { message_id: string }, (await y.json()) as { message_id: string }];
  expect(mx.message_id).toBe(my.message_id);
  expect(await messagesIn("general", 1)).toBe(count + 1);
}, TEST_TIMEOUT_MS);

test("every estate write route honours the key across nodes: work create, patch, comment, page put", async () => {
  const steps: [string, string, unknown][] = [
    ["POST", "/work", { project: "ENG", title: "idempotent item" }],
    ["PATCH", "/work/ENG-1", { status: "in_progress" }],
    ["POST", "/work/ENG-1/comments", { body: "one comment" }],
    ["PUT", "/pages/eng-docs/Idem", { body: "v1" }],
  ];
  for (const [method, path, body] of steps) {
    const key = crypto.randomUUID();
    const first = await call(appA, method, path, body, key);
    expect({ path, status: first.status }).toEqual({ path, status: 200 });
    const firstBody = await first.json();
    const ends = await logEnds();
    for (const app of [appB, appBare]) {
      const again = await call(app, method, path, body, key);
      expect({ path, status: again.status }).toEqual({ path, status: 200 });
      expect(await again.json()).toEqual(firstBody);
    }
    expect(await logEnds()).toEqual(ends);
  }
  const item = await nodes[1]!.estate.router.read({ q: "work.get", key: "ENG-1" });
  expect(item!.comments.length).toBe(1);
  const page = await nodes[1]!.estate.router.read({ q: "pages.get", container: "eng-docs", title: "Idem" });
  expect(page!.revision).toBe(1);
}, TEST_TIMEOUT_MS);

test("an unusable key is a 400 naming the header; reads ignore the header", async () => {
  const bad = await call(appA, "POST", "/chat/channels/general/messages", { body: "x" }, "has space");
  expect(bad.status).toBe(400);
  expect(await bad.json()).toMatchObject({ error: { field: "Idempotency-Key" } });
  const long = await call(appA, "POST", "/chat/channels/general/messages", { body: "x" }, "k".repeat(201));
  expect(long.status).toBe(400);
  const read = await appA.request("/chat/channels", { headers: { authorization: `Bearer ${OPS}`, "idempotency-key": "whatever" } });
  expect(read.status).toBe(200);
}, TEST_TIMEOUT_MS);
