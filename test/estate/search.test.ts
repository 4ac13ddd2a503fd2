// Issue 32, search: work items and chat ranked by FTS5 (bm25) in a real estate.db file,
// rows written by the applier's own applyRecord. The index follows every write (create,
// update, edit, delete), a migration onto a copy that already holds rows, and a snapshot
// restore of a domain (FTS5's own integrity-check after each).
import { afterAll, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { drizzle } from "drizzle-orm/bun-sqlite";
import { join } from "node:path";
import { applyRecord } from "../../src/estate/apply.ts";
import { migrate, openEstateDb, type OpenedDb } from "../../src/estate/migrate.ts";
import { MIGRATIONS } from "../../src/estate/migrations.ts";
import { querySchema, runQuery, type QueryName, type QueryOf, type Results } from "../../src/estate/queries.ts";
import { makeRecord, type BodyOf } from "../../src/estate/records.ts";
import type { Domain } from "../../src/estate/schema.ts";
import { ftsExpression } from "../../src/estate/search.ts";
import { seedRecords } from "../../src/estate/seed.ts";
import { restoreDomain } from "../../src/estate/snapshot.ts";
import { removeTempDirs, tempDir, testCompany } from "./support.ts";

afterAll(removeTempDirs);

class Copy {
  position = 0;
  constructor(readonly o: OpenedDb) {
    for (const r of seedRecords(testCompany(), "test")) applyRecord(o.db, r, ++this.position);
  }
  write<D extends Domain>(domain: D, body: BodyOf<D>): Record<string, unknown> {
    const out = applyRecord(this.o.db, makeRecord(domain, body, 1_000 + this.position, "test"), ++this.position);
    if (!out.ok) throw new Error(JSON.stringify(out));
    return out;
  }
  read<K extends QueryName>(q: QueryOf<K>): Results[K] {
    return runQuery(this.o.db, this.o.sqlite, querySchema.parse(q)) as Results[K];
  }
  item(title: string, body = "", more: Partial<BodyOf<"tracker"> & { op: "work.create" }> = {}): string {
    const out = this.write("tracker", {
      op: "work.create", project: "ENG", type: "task", title, body, status: "todo", priority: "none",
      assignee: null, reporter: "carol", parent: null, labels: [], due: null, ...more,
    });
    return out.key as string;
  }
  post(channel: string, body: string, dm: { members: string[] } | null = null): string {
    return this.write("chat", { op: "chat.post", channel, author: "carol", body, thread_parent: null, mentions: [], dm }).message_id as string;
  }
  work(text: string, extra: Record<string, unknown> = {}): string[] {
    return this.read({ q: "work.search", text, ...extra } as QueryOf<"work.search">).hits.map((h) => h.key);
  }
  chat(text: string, extra: Record<string, unknown> = {}): string[] {
    return this.read({ q: "chat.search", text, ...extra } as QueryOf<"chat.search">).hits.map((h) => h.id);
  }
}

function fresh(): Copy {
  return new Copy(openEstateDb(join(tempDir(), "estate.db")));
}

function integrity(sqlite: Database): void {
  for (const t of ["work_fts", "chat_fts", "kb_fts"]) sqlite.run(`INSERT INTO ${t}(${t}, rank) VALUES('integrity-check', 1)`);
}

test.each([
  ["plain words, each quoted", "deploy the api", '"deploy" "the" "api"'],
  ["a work key splits into its words", "ENG-12", '"ENG" "12"'],
  ["FTS syntax is literal", 'a" OR NEAR(b*) title:c', '"a" "OR" "NEAR" "b" "title" "c"'],
  ["nothing searchable", "-- ** !!", null],
  ["letters of any script", "déploiement 東京", '"déploiement" "東京"'],
] as const)("ftsExpression: %s", (_name, text, want) => {
  expect(ftsExpression(text)).toBe(want);
});

test("work search: title above body, the key finds its item, filters narrow, updates re-index", () => {
  const c = fresh();
  const inBody = c.item("Quarterly report", "the deploy pipeline is slow");
  const inTitle = c.item("Fix the deploy pipeline", "it is slow");
  c.item("Unrelated", "nothing here");
  const sales = c.item("Deploy the sales site", "", { project: "SAL", assignee: "alice" });
  expect(c.work("deploy pipeline")).toEqual([inTitle, inBody]);
  // Porter stemming: "deploying" finds "deploy".
  expect(c.work("deploying")).toContain(inTitle);
  expect(c.work(inBody)).toEqual([inBody]);
  expect(c.work("deploy", { project: "SAL" })).toEqual([sales]);
  expect(c.work("deploy", { assignee: "alice" })).toEqual([sales]);
  expect(c.work("deploy", { status: "done" })).toEqual([]);
  c.write("tracker", { op: "work.update", key: inTitle, actor: "carol", patch: { title: "Fix the build cache", status: "done" } });
  expect(c.work("deploy pipeline")).toEqual([inBody]);
  expect(c.work("cache", { status: "done" })).toEqual([inTitle]);
  const hit = c.read({ q: "work.search", text: "cache" }).hits[0]!;
  expect(hit).toMatchObject({ key: inTitle, project: "ENG", title: "Fix the build cache", status: "done", assignee: null });
  expect(hit.rank).toBeLessThan(0);
  expect(c.read({ q: "work.search", text: "!!" })).toEqual({ hits: [], searched: true });
  integrity(c.o.sqlite);
});

test("chat search: ranked, edits re-index, deleted messages and others' DMs never match", () => {
  const c = fresh();
  const older = c.post("general", "the llama rollout starts monday");
  const newer = c.post("eng", "llama rollout: day two");
  const gone = c.post("general", "llama secret, delete me");
  const dm = c.post("dm.alice.carol", "llama in a DM", { members: ["alice", "carol"] });
  c.write("chat", { op: "chat.delete", message_id: gone, actor: "carol" });
  expect(c.chat("llama rollout")).toEqual([newer, older]);
  expect(c.chat("llama rollout", { channel: "general" })).toEqual([older]);
  expect(c.chat("secret")).toEqual([]);
  expect(c.chat("llama")).not.toContain(dm);
  expect(c.chat("llama", { member: "alice" })).toContain(dm);
  expect(c.chat("llama", { member: "bob" })).not.toContain(dm);
  c.write("chat", { op: "chat.edit", message_id: older, editor: "carol", body: "the alpaca rollout starts monday", mentions: [] });
  expect(c.chat("llama rollout")).toEqual([newer]);
  expect(c.chat("alpaca")).toEqual([older]);
  const hit = c.read({ q: "chat.search", text: "alpaca" }).hits[0]!;
  expect(hit).toMatchObject({ id: older, channel: "general", author: "carol", thread_parent: null, snippet: "the [alpaca] rollout starts monday" });
  integrity(c.o.sqlite);
});

test("migration 3 indexes the rows a copy already held", () => {
  const pre = new Database(join(tempDir(), "estate.db"), { create: true, strict: true });
  migrate(pre, MIGRATIONS.filter((m) => m.id < 3));
  const c = new Copy({ sqlite: pre, db: drizzle({ client: pre }) });
  const key = c.item("Rotate the signing keys");
  const msg = c.post("general", "who rotates the signing keys?");
  expect(migrate(pre).slice(0, 1)).toEqual([3]);
  expect(c.work("signing keys")).toEqual([key]);
  expect(c.chat("signing keys")).toEqual([msg]);
  integrity(pre);
  pre.close();
});

test("a snapshot restore of a domain re-indexes it: the snapshot's rows match, the replaced ones do not", () => {
  const a = fresh();
  const kept = a.item("Snapshot row: kestrel");
  const said = a.post("general", "snapshot message: kestrel");
  const snap = join(tempDir(), "snap.db");
  a.o.sqlite.run(`VACUUM INTO '${snap}'`);
  // After the snapshot: more rows, an edit, and a different copy entirely.
  a.item("After the snapshot: kestrel again");
  a.write("chat", { op: "chat.edit", message_id: said, editor: "carol", body: "edited: osprey", mentions: [] });
  const b = fresh();
  b.item("Only on b: heron");
  b.post("eng", "only on b: heron");
  for (const copy of [a, b]) {
    restoreDomain(copy.o.sqlite, snap, "tracker");
    restoreDomain(copy.o.sqlite, snap, "chat");
    integrity(copy.o.sqlite);
    expect(copy.work("kestrel")).toEqual([kept]);
    expect(copy.chat("kestrel")).toEqual([said]);
    expect(copy.chat("osprey")).toEqual([]);
    expect(copy.work("heron")).toEqual([]);
    expect(copy.chat("heron")).toEqual([]);
  }
});
