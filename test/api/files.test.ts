// Files on work items, chat messages and pages through app.request(), on a real nats-server
// (the object store bucket) and a real estate copy: upload, list, download with the
// uploaded content type and bytes; grants; bad input answered 4xx naming the field with
// nothing stored and nothing appended to any log.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import type { NatsConnection } from "nats";
import { createApp } from "../../src/api/app.ts";
import { TokenAuth } from "../../src/api/auth.ts";
import { GRANTS } from "../../src/config/tier-a.ts";
import { LEASE_PROTOCOL } from "../../src/coord/contract.ts";
import { FILE_ROWS_PROTOCOL } from "../../src/api/routes/files.ts";
import { StateLog } from "../../src/estate/statelog.ts";
import { DOMAINS } from "../../src/estate/schema.ts";
import { silentLogger } from "../../src/log.ts";
import { FileStore, MAX_FILE_BYTES } from "../../src/objects/store.ts";
import { fileRoutes } from "../../src/api/routes/files.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { OPS_TOKEN, READER_TOKEN, estateApp, removeTempDirs, startTestEstate, type TestEstate } from "../estate/support.ts";

/** Generous: real nats-servers on a slow 2-core CI box. */
const TEST_TIMEOUT_MS = 60_000;
const OPS = OPS_TOKEN;
const READER = READER_TOKEN;

let nats: TestNats;
let nc: NatsConnection;
let node: TestEstate;
let app: ReturnType<typeof createApp>;
/** The live nodes' lowest lease protocol, as the routes are told it. */
let floor: number | null = LEASE_PROTOCOL;

beforeAll(async () => {
  nats = await startNats(1);
  nc = await nats.connect();
  node = await startTestEstate({ nc, nodeId: "a", dataNodes: () => ["a"], protocolFloor: async () => floor });
  await node.estate.files.open();
  app = estateApp(node);
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  await node?.estate.stop();
  await nc?.close();
  await nats?.stop();
  removeTempDirs();
}, TEST_TIMEOUT_MS);

function send(method: string, path: string, o: { body?: string | Uint8Array; type?: string; token?: string | null; headers?: Record<string, string> } = {}) {
  const headers: Record<string, string> = { ...o.headers };
  const token = o.token === undefined ? OPS : o.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (o.type !== undefined) headers["content-type"] = o.type;
  return app.request(path, { method, headers, ...(o.body !== undefined ? { body: o.body } : {}) });
}

async function json<T>(r: Response | Promise<Response>): Promise<T> {
  return (await (await r).json()) as T;
}

async function logEnds(): Promise<number[]> {
  const log = new StateLog(nc, silentLogger);
  return Promise.all(DOMAINS.map(async (d) => (await log.position(d)).last_seq));
}

async function newWorkItem(): Promise<string> {
  const created = await json<{ key: string }>(send("POST", "/work", { body: JSON.stringify({ project: "ENG", title: "with files" }), type: "application/json" }));
  return created.key;
}

interface FileRow {
  id: string;
  name: string;
  content_type: string;
  size: number;
  sha256: string;
  owner: string;
  by: string;
}

test("a work item's file: upload, list, download with its content type and bytes", async () => {
  const key = await newWorkItem();
  const png = new Uint8Array(300_000).map((_, i) => (i * 7) % 256); // > two 128 KiB chunks
  const up = await send("POST", `/work/${key}/files?name=${encodeURIComponent("screen shot.png")}`, { body: png, type: "image/png" });
  expect(up.status).toBe(200);
  const upped = (await up.json()) as { status: string; file: string; owner: string };
  expect(upped.status).toBe("applied");
  expect(upped.owner).toBe(`work:${key}`);

  const listed = await json<{ files: FileRow[] }>(send("GET", `/work/${key}/files`, { token: READER }));
  expect(listed.files).toHaveLength(1);
  const row = listed.files[0]!;
  expect(row).toMatchObject({ id: upped.file, name: "screen shot.png", content_type: "image/png", size: png.byteLength, by: "token:ops" });
  expect(row.sha256).toBe(createHash("sha256").update(png).digest("hex"));

  const down = await send("GET", `/work/${key}/files/${row.id}`, { token: READER });
  expect(down.status).toBe(200);
  expect(down.headers.get("content-type")).toBe("image/png");
  expect(down.headers.get("content-disposition")).toBe(`inline; filename*=UTF-8''screen%20shot.png`);
  expect(down.headers.get("x-content-type-options")).toBe("nosniff");
  expect(new Uint8Array(await down.arrayBuffer())).toEqual(png);
}, TEST_TIMEOUT_MS);

