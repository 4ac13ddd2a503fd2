// A vector filled on one node is used for ranking on the next holder: two nodes in this
// process, each with its own node.db, on one real nats-server (CREWLET_MEMORY, R1), a real
// embeddings endpoint that counts what it embeds, and the real memory_search tool. The seat
// moves as the acquire and release hooks move it (MemorySync.release, then hydrate); B's one
// call embeds the query alone — never a row A already embedded. And an older node.db's
// memory_vectors gains the columns that make a vector travel.
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NatsConnection } from "nats";
import { systemClock } from "../../src/clock.ts";
import { embeddingsSchema } from "../../src/config/embeddings.ts";
import { memoryTools } from "../../src/agent/memory.ts";
import { embeddingsClient } from "../../src/agent/providers/embeddings.ts";
import { memoryLogger, silentLogger } from "../../src/log.ts";
import { JetStreamChangelog } from "../../src/memory/changelog.ts";
import { MemoryStore } from "../../src/memory/store.ts";
import { MemorySync } from "../../src/memory/sync.ts";
import { startEmbeddingsServer, type EmbeddingsServer } from "../support/embeddings-server.ts";
import { startNats, type TestNats } from "../support/nats.ts";

const dir = mkdtempSync(join(tmpdir(), "crewlet-vectors-travel-"));
let nats: TestNats;
let srv: EmbeddingsServer;
const conns: NatsConnection[] = [];

beforeAll(async () => {
  nats = await startNats(1);
  srv = startEmbeddingsServer();
});
afterAll(async () => {
  for (const nc of conns) await nc.close();
  await nats?.stop();
  srv?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** A node: its own node.db, its own connection, the memory tools its turns run. */
async function node(name: string) {
  const nc = await nats.connect({ name });
  conns.push(nc);
  const changelog = new JetStreamChangelog(nc, 1);
  await changelog.ensure();
  const db = new Database(join(dir, `${name}.db`), { create: true, strict: true });
  db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
  const store = new MemoryStore(db, systemClock);
  const sync = new MemorySync({ store, changelog, clock: systemClock, log: silentLogger });
  const embedder = embeddingsClient(embeddingsSchema.parse({ type: "openai", base_url: `${srv.base}/v1`, model: "tiny" })!, systemClock);
  const { log, sink } = memoryLogger("debug");
  const search = memoryTools({ store, embedder: () => embedder, log }).find((t) => t.name === "memory_search")!;
  const ask = async (seat: string, query: string) => {
    const out = await search.call({ query, limit: 3 }, { seat, epoch: 1, turn_id: `turn-${name}`, signal: new AbortController().signal });
    return JSON.parse(out.content) as { mode: string; hits: { kind: string; text: string }[] };
  };
  return { store, sync, ask, sink };
}

test("a vector filled on A ranks on B after the seat moves, and B does not embed that row again", async () => {
  const A = await node("node-a");
  const seat = "ops";
  await A.sync.hydrate(seat);
  A.store.writeDiary({ handle: seat, content: "The supplier delivers on Thursdays", source: "note", turn_id: "t1", work_key: null, created_at: 1 });
  A.store.writeDiary({ handle: seat, content: "Invoices go to finance by the 5th", source: "note", turn_id: "t2", work_key: null, created_at: 2 });
  A.store.writeEpisode({ id: "t3", handle: seat, work_key: null, turn_id: "t3", trigger_ids: [], conversation: "chat:general:1", counterparty: "founder", outcome: "completed", summary: "Watered the office plant", work_items: [], created_at: 3 });
  // A's search fills every row's vector: one call, the query and the three rows.
  const onA = await A.ask(seat, "vendor shipping");
  expect(onA.mode).toBe("blended");
  expect(onA.hits[0]!.text).toBe("The supplier delivers on Thursdays");
  expect(srv.seen.map((c) => c.inputs)).toEqual([4]);
  // The release's flush carries the rows and the vectors; B acquires and hydrates.
  await A.sync.release(seat);
  const B = await node("node-b");
  const hydrated = await B.sync.hydrate(seat);
  expect(hydrated.outcomes).toMatchObject({ inserted: 6, skipped_no_row: 0 });
  expect(B.store.counts(seat)).toMatchObject({ diary: 2, episodes: 1, diary_vectors: 2, episode_vectors: 1 });
  // No word of the query is in any row: only the carried vectors can rank the note first.
  expect(B.store.search(seat, "vendor shipping", 3)).toEqual([]);
  const onB = await B.ask(seat, "vendor shipping");
  expect(onB.mode).toBe("blended");
  expect(onB.hits[0]!.text).toBe("The supplier delivers on Thursdays");
  // B's one call embedded the query alone.
  expect(srv.seen.slice(1).map((c) => c.texts)).toEqual([["vendor shipping"]]);
  expect(B.sink.events("memory_search_lexical_only")).toEqual([]);
  // B set nothing, so B's flush owes nothing: the vectors are not carried back and forth.
  expect(B.store.pending(seat)).toEqual([]);
});

test("an older node.db's memory_vectors gains embedded_at and seq; its vectors are owed to no flush", () => {
  const path = join(dir, "older.db");
  const old = new Database(path, { create: true, strict: true });
  // memory_vectors as the search merge made it, with one vector in it.
  old.exec(`CREATE TABLE memory_vectors (handle TEXT NOT NULL, kind TEXT NOT NULL, id TEXT NOT NULL, model TEXT NOT NULL, dims INTEGER NOT NULL,
    vector BLOB NOT NULL, PRIMARY KEY (handle, kind, id))`);
  old.query("INSERT INTO memory_vectors VALUES ('ops', 'diary', 'dold', 'tiny', 1, ?)").run(new Uint8Array(4));
  old.close();
  const db = new Database(path, { strict: true });
  const store = new MemoryStore(db, systemClock);
  new MemoryStore(db, systemClock); // a second open changes nothing
  const cols = db.query<{ name: string }, []>("PRAGMA table_info(memory_vectors)").all().map((c) => c.name);
  expect(cols).toEqual(["handle", "kind", "id", "model", "dims", "vector", "embedded_at", "seq"]);
  expect(store.pending("ops")).toEqual([]);
  const id = store.writeDiary({ handle: "ops", content: "a new note", source: "note", turn_id: null, work_key: null }).id;
  store.setVectors("ops", "tiny", [{ kind: "diary", id, vector: Float32Array.from([1]) }]);
  expect(store.pending("ops").map((p) => `${p.record.table}/${p.record.row.id}`)).toEqual([`diary/${id}`, `diary_vectors/${id}`]);
  db.close();
});
