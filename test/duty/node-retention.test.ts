// Node-local retention runs on every node, on the node's own tick (issue 14): the
// maintenance duty runs on one node of the fleet, while every node keeps its own node.db.
// Two nodes on one in-memory coordination store and one FakeClock, each the real agent
// engine over node.db on disk and each running the maintenance duty: a holds it, b is
// refused it — and b's old turn transcripts still go on b's own tick.
import { Database } from "bun:sqlite";
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TRANSCRIPT_HORIZON_MS } from "../../src/agent/transcripts.ts";
import { FakeClock } from "../../src/clock.ts";
import { MemoryCoordination } from "../../src/coord/index.ts";
import { MAINTENANCE_TICK_MS } from "../../src/duty/duties.ts";
import { Maintenance } from "../../src/duty/maintenance.ts";
import { startNodeRetention } from "../../src/duty/retention.ts";
import { MailboxSweep } from "../../src/duty/retirement.ts";
import { DutyRunner } from "../../src/duty/runner.ts";
import { memoryLogger } from "../../src/log.ts";
import { MemoryChangelog } from "../../src/memory/changelog.ts";
import { NodeEngine } from "../../src/node/engine.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { LocalEstate, rootCompany } from "../agent/support.ts";

const DAY_MS = 86_400_000;
const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

function addTranscript(db: Database, handle: string, id: string, started_at: number): void {
  db.query("INSERT INTO turn_transcripts (handle, id, started_at, summary, body, bytes) VALUES (?, ?, ?, '{}', '{}', 2)").run(handle, id, started_at);
}
function transcriptIds(db: Database): string[] {
  return (db.query("SELECT id FROM turn_transcripts ORDER BY id").all() as { id: string }[]).map((r) => r.id);
}

describe("node-local retention on every node", () => {
  test("a node that does not hold the maintenance duty still sweeps its own node.db on its own tick", async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 20));
    const company = rootCompany();
    const coord = new MemoryCoordination({ clock, log: memoryLogger("debug", clock).log });
    const queue = new MemoryQueue({ clock, log: memoryLogger("debug", clock).log });
    await queue.ensureStreams();
    const estate = new LocalEstate(company);
    cleanup.push(async () => {
      await queue.close();
      estate.close();
    });

    const node = (id: string) => {
      const { log, sink } = memoryLogger("debug", clock);
      const dir = mkdtempSync(join(tmpdir(), `crewlet-retention-${id}-`));
      const engine = new NodeEngine({ nodeId: id, storeDir: dir, company, estate, queue, ledger: coord.node().slot("ledger"), changelog: new MemoryChangelog(), claims: null, max_concurrent: 1, clock, log });
      const handle = coord.node({ log });
      const sweep = new MailboxSweep({
        owner: `${id}:retire.1`,
        node_id: id,
        registry: handle.slot("mailboxes"),
        leases: handle.leases,
        queue,
        roster: async () => ({ ok: true, epoch: 1, seats: new Set<string>() }),
        lease_ttl_ms: () => handle.lease_ttl_ms,
        clock,
        log,
      });
      const runner = new DutyRunner({ node_id: id, store: handle.duties, clock, log, duties: [new Maintenance({ sweep, slot: (n) => handle.slot(n), clock, log })] });
      cleanup.push(async () => {
        await runner.stop();
        await engine.stop();
        rmSync(dir, { recursive: true, force: true });
      });
      return { engine, runner, sink, db: engine.nodeDb! };
    };
    const a = node("a");
    a.runner.start();
    await clock.advance(10);
    const b = node("b");
    b.runner.start();
    await clock.advance(10);

    // b's node.db: a transcript past the horizon, and one inside it (each insert would trim
    // the horizon itself; these are rows left on a node that no longer runs the seat's turns).
    const now = clock.now();
    addTranscript(b.db, "ceo", "old", now - TRANSCRIPT_HORIZON_MS - DAY_MS);
    addTranscript(b.db, "ceo", "recent", now - DAY_MS);
    addTranscript(a.db, "cto", "old-on-a", now - TRANSCRIPT_HORIZON_MS - DAY_MS);

    await clock.advance(MAINTENANCE_TICK_MS);
    expect(a.sink.events("duty_claimed").map((l) => l.fields.duty)).toEqual(["maintenance"]);
    expect(b.sink.events("duty_claimed")).toEqual([]);
    expect(b.runner.status().find((s) => s.duty === "maintenance")!.held).toBe(false);
    expect(transcriptIds(b.db)).toEqual(["recent"]);
    expect(b.sink.events("retention_swept").map((l) => l.fields)).toEqual([{ table: "turn_transcripts", deleted: 1, horizon: `${TRANSCRIPT_HORIZON_MS / DAY_MS} days` }]);
    // The holder sweeps its own too — on the same per-node tick, not in the duty.
    expect(transcriptIds(a.db)).toEqual([]);
    expect(a.sink.events("retention_swept")).toHaveLength(1);
  });

  test("a sweep that fails is logged and the others still run; the tick goes on", async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 20));
    const { log, sink } = memoryLogger("debug", clock);
    const db = new Database(":memory:");
    db.run("CREATE TABLE turn_transcripts (seq INTEGER PRIMARY KEY AUTOINCREMENT, handle TEXT NOT NULL, id TEXT NOT NULL, started_at INTEGER NOT NULL, summary TEXT NOT NULL, body TEXT NOT NULL, bytes INTEGER NOT NULL)");
    let ran = 0;
    const timer = startNodeRetention({
      db: () => db,
      sweeps: [{ name: "broken", run: () => { throw new Error("disk on fire"); } }, { name: "counting", run: () => void ran++ }],
      clock,
      log,
      every_ms: MAINTENANCE_TICK_MS,
    });
    cleanup.push(() => timer.cancel());
    await clock.advance(MAINTENANCE_TICK_MS);
    addTranscript(db, "ceo", "old", clock.now() - TRANSCRIPT_HORIZON_MS - 1);
    await clock.advance(MAINTENANCE_TICK_MS);
    expect(ran).toBe(2);
    expect(sink.events("retention_failed").map((l) => l.fields.sweep)).toEqual(["broken", "broken"]);
    expect(transcriptIds(db)).toEqual([]);
  });
});