test("HTML downloads as an attachment; no content type is octet-stream", async () => {
  const key = await newWorkItem();
  const html = await json<{ file: string }>(send("POST", `/work/${key}/files?name=page.html`, { body: "<script>alert(1)</script>", type: "text/html; charset=UTF-8" }));
  const down = await send("GET", `/work/${key}/files/${html.file}`);
  expect(down.headers.get("content-type")).toBe("text/html; charset=utf-8");
  expect(down.headers.get("content-disposition")).toStartWith("attachment;");
  expect(down.headers.get("content-security-policy")).toContain("sandbox");
  const bare = await json<{ file: string }>(send("POST", `/work/${key}/files?name=blob.bin`, { body: new Uint8Array([1, 2, 3]) }));
  const got = await send("GET", `/work/${key}/files/${bare.file}`);
  expect(got.headers.get("content-type")).toBe("application/octet-stream");
}, TEST_TIMEOUT_MS);

test("a chat message's and a page's files", async () => {
  const posted = await json<{ message_id: string }>(send("POST", "/chat/channels/eng/messages", { body: JSON.stringify({ body: "see attached", author: "carol" }), type: "application/json" }));
  const up = await send("POST", `/chat/messages/${posted.message_id}/files?name=notes.txt`, { body: "hello files", type: "text/plain" });
  expect(up.status).toBe(200);
  const files = await json<{ files: FileRow[] }>(send("GET", `/chat/messages/${posted.message_id}/files`));
  expect(files.files.map((f) => f.name)).toEqual(["notes.txt"]);
  expect(await (await send("GET", `/chat/messages/${posted.message_id}/files/${files.files[0]!.id}`)).text()).toBe("hello files");

  expect((await send("PUT", "/pages/eng-docs/Runbook", { body: JSON.stringify({ body: "steps" }), type: "application/json" })).status).toBe(200);
  const onPage = await send("POST", "/pages/eng-docs/Runbook/files?name=diagram.txt", { body: "a -> b", type: "text/plain" });
  expect(onPage.status).toBe(200);
  const pageFiles = await json<{ files: FileRow[] }>(send("GET", "/pages/eng-docs/Runbook/files"));
  expect(pageFiles.files[0]).toMatchObject({ name: "diagram.txt", owner: "page:eng-docs/Runbook" });
}, TEST_TIMEOUT_MS);

test("an upload retried under one Idempotency-Key is one file", async () => {
  const key = await newWorkItem();
  const headers = { "idempotency-key": "upload-retry-0001" };
  const first = await json<{ file: string }>(send("POST", `/work/${key}/files?name=a.txt`, { body: "same bytes", type: "text/plain", headers }));
  const again = await send("POST", `/work/${key}/files?name=a.txt`, { body: "same bytes", type: "text/plain", headers });
  expect(again.status).toBe(200);
  expect(((await again.json()) as { file: string }).file).toBe(first.file);
  expect((await json<{ files: FileRow[] }>(send("GET", `/work/${key}/files`))).files).toHaveLength(1);
}, TEST_TIMEOUT_MS);

test("grants: no token 401, a reader cannot upload (403)", async () => {
  const key = await newWorkItem();
  expect((await send("GET", `/work/${key}/files`, { token: null })).status).toBe(401);
  expect((await send("POST", `/work/${key}/files?name=x.txt`, { body: "x", type: "text/plain", token: READER })).status).toBe(403);
}, TEST_TIMEOUT_MS);

