// The work, pages and chat route groups through app.request(): grants, happy paths, and
// bad input — malformed or oversized bodies, unknown channel or work item, wrong types —
// answered 4xx naming the field with nothing appended to any log.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { NatsConnection } from "nats";
import { createApp } from "../../src/api/app.ts";
import { StateLog } from "../../src/estate/statelog.ts";
import { DOMAINS } from "../../src/estate/schema.ts";
import { silentLogger } from "../../src/log.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { OPS_TOKEN, READER_TOKEN, estateApp, removeTempDirs, startTestEstate, type TestEstate } from "./support.ts";

/** Generous: real nats-servers on a slow 2-core CI box. */
const TEST_TIMEOUT_MS = 60_000;
const OPS = OPS_TOKEN;
const READER = READER_TOKEN;

let nats: TestNats;
let nc: NatsConnection;
let node: TestEstate;
let app: ReturnType<typeof createApp>;

beforeAll(async () => {
  nats = await startNats(1);
  nc = await nats.connect();
  node = await startTestEstate({ nc, nodeId: "a", dataNodes: () => ["a"] });
  app = estateApp(node);
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  await node?.estate.stop();
  await nc?.close();
  await nats?.stop();
  removeTempDirs();
}, TEST_TIMEOUT_MS);

function call(method: string, path: string, body?: unknown, opts: { token?: string | null; raw?: string; type?: string } = {}) {
  const headers: Record<string, string> = {};
  const token = opts.token === undefined ? OPS : opts.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (body !== undefined || opts.raw !== undefined) headers["content-type"] = opts.type ?? "application/json";
  return app.request(path, { method, headers, body: opts.raw ?? (body === undefined ? undefined : JSON.stringify(body)) });
}

async function logEnds(): Promise<number[]> {
  const log = new StateLog(nc, silentLogger);
  return Promise.all(DOMAINS.map(async (d) => (await log.position(d)).last_seq));
}

test("no token is 401, a token without the grant is 403", async () => {
  expect((await call("GET", "/work", undefined, { token: null })).status).toBe(401);
  expect((await call("GET", "/work", undefined, { token: READER })).status).toBe(200);
  const denied = await call("POST", "/work", { title: "x" }, { token: READER });
  expect(denied.status).toBe(403);
  expect(await denied.json()).toMatchObject({ error: { code: "forbidden" } });
}, TEST_TIMEOUT_MS);

test("work: create, read, patch, comment, list", async () => {
  const created = await call("POST", "/work", { project: "ENG", title: "Ship it", assignee: "alice", labels: ["b", "a"] });
  expect(created.status).toBe(200);
  const c = (await created.json()) as { status: string; key: string; position: number };
  expect(c).toMatchObject({ status: "applied", key: "ENG-1" });
  expect(c.position).toBeGreaterThan(0);
  const patched = await call("PATCH", "/work/ENG-1", { status: "in_progress" });
  expect(await patched.json()).toMatchObject({ status: "applied", changed: ["status"] });
  expect((await call("POST", "/work/ENG-1/comments", { body: "started" })).status).toBe(200);
  const got = (await (await call("GET", "/work/ENG-1")).json()) as { item: { status: string; labels: string[] }; comments: { author: string }[] };
  expect(got.item).toMatchObject({ status: "in_progress", labels: ["a", "b"] });
  expect(got.comments[0]!.author).toBe("token:ops");
  const list = (await (await call("GET", "/work?project=ENG&status=in_progress")).json()) as { items: { key: string }[] };
  expect(list.items.map((i) => i.key)).toEqual(["ENG-1"]);
}, TEST_TIMEOUT_MS);

test("pages: put, get, search", async () => {
  expect((await call("PUT", "/pages/eng-docs/Runbook", { body: "Restart the frobnicator gently." })).status).toBe(200);
  const page = (await (await call("GET", "/pages/eng-docs/Runbook")).json()) as { revision: number };
  expect(page.revision).toBe(1);
  const found = (await (await call("GET", "/pages?q=frobnicator")).json()) as { searched: boolean; hits: { title: string }[] };
  expect(found).toMatchObject({ searched: true, hits: [{ title: "Runbook" }] });
  const conflict = await call("PUT", "/pages/eng-docs/Runbook", { body: "x", base_revision: 0 });
  expect(conflict.status).toBe(409);
  expect(await conflict.json()).toMatchObject({ error: { code: "revision_conflict", field: "base_revision" } });
  // The spaces, for the dashboard's knowledge browser.
  const spaces = (await (await call("GET", "/pages/containers", undefined, { token: READER })).json()) as { containers: { key: string; name: string }[] };
  expect(spaces.containers.map((c) => c.key)).toContain("eng-docs");
}, TEST_TIMEOUT_MS);

