// Seat memory figures on real nats-servers (loopback) and real SQLite files. Prints
// numbers; never fails on time.
//   bun bench/memory.ts [--turns 200] [--seats 50] [--rounds 20]
// 1. hydration: a seat with 100 / 10,000 memory rows replayed from CREWLET_MEMORY into a
//    fresh node.db (what an acquire waits for before the inbox attaches), R1 and R3;
// 2. the memory overview for 50 seats held on 3 nodes: one request per holding node;
// 3. memory publish cost per turn: writing a turn's rows (episode, counterparty,
//    conversation) and flushing them before the completion is recorded, R1 and R3.
// Latencies use performance.now(): sub-millisecond resolution the product clock does not
// promise; nothing here schedules work.
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { benchArgs, countFlag } from "./args.ts";
import { systemClock } from "../src/clock.ts";
import { silentLogger } from "../src/log.ts";
import { JetStreamChangelog } from "../src/memory/changelog.ts";
import { MemoryReads, type LeaseFact } from "../src/agent/holder-reads.ts";
import { MemoryStore } from "../src/memory/store.ts";
import { MemorySync } from "../src/memory/sync.ts";
import { JetStreamQueue } from "../src/queue/jetstream.ts";
import { startNats } from "../test/support/nats.ts";

const { turns: TURNS, seats: SEATS, rounds: ROUNDS } = benchArgs(
  "memory",
  "[--turns 200] [--seats 50] [--rounds 20]",
  z.object({ turns: countFlag(200, 100_000), seats: countFlag(50, 10_000), rounds: countFlag(20, 100_000) }),
);

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * p))]!;
}
const fmt = (ms: number) => ms.toFixed(2);

const dir = mkdtempSync(join(tmpdir(), "crewlet-bench-memory-"));
let files = 0;
function store(): MemoryStore {
  const db = new Database(join(dir, `node-${++files}.db`), { create: true, strict: true });
  db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"); // as the node opens node.db
  return new MemoryStore(db, systemClock);
}

async function hydration(members: number): Promise<void> {
  const nats = await startNats(members);
  const nc = await nats.connect({ name: "bench-writer" });
  const nc2 = await nats.connect({ name: "bench-reader" });
  const log = new JetStreamChangelog(nc, members);
  await log.ensure();
  for (const rows of [100, 10_000]) {
    const handle = `seat-${rows}`;
    const a = store();
    const syncA = new MemorySync({ store: a, changelog: log, clock: systemClock, log: silentLogger });
    // A realistic mix: mostly diary notes and episodes, a few profiles and conversations.
    a.sqlite.transaction(() => {
      for (let i = 0; i < rows; i++) {
        const k = i % 10;
        if (k < 5) a.writeDiary({ handle, content: `fact ${i}: ${"the supplier ships on Thursdays ".repeat(3)}`, source: "reflection", turn_id: `t${i}`, work_key: null, created_at: i });
        else if (k < 9) a.writeEpisode({ id: `t${i}`, handle, work_key: `wk-${i}`, turn_id: `t${i}`, trigger_ids: [`ev-${i}`], conversation: `c-${i % 50}`, counterparty: `p-${i % 20}`, outcome: "completed", summary: `did item ${i}: ${"a short account of the turn ".repeat(4)}`, work_items: [`ENG-${i}`], created_at: i });
        else if (i % 20 === 9) a.touchCounterparty(handle, `p-${i}`, `wk-${i}`, i);
        else a.touchConversation(handle, `c-${i}`, `t${i}`, [`ev-${i}`], i);
      }
    })();
    const t0 = performance.now();
    const published = await syncA.flush(handle);
    const flushMs = performance.now() - t0;
    const times: number[] = [];
    for (let r = 0; r < 3; r++) {
      const b = store();
      const syncB = new MemorySync({ store: b, changelog: new JetStreamChangelog(nc2, members), clock: systemClock, log: silentLogger });
      const t1 = performance.now();
      const rep = await syncB.hydrate(handle);
      times.push(performance.now() - t1);
      if (rep.rows !== published) throw new Error(`hydrated ${rep.rows} rows, published ${published}`);
      b.sqlite.close();
    }
    console.log(`hydrate R${members}  rows=${published.toString().padStart(6)}  median ${fmt(pct(times, 0.5))} ms  max ${fmt(Math.max(...times))} ms  (publishing them once: ${fmt(flushMs)} ms)`);
    a.sqlite.close();
  }
  await nc.close();
  await nc2.close();
  await nats.stop();
}