test("bad input is a 4xx naming the field, with nothing stored and nothing on any log", async () => {
  const key = await newWorkItem();
  const objectsBefore = (await node.estate.files.list()).length;
  const before = await logEnds();
  const cases: { path: string; type?: string; body?: string | Uint8Array; headers?: Record<string, string>; status: number; field: string }[] = [
    { path: `/work/${key}/files`, type: "text/plain", body: "x", status: 400, field: "name" },
    { path: `/work/${key}/files?name=a%2Fb.txt`, type: "text/plain", body: "x", status: 400, field: "name" },
    { path: `/work/${key}/files?name=a.txt&extra=1`, type: "text/plain", body: "x", status: 400, field: "extra" },
    { path: `/work/${key}/files?name=a.txt`, type: "not a type", body: "x", status: 400, field: "content-type" },
    { path: `/work/ENG-99999/files?name=a.txt`, type: "text/plain", body: "x", status: 404, field: "key" },
    { path: `/work/nope/files?name=a.txt`, type: "text/plain", body: "x", status: 400, field: "key" },
    { path: `/chat/messages/no-such-message-1/files?name=a.txt`, type: "text/plain", body: "x", status: 404, field: "id" },
    { path: `/pages/eng-docs/Nowhere/files?name=a.txt`, type: "text/plain", body: "x", status: 404, field: "title" },
    { path: `/work/${key}/files?name=big.bin`, type: "application/octet-stream", body: "x", headers: { "content-length": String(MAX_FILE_BYTES + 1) }, status: 413, field: "body" },
    { path: `/work/${key}/files?name=big.bin`, type: "application/octet-stream", body: new Uint8Array(MAX_FILE_BYTES + 1), status: 413, field: "body" },
  ];
  for (const c of cases) {
    const r = await send("POST", c.path, { ...(c.type ? { type: c.type } : {}), ...(c.body !== undefined ? { body: c.body } : {}), ...(c.headers ? { headers: c.headers } : {}) });
    const body = (await r.json()) as { error: { field?: string; message: string } };
    expect({ path: c.path, status: r.status, field: body.error.field }).toEqual({ path: c.path, status: c.status, field: c.field });
  }
  expect((await send("GET", `/work/${key}/files/fl-000000000000000000000000`)).status).toBe(404);
  expect((await send("GET", `/work/${key}/files/not-an-id`)).status).toBe(400);
  expect(await logEnds()).toEqual(before);
  expect((await node.estate.files.list()).length).toBe(objectsBefore);
}, TEST_TIMEOUT_MS);

test("no file is attached while a node of an older build (a lower lease protocol) is live: 503, nothing stored", async () => {
  const key = await newWorkItem();
  const objectsBefore = (await node.estate.files.list()).length;
  const before = await logEnds();
  floor = FILE_ROWS_PROTOCOL - 1;
  try {
    const r = await send("POST", `/work/${key}/files?name=a.txt`, { body: "x", type: "text/plain" });
    expect(r.status).toBe(503);
    const body = (await r.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("files_unavailable");
    expect(body.error.message).toContain(`lease protocol ${FILE_ROWS_PROTOCOL - 1}`);
  } finally {
    floor = LEASE_PROTOCOL;
  }
  expect(await logEnds()).toEqual(before);
  expect((await node.estate.files.list()).length).toBe(objectsBefore);
  // A node of a build older than this one that reads file rows holds nothing back.
  floor = FILE_ROWS_PROTOCOL;
  try {
    expect((await send("POST", `/work/${key}/files?name=a.txt`, { body: "x", type: "text/plain" })).status).toBe(200);
  } finally {
    floor = LEASE_PROTOCOL;
  }
}, TEST_TIMEOUT_MS);

test("a file store that does not answer is a 503 to retry, with no row written", async () => {
  const key = await newWorkItem();
  const before = await logEnds();
  // A bucket nobody created, opened as a leaf opens it (adopt only): every call fails.
  const away = createApp({
    auth: new TokenAuth([{ id: "ops", token: OPS, grants: GRANTS }]),
    log: silentLogger,
    health: { health: () => ({}), notReadyReason: () => null },
    groups: [fileRoutes({ router: node.estate.router, files: new FileStore({ nc, bucket: "no_such_bucket", replicas: 1, creates: false }) })],
  });
  const r = await away.request(`/work/${key}/files?name=a.txt`, { method: "POST", headers: { authorization: `Bearer ${OPS}`, "content-type": "text/plain" }, body: "x" });
  expect(r.status).toBe(503);
  expect(((await r.json()) as { error: { code: string } }).error.code).toBe("files_unavailable");
  expect(await logEnds()).toEqual(before);
}, TEST_TIMEOUT_MS);

test("the dashboard refuses, before sending, what the node would: its limit is MAX_FILE_BYTES", async () => {
  const client = await Bun.file(new URL("../../src/api/dashboard/client/files.client.js", import.meta.url)).text();
  const m = /const MAX_UPLOAD_BYTES = ([\d\s*]+);/.exec(client);
  expect(m).not.toBeNull();
  expect(m![1]!.split("*").reduce((a, b) => a * Number(b.trim()), 1)).toBe(MAX_FILE_BYTES);
});