test("search: GET /work?q= and GET /chat/messages?q= rank with snippets; bad input is a 400 naming the field, no token a 401", async () => {
  expect((await call("POST", "/work", { project: "ENG", title: "Tune the marmoset cache", body: "it thrashes" })).status).toBe(200);
  expect((await call("POST", "/chat/channels/general/messages", { body: "the marmoset cache thrashes again" })).status).toBe(200);
  const work = (await (await call("GET", "/work?q=marmoset%20cache&project=ENG", undefined, { token: READER })).json()) as { searched: boolean; hits: { title: string; snippet: string }[] };
  expect(work).toMatchObject({ searched: true, hits: [{ title: "Tune the marmoset cache" }] });
  const chat = (await (await call("GET", "/chat/messages?q=marmoset&channel=general", undefined, { token: READER })).json()) as { searched: boolean; hits: { channel: string; snippet: string }[] };
  expect(chat).toMatchObject({ searched: true, hits: [{ channel: "general", snippet: "the [marmoset] cache thrashes again" }] });
  expect((await call("GET", "/chat/messages?q=marmoset", undefined, { token: null })).status).toBe(401);
  expect((await call("GET", "/work?q=marmoset", undefined, { token: null })).status).toBe(401);
  const bad: [string, string][] = [
    ["/work?q=", "q"],
    ["/work?q=x&after=3", "after"],
    ["/work?q=x&limit=101", "limit"],
    [`/work?q=${"x".repeat(501)}`, "q"],
    ["/chat/messages", "q"],
    ["/chat/messages?q=x&channel=Not%20A%20Channel", "channel"],
    ["/chat/messages?q=x&limit=0", "limit"],
    ["/chat/messages?q=x&sort=new", "sort"],
  ];
  for (const [path, field] of bad) {
    const res = await call("GET", path);
    expect({ path, status: res.status }).toEqual({ path, status: 400 });
    expect(((await res.json()) as { error: { field?: string } }).error.field).toBe(field);
  }
}, TEST_TIMEOUT_MS);

test("chat: channels, post with mentions, a DM opened by its first message, paging", async () => {
  const channels = (await (await call("GET", "/chat/channels")).json()) as { channels: { id: string }[] };
  expect(channels.channels.map((c) => c.id)).toEqual(["eng", "general", "sales"]);
  const posted = await call("POST", "/chat/channels/eng/messages", { body: "hey @alice, mail me at x@bob.com", author: "carol" });
  expect(posted.status).toBe(200);
  const dm = await call("POST", "/chat/channels/dm.alice.carol/messages", { body: "private", author: "carol" });
  expect(dm.status).toBe(200);
  for (let i = 0; i < 3; i++) await call("POST", "/chat/channels/eng/messages", { body: `n${i}` });
  const page1 = (await (await call("GET", "/chat/channels/eng/messages?limit=2")).json()) as { messages: { body: string; mentions: string[] }[]; next: number };
  expect(page1.messages[0]).toMatchObject({ mentions: ["alice"] });
  const page2 = (await (await call("GET", `/chat/channels/eng/messages?limit=2&cursor=${page1.next}`)).json()) as { messages: { body: string }[] };
  expect(page2.messages.map((m) => m.body)).toEqual(["n1", "n2"]);
}, TEST_TIMEOUT_MS);

