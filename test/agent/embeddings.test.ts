// Issue 32, vectors: the embeddings client against a small real HTTP server
// (test/support/embeddings-server.ts: Bun.serve on 127.0.0.1) speaking the OpenAI wire
// (/v1/embeddings) and Ollama's (/api/embed), and memory_search blending its vectors with the lexical rank on a real
// node.db — finding a note that says the same in other words, and answering lexically
// (one log event, no key in it) when the endpoint fails, is slow or is not there.
import { afterAll, beforeAll, beforeEach, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { systemClock } from "../../src/clock.ts";
import { embeddingsSchema } from "../../src/config/embeddings.ts";
import { companySchema } from "../../src/config/company.ts";
import { searchMemory } from "../../src/agent/memory-search.ts";
import { EmbeddingsFailed, embeddingsClient, type Embedder } from "../../src/agent/providers/embeddings.ts";
import { memoryLogger } from "../../src/log.ts";
import { MemoryStore } from "../../src/memory/store.ts";
import { embedText, startEmbeddingsServer, type EmbeddingsServer } from "../support/embeddings-server.ts";

const KEY = "sk-test-secret-key-0123456789";
let srv: EmbeddingsServer;
let base: string;
/** The server's calls as this file checks them: path, bearer, how many texts. */
const calls = () => srv.seen.map(({ texts: _t, ...c }) => c);

beforeAll(() => {
  srv = startEmbeddingsServer(`{"error":"overloaded, key ${KEY} rejected"}`);
  base = srv.base;
});
afterAll(() => {
  srv?.stop();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  srv.mode = "ok";
  srv.seen.length = 0;
});
const dir = mkdtempSync(join(tmpdir(), "crewlet-embeddings-"));
let files = 0;
function store(): MemoryStore {
  return new MemoryStore(new Database(join(dir, `node-${++files}.db`), { create: true, strict: true }), systemClock);
}
const openai = (extra: Record<string, unknown> = {}): Embedder =>
  embeddingsClient(embeddingsSchema.parse({ type: "openai", base_url: `${base}/v1`, model: "tiny", api_keys: [KEY], ...extra })!, systemClock);

test("config: the company takes an embeddings endpoint, and refuses a bad one naming the field", () => {
  const ok = companySchema.parse({ name: "Acme", providers: { embeddings: { type: "ollama", base_url: "http://127.0.0.1:11434", model: "nomic-embed-text" } } });
  expect(ok.providers.embeddings).toEqual({ type: "ollama", base_url: "http://127.0.0.1:11434", model: "nomic-embed-text", api_keys: [], timeout_seconds: 5 });
  expect(companySchema.parse({ name: "Acme" }).providers.embeddings).toBeUndefined();
  for (const [bad, field] of [
    [{ type: "cohere", base_url: base, model: "m" }, "type"],
    [{ type: "openai", base_url: "not a url", model: "m" }, "base_url"],
    [{ type: "openai", base_url: base, model: "" }, "model"],
    [{ type: "openai", base_url: base, model: "m", timeout_seconds: 0 }, "timeout_seconds"],
    [{ type: "openai", base_url: base, model: "m", dims: 3 }, ""],
  ] as const) {
    const r = companySchema.safeParse({ name: "Acme", providers: { embeddings: bad } });
    expect(r.success).toBe(false);
    expect(r.error!.issues[0]!.path.join(".")).toBe(`providers.embeddings${field ? `.${field}` : ""}`);
  }
});

test("client, OpenAI wire: one vector per text in input order, the key as a bearer", async () => {
  const out = await openai().embed(["the vendor ships", "on thursday"]);
  expect(out.model).toBe("tiny");
  expect(out.vectors.map((v) => [...v])).toEqual([embedText("the vendor ships"), embedText("on thursday")]);
  expect(calls()).toEqual([{ path: "/v1/embeddings", auth: `Bearer ${KEY}`, inputs: 2 }]);
});

test("client, Ollama wire: /api/embed, no key", async () => {
  const c = embeddingsClient(embeddingsSchema.parse({ type: "ollama", base_url: base, model: "tiny" })!, systemClock);
  const out = await c.embed(["supplier"]);
  expect([...out.vectors[0]!]).toEqual(embedText("supplier"));
  expect(calls()).toEqual([{ path: "/api/embed", auth: null, inputs: 1 }]);
});

test.each([
  ["an HTTP error, with the key redacted from its body", "fail", /HTTP 503.*\[redacted\]/],
  ["an answer of the wrong shape, naming the field", "garbage", /answer data\.0\.embedding\.0/],
  ["fewer vectors than texts", "short", /1 vectors for 2 texts/],
  ["no answer within the timeout", "slow", /no answer within 0.2 s/],
] as const)("client refuses %s", async (_name, m, why) => {
  srv.mode = m;
  const err = await openai({ timeout_seconds: 0.2 }).embed(["a", "b"]).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(EmbeddingsFailed);
  expect((err as Error).message).toMatch(why);
  expect((err as Error).message).not.toContain(KEY);
});

test("client: nothing listening is a failure, not a hang", async () => {
  const c = embeddingsClient(embeddingsSchema.parse({ type: "openai", base_url: "http://127.0.0.1:9/v1", model: "m" })!, systemClock);
  await expect(c.embed(["x"])).rejects.toBeInstanceOf(EmbeddingsFailed);
});

function seatWithNotes(s: MemoryStore): void {
  s.writeDiary({ handle: "ops", content: "The supplier delivers on Thursdays", source: "note", turn_id: "t1", work_key: null, created_at: 1 });
  s.writeDiary({ handle: "ops", content: "Invoices go to finance by the 5th", source: "note", turn_id: "t2", work_key: null, created_at: 2 });
  s.writeDiary({ handle: "ops", content: "The office plant needs water", source: "note", turn_id: "t3", work_key: null, created_at: 3 });
}

test("memory_search blends: a note in other words is found, vectors are filled once and kept", async () => {
  const s = store();
  seatWithNotes(s);
  const { log, sink } = memoryLogger("debug");
  const deps = { store: s, embedder: () => openai(), log };
  // Lexically, "vendor shipping" matches nothing here.
  expect(s.search("ops", "vendor shipping", 5)).toEqual([]);
  const first = await searchMemory(deps, "ops", "vendor shipping", 2);
  expect(first.mode).toBe("blended");
  expect(first.hits[0]!.text).toBe("The supplier delivers on Thursdays");
  // One call carried the query and the seat's three unembedded notes.
  expect(calls()).toEqual([{ path: "/v1/embeddings", auth: `Bearer ${KEY}`, inputs: 4 }]);
  expect(s.sqlite.query<{ n: number }, []>("SELECT count(*) AS n FROM memory_vectors").get()!.n).toBe(3);
  const again = await searchMemory(deps, "ops", "invoices finance", 1);
  expect(again.hits.map((h) => h.text)).toEqual(["Invoices go to finance by the 5th"]);
  expect(srv.seen[1]!.inputs).toBe(1);
  expect(sink.events("memory_search_lexical_only")).toEqual([]);
  // A note's vector goes with the note.
  s.sqlite.run("DELETE FROM memory_diary WHERE content LIKE 'The office plant%'");
  expect(s.sqlite.query<{ n: number }, []>("SELECT count(*) AS n FROM memory_vectors").get()!.n).toBe(2);
});

test.each(["fail", "slow"] as const)("memory_search answers lexically when the endpoint is %s: one event, no key", async (m) => {
  srv.mode = m;
  const s = store();
  seatWithNotes(s);
  const { log, sink } = memoryLogger("debug");
  const out = await searchMemory({ store: s, embedder: () => openai({ timeout_seconds: 0.2 }), log }, "ops", "supplier", 5);
  expect(out).toEqual({ mode: "lexical", hits: [{ kind: "diary", id: expect.any(String), text: "The supplier delivers on Thursdays" }] });
  const events = sink.events("memory_search_lexical_only");
  expect(events.length).toBe(1);
  expect(events[0]!.fields).toMatchObject({ seat: "ops", model: "tiny" });
  expect(JSON.stringify(sink.lines)).not.toContain(KEY);
  expect(s.sqlite.query<{ n: number }, []>("SELECT count(*) AS n FROM memory_vectors").get()!.n).toBe(0);
});

test("memory_search with no endpoint configured is lexical and silent", async () => {
  const s = store();
  seatWithNotes(s);
  const { log, sink } = memoryLogger("debug");
  const out = await searchMemory({ store: s, embedder: () => null, log }, "ops", "finance", 5);
  expect(out.mode).toBe("lexical");
  expect(out.hits.map((h) => h.text)).toEqual(["Invoices go to finance by the 5th"]);
  expect(sink.lines).toEqual([]);
  expect(calls()).toEqual([]);
});
