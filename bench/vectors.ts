// Vectors on the memory changelog, on a real nats-server (R1, loopback) and real SQLite
// files. Prints numbers; never fails on time.
//   bun bench/vectors.ts [--rows 2000] [--dims 1536] [--rounds 5]
// 1. a search's fill: setting FILL_BATCH vectors and flushing them (what one blended search
//    adds to its turn's flush);
// 2. a seat of `rows` diary notes and a quarter as many episodes hydrated into a fresh
//    node.db, without vectors and with one on every row (what an acquire waits for);
// 3. the same seat's replay alone, whole and as the learning duty reads it (its tables only);
// 4. the stream's bytes per vector record.
// Latencies use performance.now(); nothing here schedules work.
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { benchArgs, countFlag } from "./args.ts";
import { systemClock } from "../src/clock.ts";
import { silentLogger } from "../src/log.ts";
import { JetStreamChangelog } from "../src/memory/changelog.ts";
import { encodeRecord } from "../src/memory/records.ts";
import { MemoryStore } from "../src/memory/store.ts";
import { MemorySync } from "../src/memory/sync.ts";
import { FILL_BATCH } from "../src/memory/vectors.ts";
import { LEARNING_TABLES } from "../src/duty/learning.ts";
import { startNats } from "../test/support/nats.ts";

const { rows: ROWS, dims: DIMS, rounds: ROUNDS } = benchArgs(
  "vectors",
  "[--rows 2000] [--dims 1536] [--rounds 5]",
  z.object({ rows: countFlag(2_000, 100_000), dims: countFlag(1_536, 8_192), rounds: countFlag(5, 1_000) }),
);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const dir = mkdtempSync(join(tmpdir(), "crewlet-bench-vectors-"));
let files = 0;
function store(): MemoryStore {
  const db = new Database(join(dir, `node-${++files}.db`), { create: true, strict: true });
  db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
  return new MemoryStore(db, systemClock);
}
const randomVector = () => Float32Array.from({ length: DIMS }, () => Math.random() * 2 - 1);

const nats = await startNats(1);
const nc = await nats.connect({ name: "bench-vectors" });
const changelog = new JetStreamChangelog(nc, 1);
await changelog.ensure();
const sync = (s: MemoryStore) => new MemorySync({ store: s, changelog, clock: systemClock, log: silentLogger });

/** A seat of ROWS notes and ROWS / 4 episodes, flushed; with a vector on each when `vectors`. */
async function seat(handle: string, vectors: boolean): Promise<MemoryStore> {
  const a = store();
  const ids: { kind: "diary" | "episode"; id: string }[] = [];
  a.sqlite.transaction(() => {
    for (let i = 0; i < ROWS; i++) ids.push({ kind: "diary", id: a.writeDiary({ handle, content: `fact ${i}: the supplier ships on Thursdays`, source: "reflection", turn_id: `t${i}`, work_key: null, created_at: i }).id });
    for (let i = 0; i < ROWS / 4; i++) {
      a.writeEpisode({ id: `e${i}`, handle, work_key: null, turn_id: `t${i}`, trigger_ids: [], conversation: "c", counterparty: null, outcome: "completed", summary: `handled order ${i} for the supplier`, work_items: [], created_at: i });
      ids.push({ kind: "episode", id: `e${i}` });
    }
  })();
  if (vectors) for (let i = 0; i < ids.length; i += FILL_BATCH) a.setVectors(handle, "bench", ids.slice(i, i + FILL_BATCH).map((r) => ({ ...r, vector: randomVector() })));
  await sync(a).flush(handle);
  return a;
}

// 1. A search's fill and its flush.
{
  const a = await seat("fill", false);
  const s = sync(a);
  const ids = a.recentDiary("fill", FILL_BATCH).map((d) => d.id);
  const set: number[] = [];
  const flush: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const t0 = performance.now();
    a.setVectors("fill", `bench-${r}`, ids.map((id) => ({ kind: "diary" as const, id, vector: randomVector() })));
    const t1 = performance.now();
    await s.flush("fill");
    flush.push(performance.now() - t1);
    set.push(t1 - t0);
  }
  console.log(`fill: setVectors of ${FILL_BATCH} at ${DIMS} dims median ${median(set).toFixed(2)} ms, their flush median ${median(flush).toFixed(2)} ms`);
}

// 2 and 3. Hydration and replay, without and with vectors.
for (const vectors of [false, true]) {
  const handle = vectors ? "withvectors" : "plain";
  const a = await seat(handle, vectors);
  const hyd: number[] = [];
  const rep: number[] = [];
  const learning: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const t0 = performance.now();
    const report = await sync(store()).hydrate(handle);
    hyd.push(performance.now() - t0);
    if (report.rows !== a.records(handle).length) throw new Error(`hydrated ${report.rows} of ${a.records(handle).length}`);
    const t1 = performance.now();
    await changelog.replay(handle);
    rep.push(performance.now() - t1);
    const t2 = performance.now();
    await changelog.replay(handle, LEARNING_TABLES);
    learning.push(performance.now() - t2);
  }
  console.log(
    `${ROWS} notes and ${ROWS / 4} episodes ${vectors ? `with ${DIMS}-dim vectors` : "without vectors"}: hydrate median ${median(hyd).toFixed(1)} ms, replay alone median ${median(rep).toFixed(1)} ms, the learning duty's replay median ${median(learning).toFixed(1)} ms`,
  );
  if (vectors) {
    const rec = a.records(handle).find((x) => x.table === "diary_vectors")!;
    console.log(`a vector record: ${encodeRecord(rec).byteLength} bytes on the stream (${DIMS} dims; JSON numbers would be ~${JSON.stringify([...randomVector()]).length} bytes of floats alone)`);
  }
}

await nc.close();
await nats.stop();
rmSync(dir, { recursive: true, force: true });