async function overview(): Promise<void> {
  const nats = await startNats(1);
  const nodes = await Promise.all(
    ["n1", "n2", "n3"].map(async (id) => {
      const nc = await nats.connect({ name: id });
      const queue = new JetStreamQueue({ nc, replicas: 1, clock: systemClock, log: silentLogger });
      const s = store();
      const sync = new MemorySync({ store: s, changelog: { ensure: async () => {}, publish: async () => {}, replay: async () => ({ records: [], undecodable: [] }) }, clock: systemClock, log: silentLogger });
      return { id, nc, queue, s, sync, held: [] as string[] };
    }),
  );
  const leases: LeaseFact[] = [];
  for (let i = 0; i < SEATS; i++) {
    const n = nodes[i % 3]!;
    const handle = `agent-${i}`;
    for (let k = 0; k < 20; k++) n.s.writeDiary({ handle, content: `note ${k} of ${handle}`, source: "note", turn_id: null, work_key: null, created_at: k });
    await n.sync.hydrate(handle); // marks the seat ready here
    n.held.push(handle);
    leases.push({ handle, node: n.id, owner: `${n.id}:1`, epoch: 1 });
  }
  const reads = nodes.map(
    (n) => new MemoryReads({ store: n.s, sync: n.sync, queue: n.queue, log: silentLogger, holder: { node_id: n.id, owner: `${n.id}:1`, held: () => n.held, leases: async () => leases } }),
  );
  for (const r of reads) await r.serve();
  const handles = leases.map((l) => l.handle);
  const times: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const t0 = performance.now();
    const o = await reads[0]!.overview(handles);
    times.push(performance.now() - t0);
    if (o.seats.some((s) => s.state !== "ok")) throw new Error("overview: a seat was not answered");
  }
  console.log(`overview ${SEATS} seats on 3 nodes (2 remote holders asked once each): median ${fmt(pct(times, 0.5))} ms  p90 ${fmt(pct(times, 0.9))} ms  over ${ROUNDS} rounds`);
  const one: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const t0 = performance.now();
    await reads[0]!.seat(handles[1]!);
    one.push(performance.now() - t0);
  }
  console.log(`one remote seat's memory (20 rows a kind): median ${fmt(pct(one, 0.5))} ms  p90 ${fmt(pct(one, 0.9))} ms`);
  for (const r of reads) r.stop();
  for (const n of nodes) {
    await n.queue.close();
    await n.nc.close();
    n.s.sqlite.close();
  }
  await nats.stop();
}

async function publishPerTurn(members: number): Promise<void> {
  const nats = await startNats(members);
  const nc = await nats.connect({ name: "bench-turns" });
  const log = new JetStreamChangelog(nc, members);
  await log.ensure();
  const s = store();
  const sync = new MemorySync({ store: s, changelog: log, clock: systemClock, log: silentLogger });
  const write: number[] = [];
  const flush: number[] = [];
  for (let i = 0; i < TURNS; i++) {
    const handle = `seat-${i % 5}`;
    const t0 = performance.now();
    s.writeEpisode({ id: `turn-${i}`, handle, work_key: `wk-${i}`, turn_id: `turn-${i}`, trigger_ids: [`ev-${i}`], conversation: `chat:general:${i % 7}`, counterparty: "founder", outcome: "completed", summary: "answered the founder's question about the launch plan", work_items: [], created_at: i });
    s.touchCounterparty(handle, "founder", `wk-${i}`);
    s.touchConversation(handle, `chat:general:${i % 7}`, `turn-${i}`, [`ev-${i}`]);
    const t1 = performance.now();
    await sync.flush(handle);
    const t2 = performance.now();
    write.push(t1 - t0);
    flush.push(t2 - t1);
  }
  console.log(
    `per turn R${members} (3 rows):  write median ${fmt(pct(write, 0.5))} ms p90 ${fmt(pct(write, 0.9))}  |  publish before the record: median ${fmt(pct(flush, 0.5))} ms p90 ${fmt(pct(flush, 0.9))} ms  over ${TURNS} turns`,
  );
  s.sqlite.close();
  await nc.close();
  await nats.stop();
}

try {
  await hydration(1);
  await hydration(3);
  await overview();
  await publishPerTurn(1);
  await publishPerTurn(3);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
