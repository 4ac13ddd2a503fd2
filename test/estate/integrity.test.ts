// Issue 12, item 1: a record no copy can apply never reaches the log. Each reproduction
// from the issue is refused with a 4xx naming the field (API) or a tool error the model
// reads (tools), on a data node and on a node holding no data, nothing is appended, and
// every domain stays in service.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { NatsConnection } from "nats";
import { createApp } from "../../src/api/app.ts";
import { TokenAuth } from "../../src/api/auth.ts";
import { builtinTools } from "../../src/agent/tools/builtins.ts";
import type { Tool } from "../../src/agent/tools/contract.ts";
import { companySchema } from "../../src/config/company.ts";
import { GRANTS } from "../../src/config/tier-a.ts";
import { systemClock } from "../../src/clock.ts";
import { MAX_MESSAGE_BYTES, MAX_WORK_BODY_BYTES } from "../../src/estate/records.ts";
import { EstateInvalid, type EstateRouter } from "../../src/estate/router.ts";
import { DOMAINS } from "../../src/estate/schema.ts";
import { StateLog } from "../../src/estate/statelog.ts";
import { silentLogger } from "../../src/log.ts";
import { buildOrg } from "../../src/org/org.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { removeTempDirs, startTestEstate, type TestEstate } from "./support.ts";

/** Generous: real nats-servers on a slow 2-core CI box. */
const TEST_TIMEOUT_MS = 60_000;
const OPS = "ops-token-0123456789abcdefghij";
/** Seventeen seats: one more than a DM may hold. */
const HANDLES = Array.from({ length: 17 }, (_, i) => `s${String(i).padStart(2, "0")}`);
const company = companySchema.parse({
  name: "Wide",
  roles: HANDLES.map((h) => ({ name: h, handle: h, kind: "agent" })),
  units: [{ name: "Engineering", id: "eng", project: "ENG", space: "eng-docs", channel: "eng", roles: HANDLES }],
});

let nats: TestNats;
const conns: NatsConnection[] = [];
let data: TestEstate;
let leaf: TestEstate;
let app: ReturnType<typeof createApp>;
const queue = new MemoryQueue({ clock: systemClock, log: silentLogger });

beforeAll(async () => {
  nats = await startNats(1);
  const [nc1, nc2] = [await nats.connect(), await nats.connect()];
  conns.push(nc1, nc2);
  data = await startTestEstate({ nc: nc1, nodeId: "a", dataNodes: () => ["a"], company });
  leaf = await startTestEstate({ nc: nc2, nodeId: "l", roles: ["seats"], dataNodes: () => ["a"], company });
  app = createApp({ auth: new TokenAuth([{ id: "ops", token: OPS, grants: GRANTS }]), log: silentLogger, health: { health: () => ({}), notReadyReason: () => null }, groups: data.estate.routeGroups });
  const made = await call("POST", "/work", { project: "ENG", title: "target" });
  expect(made.status).toBe(200);
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  await leaf?.estate.stop();
  await data?.estate.stop();
  for (const nc of conns) await nc.close();
  await queue.close();
  await nats?.stop();
  removeTempDirs();
}, TEST_TIMEOUT_MS);

function call(method: string, path: string, body?: unknown, raw?: string) {
  const headers: Record<string, string> = { authorization: `Bearer ${OPS}` };
  if (body !== undefined || raw !== undefined) headers["content-type"] = "application/json";
  return app.request(path, { method, headers, body: raw ?? (body === undefined ? undefined : JSON.stringify(body)) });
}

async function logEnds(): Promise<number[]> {
  const log = new StateLog(conns[0]!, silentLogger);
  return Promise.all(DOMAINS.map(async (d) => (await log.position(d)).last_seq));
}

async function expectAllInService(): Promise<void> {
  await data.estate.copy!.check();
  const h = data.estate.health();
  expect(h.in_service).toBe(true);
  for (const d of DOMAINS) expect(h.domains![d].state).toBe("level");
}

function toolsOver(router: EstateRouter): Map<string, Tool> {
  const tools = builtinTools({ org: () => buildOrg(company), estate: router, queue, clock: systemClock });
  return new Map(tools.map((t) => [t.name, t]));
}
const ctx = { seat: "s00", epoch: 1, turn_id: "t-1", signal: new AbortController().signal };

