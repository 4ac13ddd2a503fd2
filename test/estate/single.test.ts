// One data node on one nats-server: the same path a one-box company runs.
import { afterAll, beforeAll, expect, test } from "bun:test";

/** Generous: real nats-servers and child processes on a slow 2-core CI box. */
const TEST_TIMEOUT_MS = 60_000;
import type { NatsConnection } from "nats";
import { startNats, type TestNats } from "../support/nats.ts";
import { removeTempDirs, startTestEstate, type TestEstate } from "./support.ts";

let nats: TestNats;
let nc: NatsConnection;
let a: TestEstate;

beforeAll(async () => {
  nats = await startNats(1);
  nc = await nats.connect();
  a = await startTestEstate({ nc, nodeId: "solo", dataNodes: () => ["solo"] });
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  await a?.estate.stop();
  await nc?.close();
  await nats?.stop();
  removeTempDirs();
}, TEST_TIMEOUT_MS);

test("seeded from the company: projects, containers, channels", async () => {
  const r = a.estate.router;
  expect((await r.read({ q: "projects.list" })).map((p) => p.key)).toEqual(["ENG", "GEN", "SAL"]);
  expect((await r.read({ q: "pages.containers" })).map((c) => c.key)).toEqual(["company", "eng-docs"]);
  expect((await r.read({ q: "chat.channels" })).map((c) => c.id)).toEqual(["eng", "general", "sales"]);
}, TEST_TIMEOUT_MS);

test("a write answers applied with its position and the key the log order gave it", async () => {
  const r = a.estate.router;
  const one = await r.write("tracker", {
    op: "work.create", project: "ENG", type: "task", title: "first", body: "", status: "todo", priority: "none",
    assignee: null, reporter: "carol", parent: null, labels: [], due: null,
  });
  expect(one.status).toBe("applied");
  if (one.status !== "applied") return;
  expect(one.outcome).toMatchObject({ ok: true, key: "ENG-1" });
  const two = await r.write("tracker", {
    op: "work.create", project: "ENG", type: "bug", title: "second", body: "b", status: "todo", priority: "high",
    assignee: "alice", reporter: "carol", parent: "ENG-1", labels: ["x"], due: "2026-03-01",
  });
  expect(two.status === "applied" && two.outcome).toMatchObject({ ok: true, key: "ENG-2" });
  const got = await r.read({ q: "work.get", key: "ENG-2" });
  expect(got?.item).toMatchObject({ title: "second", parent: "ENG-1", labels: ["x"], assignee: "alice" });
  expect(got?.activity.map((x) => x.kind)).toEqual(["created"]);
}, TEST_TIMEOUT_MS);

test("a retried operation id is applied once", async () => {
  const { makeRecord } = await import("../../src/estate/records.ts");
  const rec = makeRecord("chat", { op: "chat.post", channel: "general", author: "carol", body: "once", thread_parent: null, mentions: [], dm: null }, Date.now(), "solo");
  const first = await a.estate.router.writeRecord(rec);
  const again = await a.estate.router.writeRecord(rec);
  expect(first.status).toBe("applied");
  expect(again.status).toBe("applied");
  if (first.status === "applied" && again.status === "applied") expect(again.position).toBe(first.position);
  const msgs = await a.estate.router.read({ q: "chat.messages", channel: "general" });
  expect(msgs.messages.filter((m) => m.body === "once")).toHaveLength(1);
}, TEST_TIMEOUT_MS);

test("full-text search ranks and snippets", async () => {
  const r = a.estate.router;
  await r.write("pages", { op: "page.put", container: "eng-docs", title: "Deploying", body: "How we deploy the service to production.", labels: [], author: "alice", base_revision: null });
  await r.write("pages", { op: "page.put", container: "eng-docs", title: "Lunch", body: "Where to eat.", labels: [], author: "alice", base_revision: null });
  const found = await r.read({ q: "pages.search", text: "deploy" });
  expect(found.searched).toBe(true);
  expect(found.hits.map((h) => h.title)).toEqual(["Deploying"]);
  expect(found.hits[0]!.snippet).toContain("[deploy]");
  const stale = await r.write("pages", { op: "page.put", container: "eng-docs", title: "Lunch", body: "x", labels: [], author: "bob", base_revision: 0 });
  expect(stale.status === "applied" && stale.outcome).toMatchObject({ ok: false, code: "revision_conflict" });
}, TEST_TIMEOUT_MS);