test("bad input is a 4xx naming the field, and nothing is written", async () => {
  const before = await logEnds();
  const cases: [string, string, unknown, { raw?: string; type?: string }, number, string | undefined][] = [
    ["POST", "/work", undefined, { raw: "{not json" }, 400, undefined],
    ["POST", "/work", { title: 5 }, {}, 400, "title"],
    ["POST", "/work", { title: "ok", status: "finished" }, {}, 400, "status"],
    ["POST", "/work", { title: "ok", surprise: 1 }, {}, 400, undefined],
    ["POST", "/work", { title: "ok", project: "NOPE" }, {}, 404, "project"],
    ["POST", "/work", { title: "ok", parent: "ENG-999" }, {}, 404, "parent"],
    ["POST", "/work", { title: "x".repeat(2 * 1024 * 1024) }, {}, 413, undefined],
    ["POST", "/work", { title: "ok" }, { type: "text/plain" }, 415, undefined],
    ["PATCH", "/work/ENG-999", { status: "done" }, {}, 404, "key"],
    ["PATCH", "/work/not-a-key", { status: "done" }, {}, 400, "key"],
    ["PATCH", "/work/ENG-1", {}, {}, 400, undefined],
    ["POST", "/work/ENG-999/comments", { body: "hi" }, {}, 404, "key"],
    ["POST", "/work/ENG-1/comments", { body: "" }, {}, 400, "body"],
    ["PUT", "/pages/no-such/Title", { body: "x" }, {}, 404, "container"],
    ["PUT", "/pages/eng-docs/Title", { body: 7 }, {}, 400, "body"],
    ["POST", "/chat/channels/nope/messages", { body: "hi" }, {}, 404, "id"],
    ["POST", "/chat/channels/dm.alice.mallory/messages", { body: "hi" }, {}, 404, "id"],
    ["POST", "/chat/channels/eng/messages", { body: "x".repeat(32 * 1024 + 1) }, {}, 400, "body"],
    ["POST", "/chat/channels/eng/messages", { body: "hi", thread_parent: "00000000-0000-0000-0000-000000000000" }, {}, 404, "thread_parent"],
    ["POST", "/chat/channels/eng/messages", { body: ["hi"] }, {}, 400, "body"],
    ["GET", "/chat/channels/nope/messages", undefined, {}, 404, "id"],
    ["GET", "/work?limit=0", undefined, {}, 400, "limit"],
  ];
  for (const [method, path, body, opts, status, field] of cases) {
    const res = await call(method, path, body, opts);
    const json = (await res.json()) as { error?: { code: string; field?: string } };
    expect({ method, path, status: res.status }).toEqual({ method, path, status });
    expect(json.error?.code).toBeString();
    if (field !== undefined) expect({ path, field: json.error?.field }).toEqual({ path, field });
  }
  expect(await logEnds()).toEqual(before);
}, TEST_TIMEOUT_MS);

test("CLI: chat post and work list talk HTTP to a running node", async () => {
  const { runChatCommand } = await import("../../src/cli/chat.ts");
  const { runWorkCommand } = await import("../../src/cli/work.ts");
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: app.fetch });
  const url = `http://127.0.0.1:${server.port}`;
  const logged: string[] = [];
  const origLog = console.log;
  const origErr = console.error;
  console.log = (...a: unknown[]) => void logged.push(a.join(" "));
  console.error = (...a: unknown[]) => void logged.push(a.join(" "));
  try {
    expect(await runChatCommand(["post", "general", "hello from the cli", "--url", url, "--token", OPS])).toBe(0);
    expect(await runChatCommand(["post", "nope", "x", "--url", url, "--token", OPS])).toBe(1);
    expect(await runWorkCommand(["list", "--url", url, "--token", OPS, "--project", "ENG"])).toBe(0);
    expect(await runWorkCommand(["list", "--url", url, "--token", "wrong-token-0123456789abcdef"])).toBe(1);
    expect(await runWorkCommand(["search", "ship", "--url", url, "--token", OPS])).toBe(0);
    expect(await runChatCommand(["search", "cli", "--channel", "general", "--url", url, "--token", OPS])).toBe(0);
    expect(await runChatCommand(["search", "zzzunmatched", "--url", url, "--token", OPS])).toBe(0);
  } finally {
    console.log = origLog;
    console.error = origErr;
    server.stop(true);
  }
  expect(logged[0]).toMatch(/^posted to #general: message /);
  expect(logged[1]).toMatch(/no channel nope/);
  expect(logged[2]).toMatch(/KEY\s+STATUS.*\nENG-1\s+in_progress/);
  expect(logged[3]).toMatch(/Authorization/);
  expect(logged[4]).toMatch(/^ENG-1\s+in_progress\s+Ship it/);
  expect(logged[5]).toMatch(/^#general\s+token:ops: hello from the \[cli\]/);
  expect(logged[6]).toBe("no messages matched");
  const msgs = await node.estate.router.read({ q: "chat.messages", channel: "general" });
  expect(msgs.messages.map((m) => m.body)).toContain("hello from the cli");
  const { UsageError } = await import("../../src/cli/args.ts");
  await expect(runChatCommand(["post", "general"])).rejects.toBeInstanceOf(UsageError);
  await expect(runWorkCommand(["search"])).rejects.toBeInstanceOf(UsageError);
  await expect(runWorkCommand(["list", "extra"])).rejects.toBeInstanceOf(UsageError);
  await expect(runChatCommand(["search"])).rejects.toBeInstanceOf(UsageError);
}, TEST_TIMEOUT_MS);
