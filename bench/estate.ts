// Estate figures (printed, never pass/fail): write → applied on the writing node and on all
// three data nodes of a 3-member R3 cluster; read latency from a data node's own copy vs
// routed from a node holding no data; FTS search over 10,000 pages.
//   bun bench/estate.ts [--writes 300] [--reads 500]
// --writes: chat writes timed (the routed ones: the first 200 of them); --reads: local and routed reads timed.
import { Database } from "bun:sqlite";
import { drizzle } from "drizzle-orm/bun-sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NatsConnection } from "nats";
import { z } from "zod";
import { benchArgs, countFlag } from "./args.ts";
import { systemClock } from "../src/clock.ts";
import { applyRecord } from "../src/estate/apply.ts";
import { openEstate, type Estate } from "../src/estate/estate.ts";
import { migrate } from "../src/estate/migrate.ts";
import { runQuery } from "../src/estate/queries.ts";
import { makeRecord } from "../src/estate/records.ts";
import { silentLogger } from "../src/log.ts";
import { startNats } from "../test/support/nats.ts";
import { testCompany } from "../test/estate/support.ts";

const { writes: WRITES, reads: READS } = benchArgs(
  "estate",
  "[--writes 300] [--reads 500]",
  z.object({ writes: countFlag(300, 100_000), reads: countFlag(500, 100_000) }),
);
const PAGES = 10_000;
const SEARCHES = 200;

function stats(name: string, ms: number[]): void {
  const s = [...ms].sort((a, b) => a - b);
  const at = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
  console.log(`${name.padEnd(44)} n=${String(s.length).padStart(5)}  median ${at(0.5).toFixed(2).padStart(7)} ms  p99 ${at(0.99).toFixed(2).padStart(7)} ms`);
}

const root = mkdtempSync(join(tmpdir(), "crewlet-bench-estate-"));
const nats = await startNats(3);
const conns: NatsConnection[] = [];
const estates: Estate[] = [];
try {
  const DATA = ["a", "b", "c"];
  const open = async (id: string, member: number, roles: ("data" | "seats")[]) => {
    const nc = await nats.connect({ servers: nats.members[member]!.url });
    conns.push(nc);
    const e = openEstate({
      nc, storeDir: join(root, id), replicas: 3, nodeId: id, roles, company: testCompany(),
      clock: systemClock, log: silentLogger, dataNodes: () => DATA,
    });
    await e.start();
    estates.push(e);
    return e;
  };
  const [a, b, c] = await Promise.all(DATA.map((id, i) => open(id, i, ["data"])));
  const leaf = await open("leaf", 0, ["seats"]);

  // ---- write → applied -------------------------------------------------------------
  const onWriter: number[] = [];
  const onAll: number[] = [];
  for (let i = 0; i < WRITES; i++) {
    const t0 = performance.now();
    const out = await a!.router.write("chat", { op: "chat.post", channel: "general", author: "bench", body: `message ${i}`, thread_parent: null, mentions: [], dm: null });
    const t1 = performance.now();
    if (out.status !== "applied") throw new Error(`write ${i}: ${out.status}`);
    await Promise.all([b!, c!].map((e) => e.copy!.appliers.chat.waitApplied(out.position, 10_000)));
    const t2 = performance.now();
    onWriter.push(t1 - t0);
    onAll.push(t2 - t0);
  }
  console.log(`estate bench: 3-member nats cluster, R3 state logs, loopback, ${process.arch}`);
  stats("write → applied on the writing node", onWriter);
  stats("write → applied on all 3 data nodes", onAll);

  const leafWrites: number[] = [];
  for (let i = 0; i < Math.min(WRITES, 200); i++) {
    const t0 = performance.now();
    const out = await leaf.router.write("chat", { op: "chat.post", channel: "general", author: "bench", body: `leaf ${i}`, thread_parent: null, mentions: [], dm: null });
    leafWrites.push(performance.now() - t0);
    if (out.status !== "applied") throw new Error(`leaf write ${i}: ${out.status}`);
  }
  stats("write → applied, routed from a no-data node", leafWrites);

  // ---- reads: local vs routed ------------------------------------------------------
  const q = { q: "chat.messages", channel: "general", limit: 50 } as const;
  const local: number[] = [];
  const routed: number[] = [];
  for (let i = 0; i < READS; i++) {
    let t0 = performance.now();
    await a!.router.read(q);
    local.push(performance.now() - t0);
    t0 = performance.now();
    await leaf.router.read(q);
    routed.push(performance.now() - t0);
  }
  stats("read 50 messages, data node's own copy", local);
  stats("read 50 messages, routed from a no-data node", routed);
} finally {
  for (const e of estates.reverse()) await e.stop().catch(() => {});
  for (const nc of conns) await nc.close().catch(() => {});
  await nats.stop();
}

// ---- FTS over 10,000 pages (the same apply path, one file, no log) ----------------------
const words = "deploy service database latency replica cluster budget invoice contract hiring roadmap incident outage backup migration schema token lease seat agent tracker page chat customer release quarterly review onboarding security audit".split(" ");
let seed = 42;
const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
const sentence = (n: number) => Array.from({ length: n }, () => words[Math.floor(rnd() * words.length)]).join(" ");
const sqlite = new Database(join(root, "fts.db"), { create: true, readwrite: true, strict: true });
sqlite.run("PRAGMA journal_mode = WAL");
sqlite.run("PRAGMA synchronous = NORMAL");
migrate(sqlite);
const db = drizzle({ client: sqlite });
let pos = 1;
applyRecord(db, makeRecord("pages", { op: "pages.seed", containers: [{ key: "company", name: "Acme", unit_id: null }] }, 0, "bench"), pos++);
const tLoad = performance.now();
sqlite.transaction(() => {
  for (let i = 0; i < PAGES; i++) {
    const rec = makeRecord("pages", { op: "page.put", container: "company", title: `Page ${i} ${sentence(3)}`, body: sentence(200), labels: [], author: "bench", base_revision: null }, i, "bench");
    applyRecord(db, rec, pos++);
  }
})();
const loadMs = performance.now() - tLoad;
const searchMs: number[] = [];
let hits = 0;
for (let i = 0; i < SEARCHES; i++) {
  const text = `${words[i % words.length]} ${words[(i * 7) % words.length]}`;
  const t0 = performance.now();
  const r = runQuery(db, sqlite, { q: "pages.search", text, limit: 20 }) as { hits: unknown[] };
  searchMs.push(performance.now() - t0);
  hits += r.hits.length;
}
console.log(`FTS: ${PAGES} pages of ~200 words applied in ${(loadMs / 1000).toFixed(1)} s (one transaction); ${hits} hits over ${SEARCHES} two-word searches`);
stats("FTS search, top 20 ranked with snippets", searchMs);
sqlite.close();
rmSync(root, { recursive: true, force: true });
