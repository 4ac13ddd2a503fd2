// A finished run's diff and output as files, on a real nats-server (the crewlet_files
// bucket) and a real estate copy: on the seat's message in the run's thread, or on the work
// item the work came from; a report made again (its holder died) names the same two files
// once; a run with nowhere to put them stores nothing.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { NatsConnection } from "nats";
import { memoryLogger } from "../../src/log.ts";
import { artifactFileId, runArtifacts, storeRunArtifacts } from "../../src/sandbox/artifacts.ts";
import type { RunRecord } from "../../src/sandbox/runs.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { removeTempDirs, startTestEstate, type TestEstate } from "../estate/support.ts";

const TEST_TIMEOUT_MS = 60_000;
let nats: TestNats;
let nc: NatsConnection;
let node: TestEstate;

beforeAll(async () => {
  nats = await startNats(1);
  nc = await nats.connect();
  node = await startTestEstate({ nc, nodeId: "a", dataNodes: () => ["a"] });
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  await node?.estate.stop();
  await nc?.close();
  await nats?.stop();
  removeTempDirs();
}, TEST_TIMEOUT_MS);

function finished(over: Partial<RunRecord>): RunRecord {
  return {
    v: 1, id: "run-00000001", seat: "alice", engine: "fake", task: "fix the build", conversation: "chat:eng:m1", from: "carol",
    owner: "a:1", owner_epoch: 1, node: "a", pid: null, state: "done", question: null, answer: null, cancel: null,
    result: { outcome: "succeeded", exit_code: 0, reason: "", output_tail: "built\nok\n", output_bytes: 9, diff: "--- a/x\n+++ b/x\n+hello\n", commits: [], summary: "" },
    reported: false, created_at: 1, updated_at: 1, ...over,
  };
}

const ports = () => ({ files: node.estate.files, estate: node.estate.router, log: memoryLogger("debug").log });

test("a run from a thread: its diff and output on the seat's message there, once however often reported", async () => {
  const root = await node.estate.router.write("chat", { op: "chat.post", channel: "eng", author: "carol", body: "@alice fix the build", thread_parent: null, mentions: ["alice"], dm: null });
  expect(root.status).toBe("applied");
  const rec = finished({ id: "run-thread-0001", conversation: `chat:eng:${root.op_id}` });
  const first = await storeRunArtifacts(ports(), rec);
  const again = await storeRunArtifacts(ports(), rec);
  expect(first).toEqual([artifactFileId(rec.id, "diff"), artifactFileId(rec.id, "output")]);
  expect(again).toEqual(first);
  const message = await node.estate.router.read({ q: "chat.message", id: `run-${rec.id}-files` });
  expect(message).toMatchObject({ author: "alice", thread_parent: root.op_id, channel: "eng" });
  const files = await node.estate.router.read({ q: "chat.files", message: `run-${rec.id}-files` });
  expect(files.map((f) => [f.name, f.content_type, f.by])).toEqual([
    [`run-${rec.id}.diff`, "text/x-diff; charset=utf-8", "alice"],
    [`run-${rec.id}.log`, "text/plain; charset=utf-8", "alice"],
  ]);
  const diff = await node.estate.files.get(files[0]!.id);
  expect(await new Response(diff!.data).text()).toBe(rec.result!.diff);
}, TEST_TIMEOUT_MS);

test("a run for a work item: its files on the item itself", async () => {
  const item = await node.estate.router.write("tracker", { op: "work.create", project: "ENG", type: "task", title: "t", body: "", status: "todo", priority: "none", assignee: "alice", reporter: "carol", parent: null, labels: [], due: null });
  if (item.status !== "applied" || !item.outcome.ok) throw new Error("no work item");
  const key = item.outcome.key as string;
  const rec = finished({ id: "run-work-00001", conversation: `work:${key}` });
  expect(await storeRunArtifacts(ports(), rec)).toHaveLength(2);
  expect((await node.estate.router.read({ q: "work.files", key })).map((f) => f.name)).toEqual([`run-${rec.id}.diff`, `run-${rec.id}.log`]);
}, TEST_TIMEOUT_MS);

test("nothing to keep, or nowhere to keep it: no file", async () => {
  expect(runArtifacts(finished({ result: null }))).toEqual([]);
  expect(runArtifacts(finished({ result: { ...finished({}).result!, diff: "", output_tail: "" } }))).toEqual([]);
  const before = (await node.estate.files.list()).length;
  const p = ports();
  expect(await storeRunArtifacts(p, finished({ id: "run-nowhere-01", conversation: "a2a:bob" }))).toEqual([]);
  expect((await node.estate.files.list()).length).toBe(before);
}, TEST_TIMEOUT_MS);
