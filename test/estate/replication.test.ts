// Three data nodes on a 3-member cluster with R3 logs: concurrent writes through different
// nodes end in identical tables; a data node killed with kill -9 mid-stream catches up and
// matches; turn receipts and their horizon end identical too; a node holding no data reads
// its own writes at once through the router.
import { afterAll, beforeAll, expect, test } from "bun:test";

/** Generous: real nats-servers and child processes on a slow 2-core CI box. */
const TEST_TIMEOUT_MS = 60_000;
import { Database } from "bun:sqlite";
import { join } from "node:path";
import type { NatsConnection } from "nats";
import { digestTables } from "../../src/estate/digest.ts";
import { ESTATE_DB_FILE } from "../../src/estate/estate.ts";
import { makeRecord, type AnyBody, type TurnReceipt } from "../../src/estate/records.ts";
import { TURN_RECEIPT_HORIZON_MS } from "../../src/estate/turn-receipts.ts";
import type { EstateRouter } from "../../src/estate/router.ts";
import { DOMAINS, type Domain } from "../../src/estate/schema.ts";
import { StateLog } from "../../src/estate/statelog.ts";
import { silentLogger } from "../../src/log.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { eventually, removeTempDirs, startTestEstate, tempDir, type TestEstate } from "./support.ts";

let nats: TestNats;
const conns: NatsConnection[] = [];
const nodes: TestEstate[] = [];
const children: ReturnType<typeof Bun.spawn>[] = [];
const DATA = ["a", "b", "c"];

async function conn(member: number): Promise<NatsConnection> {
  const nc = await nats.connect({ servers: nats.members[member]!.url });
  conns.push(nc);
  return nc;
}

beforeAll(async () => {
  nats = await startNats(3);
  const started = await Promise.all(
    DATA.map(async (id, i) => startTestEstate({ nc: await conn(i), nodeId: id, replicas: 3, dataNodes: () => DATA })),
  );
  nodes.push(...started);
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  for (const c of children) c.kill("SIGKILL");
  await Promise.all(children.map((c) => c.exited));
  for (const n of nodes) await n.estate.stop().catch(() => {});
  for (const nc of conns) await nc.close().catch(() => {});
  await nats?.stop();
  removeTempDirs();
}, TEST_TIMEOUT_MS);

let n = 0;
function bodyFor(domain: Domain, who: string): AnyBody {
  n += 1;
  if (domain === "tracker") {
    return { op: "work.create", project: n % 2 ? "ENG" : "SAL", type: "task", title: `${who} item ${n}`, body: "", status: "todo", priority: "none", assignee: null, reporter: who, parent: null, labels: [], due: null };
  }
  if (domain === "pages") {
    // Several writers on the same few titles: the log order decides the revisions.
    return { op: "page.put", container: "eng-docs", title: `Page ${n % 5}`, body: `${who} wrote ${n}`, labels: [who], author: who, base_revision: null };
  }
  return { op: "chat.post", channel: "general", author: who, body: `${who} says ${n}`, thread_parent: null, mentions: [], dm: null };
}

async function writeMany(router: EstateRouter, who: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const domain = DOMAINS[i % 3]!;
    const out = await router.write(domain, bodyFor(domain, who) as never);
    expect(out.status).not.toBe("unknown");
  }
}

async function logLast(nc: NatsConnection): Promise<Record<Domain, number>> {
  const log = new StateLog(nc, silentLogger);
  const out = {} as Record<Domain, number>;
  for (const d of DOMAINS) out[d] = (await log.position(d)).last_seq;
  return out;
}

function appliedIn(path: string): Record<string, number> {
  const db = new Database(path, { readonly: true });
  try {
    const rows = db.query<{ domain: string; applied_seq: number }, []>("SELECT domain, applied_seq FROM estate_checkpoints").all();
    return Object.fromEntries(rows.map((r) => [r.domain, r.applied_seq]));
  } finally {
    db.close();
  }
}

function digestOf(path: string) {
  const db = new Database(path, { readonly: true });
  try {
    return digestTables(db);
  } finally {
    db.close();
  }
}

async function allLevel(paths: string[]): Promise<void> {
  await eventually(async () => {
    const last = await logLast(conns[0]!);
    return paths.every((p) => {
      const applied = appliedIn(p);
      return DOMAINS.every((d) => applied[d] === last[d]);
    });
  }, "every copy level with the logs");
}

test("concurrent writes through three data nodes end in identical tables", async () => {
  await Promise.all(nodes.map((node) => writeMany(node.estate.router, node.nodeId, 45)));
  const paths = nodes.map((node) => join(node.dir, ESTATE_DB_FILE));
  await allLevel(paths);
  const digests = paths.map(digestOf);
  expect(digests[0]!.tracker_items!.rows).toBe(45);
  expect(digests[0]!.chat_messages!.rows).toBe(45);
  expect(digests[1]).toEqual(digests[0]!);
  expect(digests[2]).toEqual(digests[0]!);
  for (const node of nodes) {
    const h = node.estate.health();
    expect(h.in_service).toBe(true);
    expect(h.domains!.chat.lag).toBe(0);
  }
}, TEST_TIMEOUT_MS);

