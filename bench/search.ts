// Search latency at scale, on real SQLite files: work items and chat (estate.db, rows
// written by the applier's own applyRecord, so the FTS triggers run as on a node) and seat
// memory (node.db through MemoryStore). Prints p50/p99 per corpus and query shape; never
// fails on time.
//   bun bench/search.ts [--rows 100000] [--queries 300] [--seats 50]
// Text is drawn from a Zipf-shaped vocabulary (seeded, so every run builds the same corpus):
// a "common" query word matches a large share of the rows and makes bm25 rank them all, a
// "rare" one a handful — the two ends of what a search costs. Latencies use
// performance.now(): sub-millisecond resolution the product clock does not promise.
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { benchArgs, countFlag } from "./args.ts";
import { systemClock } from "../src/clock.ts";
import { applyRecord } from "../src/estate/apply.ts";
import { openEstateDb } from "../src/estate/migrate.ts";
import { querySchema, runQuery, type QueryInput } from "../src/estate/queries.ts";
import { makeRecord } from "../src/estate/records.ts";
import { seedRecords } from "../src/estate/seed.ts";
import { MemoryStore } from "../src/memory/store.ts";
import { loadConfigFile } from "../src/config/load.ts";
import { rng } from "../test/support/rng.ts";

const { rows: ROWS, queries: QUERIES, seats: SEATS } = benchArgs(
  "search",
  "[--rows 100000] [--queries 300] [--seats 50]",
  z.object({ rows: countFlag(100_000, 2_000_000), queries: countFlag(300, 100_000), seats: countFlag(50, 10_000) }),
);

/** Distinct words in the corpus: a working vocabulary's size, so rare words are really rare. */
const VOCABULARY = 20_000;
/** Words per row: a work item's title and a short body, a chat line, a note. */
const WORDS_PER_ROW = 24;
/** Hits each search asks for: the API's and the tools' default. */
const LIMIT = 20;
/** Rows per write transaction while building: large enough that fsync is not the figure. */
const BATCH = 5_000;

const random = rng(32);
const word = (i: number) => `w${i.toString(36)}`;
/** Zipf (s ≈ 1) by inverse transform on the harmonic CDF, approximated: rank = V^u. */
const zipf = () => Math.min(VOCABULARY - 1, Math.floor(Math.pow(VOCABULARY, random())) - 1);
const sentence = (n: number) => Array.from({ length: n }, () => word(zipf())).join(" ");

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * p))]!;
}
const fmt = (ms: number) => ms.toFixed(2).padStart(8);

/** Query shapes: one common word (ranks many matches), one rare word, two mid words (an AND). */
const SHAPES: Record<string, () => string> = {
  common: () => word(Math.floor(random() * 5)),
  rare: () => word(5_000 + Math.floor(random() * 10_000)),
  "two words": () => `${word(20 + Math.floor(random() * 200))} ${word(20 + Math.floor(random() * 200))}`,
};

function measure(corpus: string, run: (text: string) => number): void {
  for (const [shape, text] of Object.entries(SHAPES)) {
    run(text()); // warm the statement cache and the pages
    const times: number[] = [];
    let hits = 0;
    for (let i = 0; i < QUERIES; i++) {
      const t = text();
      const t0 = performance.now();
      hits += run(t);
      times.push(performance.now() - t0);
    }
    console.log(`${corpus.padEnd(7)} ${shape.padEnd(10)} p50 ${fmt(pct(times, 0.5))} ms  p99 ${fmt(pct(times, 0.99))} ms  (${(hits / QUERIES).toFixed(1)} hits a query)`);
  }
}

const dir = mkdtempSync(join(tmpdir(), "crewlet-bench-search-"));
try {
  const company = loadConfigFile(join(import.meta.dir, "..", "crewlet.yaml"), {}).config.company!;
  const estate = openEstateDb(join(dir, "estate.db"));
  let position = 0;
  for (const r of seedRecords(company, "bench")) applyRecord(estate.db, r, ++position);
  const project = runQuery(estate.db, estate.sqlite, querySchema.parse({ q: "projects.list" })) as { key: string }[];
  const channel = "general";
  const t0 = performance.now();
  for (let done = 0; done < ROWS; done += BATCH) {
    estate.sqlite.transaction(() => {
      for (let i = done; i < Math.min(ROWS, done + BATCH); i++) {
        const title = sentence(6);
        const body = sentence(WORDS_PER_ROW - 6);
        applyRecord(estate.db, makeRecord("tracker", { op: "work.create", project: project[i % project.length]!.key, type: "task", title, body, status: "todo", priority: "none", assignee: null, reporter: "bench", parent: null, labels: [], due: null }, i, "bench"), ++position);
        applyRecord(estate.db, makeRecord("chat", { op: "chat.post", channel, author: "bench", body: sentence(WORDS_PER_ROW), thread_parent: null, mentions: [], dm: null }, i, "bench"), ++position);
      }
    })();
  }
  console.log(`built ${ROWS} work items and ${ROWS} chat messages in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  const memDb = new Database(join(dir, "node.db"), { create: true, strict: true });
  memDb.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"); // as the node opens node.db
  const memory = new MemoryStore(memDb, systemClock);
  const t1 = performance.now();
  for (let done = 0; done < ROWS; done += BATCH) {
    memDb.transaction(() => {
      for (let i = done; i < Math.min(ROWS, done + BATCH); i++) {
        const handle = `seat-${i % SEATS}`;
        if (i % 2 === 0) memory.writeDiary({ handle, content: sentence(WORDS_PER_ROW), source: "reflection", turn_id: `t${i}`, work_key: null, created_at: i });
        else memory.writeEpisode({ id: `t${i}`, handle, work_key: null, turn_id: `t${i}`, trigger_ids: [], conversation: `c-${i % 97}`, counterparty: null, outcome: "completed", summary: sentence(WORDS_PER_ROW), work_items: [], created_at: i });
      }
    })();
  }
  console.log(`built ${ROWS} memory rows (diary + episodes) over ${SEATS} seats in ${((performance.now() - t1) / 1000).toFixed(1)} s`);

  const ask = (q: QueryInput) => (runQuery(estate.db, estate.sqlite, querySchema.parse(q)) as { hits: unknown[] }).hits.length;
  measure("work", (text) => ask({ q: "work.search", text, limit: LIMIT }));
  measure("chat", (text) => ask({ q: "chat.search", text, limit: LIMIT }));
  // One seat's memory, as memory_search asks it (its words OR'd, the seat's rows only).
  measure("memory", (text) => memory.search("seat-7", text, LIMIT).length);
  estate.sqlite.close();
  memDb.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