test("a comment of 256 KiB + 1 byte is 400 naming body; 256 KiB exactly is applied; nothing else reaches the log", async () => {
  const before = await logEnds();
  const over = await call("POST", "/work/ENG-1/comments", { body: "x".repeat(MAX_WORK_BODY_BYTES + 1) });
  expect(over.status).toBe(400);
  expect(await over.json()).toMatchObject({ error: { code: "invalid_input", field: "body" } });
  // Bytes, not characters: 131,073 two-byte characters are 262,146 bytes.
  const wide = await call("POST", "/work/ENG-1/comments", { body: "é".repeat(MAX_WORK_BODY_BYTES / 2 + 1) });
  expect(wide.status).toBe(400);
  expect(await logEnds()).toEqual(before);
  const exact = await call("POST", "/work/ENG-1/comments", { body: "x".repeat(MAX_WORK_BODY_BYTES) });
  expect(exact.status).toBe(200);
  await expectAllInService();
}, TEST_TIMEOUT_MS);

test("a DM to 17 members is 400 naming the channel id; 16 members is a DM", async () => {
  const before = await logEnds();
  const id = "dm." + HANDLES.join(".");
  const res = await call("POST", `/chat/channels/${id}/messages`, { body: "all of you" });
  expect(res.status).toBe(400);
  expect(await res.json()).toMatchObject({ error: { code: "invalid_input", field: "id" } });
  expect(await logEnds()).toEqual(before);
  const ok = await call("POST", `/chat/channels/dm.${HANDLES.slice(0, 16).join(".")}/messages`, { body: "sixteen of you" });
  expect(ok.status).toBe(200);
  await expectAllInService();
}, TEST_TIMEOUT_MS);

test("a tool call with due 'next friday', project 'eng' or a 20,000-character chat post is a tool error the model reads; nothing is written", async () => {
  const before = await logEnds();
  for (const router of [data.estate.router, leaf.estate.router]) {
    const tools = toolsOver(router);
    const due = await tools.get("work_create")!.call({ project: "ENG", title: "x", due: "next friday" }, ctx);
    expect(due).toMatchObject({ is_error: true, reached: false });
    expect(due.content).toContain("due");
    const project = await tools.get("work_create")!.call({ project: "eng", title: "x" }, ctx);
    expect(project).toMatchObject({ is_error: true, reached: false });
    expect(project.content).toContain("project");
    const update = await tools.get("work_update")!.call({ key: "ENG-1", due: "tomorrow" }, ctx);
    expect(update).toMatchObject({ is_error: true, reached: false });
    // 20,000 characters of four bytes each: 80,000 bytes against the 32 KiB limit.
    const post = await tools.get("chat_post")!.call({ channel: "eng", body: "😀".repeat(20_000) }, ctx);
    expect(post).toMatchObject({ is_error: true, reached: false });
    expect(post.content).toContain(`${MAX_MESSAGE_BYTES} bytes`);
  }
  expect(await logEnds()).toEqual(before);
  await expectAllInService();
}, TEST_TIMEOUT_MS);

test("the router's gate refuses a record no copy could apply, on a data node and on a node holding none", async () => {
  const before = await logEnds();
  for (const router of [data.estate.router, leaf.estate.router]) {
    const members = HANDLES.slice();
    const err = await router
      .write("chat", { op: "chat.post", channel: "dm." + members.join("."), author: "s00", body: "hi", thread_parent: null, mentions: [], dm: { members } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EstateInvalid);
    expect((err as EstateInvalid).field).toBe("dm.members");
    const due = await router
      .write("tracker", { op: "work.create", project: "ENG", type: "task", title: "x", body: "", status: "todo", priority: "none", assignee: null, reporter: "s00", parent: null, labels: [], due: "2026-02-30" })
      .catch((e: unknown) => e);
    expect((due as EstateInvalid).field).toBe("due");
    const big = await router
      .write("pages", { op: "page.put", container: "eng-docs", title: "Quotes", body: '"'.repeat(512 * 1024), labels: [], author: "s00", base_revision: null })
      .catch((e: unknown) => e);
    expect((big as EstateInvalid).code).toBe("too_large");
  }
  expect(await logEnds()).toEqual(before);
}, TEST_TIMEOUT_MS);

test("a record over one log message is 413 before anything is published", async () => {
  const before = await logEnds();
  // 524,000 quotes are under the page limit as text and the request is under 1 MiB, but
  // JSON-escaped in the record's envelope they leave no room for the message's headers.
  const res = await call("PUT", "/pages/eng-docs/Quotes", { body: '"'.repeat(524_000) });
  expect(res.status).toBe(413);
  expect(await res.json()).toMatchObject({ error: { code: "too_large" } });
  const huge = await call("POST", "/work/ENG-1/comments", { body: "x".repeat(1024 * 1024 + 10) });
  expect(huge.status).toBe(413);
  expect(await logEnds()).toEqual(before);
  await expectAllInService();
}, TEST_TIMEOUT_MS);