test("turn receipts, and the horizon that lets old ones go, are identical on every copy", async () => {
  const old = Date.now() - TURN_RECEIPT_HORIZON_MS - 24 * 3_600_000;
  const receipt = (who: string, i: number, ended_at: number): TurnReceipt => ({
    op: "turn.receipt", seat: "alice", turn_id: `rcpt-${who}-${i}-${ended_at}`, node: who, day: new Date(ended_at).toISOString().slice(0, 10),
    started_at: ended_at - 10, ended_at, duration_ms: 10, trigger: { type: "chat_mention", from: "carol", conversation: "chat:eng:m1", count: 1 },
    summary: `${who} ${i}`, tools: [], input_tokens: i, output_tokens: 1, cost_micros: null, outcome: i % 3 ? "completed" : "failed", error: null,
    links: { channel: "eng", thread_root: null, work_key: null },
  });
  // Each node first writes receipts of a month ago (as their own time, so they stay), then today's:
  // the first of today's applied on a copy lets the old ones go there, at the same log position on every copy.
  await Promise.all(
    nodes.map(async (node) => {
      for (let i = 0; i < 5; i++) {
        const r = receipt(node.nodeId, i, old);
        expect((await node.estate.router.writeRecord(makeRecord("tracker", r, old + 1, node.nodeId, r.turn_id))).status).not.toBe("unknown");
      }
      for (let i = 0; i < 5; i++) expect((await node.estate.router.write("tracker", receipt(node.nodeId, i, Date.now()))).status).not.toBe("unknown");
    }),
  );
  const paths = nodes.map((node) => join(node.dir, ESTATE_DB_FILE));
  await allLevel(paths);
  const digests = paths.map(digestOf);
  expect(digests[0]!.turn_receipts!.rows).toBe(15);
  expect(digests[1]).toEqual(digests[0]!);
  expect(digests[2]).toEqual(digests[0]!);
}, TEST_TIMEOUT_MS);

test("a data node killed with kill -9 mid-stream restarts, catches up and matches", async () => {
  const dir = tempDir();
  const path = join(dir, ESTATE_DB_FILE);
  const spawnNode = async () => {
    const child = Bun.spawn([process.execPath, join(import.meta.dir, "estate-node.ts"), nats.members[2]!.url, dir, "k", "3"], { stdout: "pipe", stderr: "inherit" });
    children.push(child);
    const reader = child.stdout.getReader();
    let seen = "";
    while (!seen.includes("ready")) {
      const { value, done } = await reader.read();
      if (done) throw new Error("estate child exited before ready");
      seen += new TextDecoder().decode(value);
    }
    reader.releaseLock();
    return child;
  };
  const first = await spawnNode();
  const writing = Promise.all([writeMany(nodes[0]!.estate.router, "a", 60), writeMany(nodes[1]!.estate.router, "b", 60)]);
  // Mid-stream: once the child has applied part of what is being written, kill it.
  const before = appliedIn(path).chat ?? 0;
  await eventually(() => (appliedIn(path).chat ?? 0) >= before + 5, "the child applying part of the stream");
  first.kill("SIGKILL");
  await first.exited;
  await writing;
  const second = await spawnNode();
  await allLevel([path, join(nodes[0]!.dir, ESTATE_DB_FILE)]);
  expect(digestOf(path)).toEqual(digestOf(join(nodes[0]!.dir, ESTATE_DB_FILE)));
  second.kill("SIGTERM");
  await second.exited;
}, TEST_TIMEOUT_MS);

test("a node holding no data reads its own writes at once through the router", async () => {
  const leaf = await startTestEstate({ nc: await conn(0), nodeId: "leaf", roles: ["seats"], dataNodes: () => DATA });
  nodes.push(leaf);
  expect(leaf.estate.copy).toBeNull();
  const r = leaf.estate.router;
  for (let i = 0; i < 10; i++) {
    const out = await r.write("chat", { op: "chat.post", channel: "eng", author: "alice", body: `leaf ${i}`, thread_parent: null, mentions: [], dm: null });
    expect(out.status).toBe("applied");
    const seen = await r.read({ q: "chat.messages", channel: "eng", limit: 500 });
    expect(seen.messages.map((m) => m.body)).toContain(`leaf ${i}`);
    const item = await r.write("tracker", { op: "work.create", project: "GEN", type: "task", title: `leaf ${i}`, body: "", status: "todo", priority: "none", assignee: null, reporter: "alice", parent: null, labels: [], due: null });
    expect(item.status).toBe("applied");
    const key = item.status === "applied" ? (item.outcome as unknown as { key: string }).key : "";
    expect((await r.read({ q: "work.get", key }))?.item.title).toBe(`leaf ${i}`);
  }
  expect(leaf.estate.router.writeFloor.chat).toBeGreaterThan(0);
  expect(leaf.estate.health().data).toBe(false);
}, TEST_TIMEOUT_MS);

test("nobody answering is an error that says so, never an empty list", async () => {
  const lonely = await startTestEstate({ nc: await conn(1), nodeId: "lonely", roles: ["seats"], dataNodes: () => ["nobody-1", "nobody-2"] });
  nodes.push(lonely);
  await expect(lonely.estate.router.read({ q: "chat.channels" })).rejects.toThrow(/no data node answered chat.channels.*nobody-1: not reachable/);
  // A search is best effort: "could not be searched", not "nothing matched".
  expect(await lonely.estate.router.read({ q: "pages.search", text: "x" })).toEqual({ hits: [], searched: false });
  expect(await lonely.estate.router.read({ q: "work.search", text: "x" })).toEqual({ hits: [], searched: false });
  expect(await lonely.estate.router.read({ q: "chat.search", text: "x" })).toEqual({ hits: [], searched: false });
}, TEST_TIMEOUT_MS);
