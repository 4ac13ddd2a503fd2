// The diary cap runs on every node for the seats it holds, on the node's own maintenance
// tick — not in the maintenance duty, which runs on one node of the fleet. The node here is
// the real agent engine (NodeEngine, node.db on disk) with no duty runner at all, as a node
// that does not hold the maintenance duty (or a leaf, which never runs duties) is.
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeClock } from "../../src/clock.ts";
import { MemoryCoordination } from "../../src/coord/index.ts";
import { MAINTENANCE_TICK_MS } from "../../src/duty/duties.ts";
import { memoryLogger } from "../../src/log.ts";
import { MemoryChangelog } from "../../src/memory/changelog.ts";
import { DIARY_CAP } from "../../src/memory/store.ts";
import { NodeEngine } from "../../src/node/engine.ts";
import { ensureSeatMailboxes } from "../../src/queue/mailboxes.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { LocalEstate, rootCompany } from "../agent/support.ts";

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

describe("the diary cap on every node", () => {
  test("a node with no maintenance duty caps the diaries of the seats it holds on its own tick, and only those", async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const { log, sink } = memoryLogger("debug", clock);
    const company = rootCompany();
    const dir = mkdtempSync(join(tmpdir(), "crewlet-diarycap-"));
    const estate = new LocalEstate(company);
    const queue = new MemoryQueue({ clock, log });
    await queue.ensureStreams();
    await ensureSeatMailboxes(queue, ["ceo", "cto"], clock, log);
    const coord = new MemoryCoordination({ clock, log }).node({});
    const engine = new NodeEngine({ nodeId: "n-b", storeDir: dir, company, estate, queue, ledger: coord.slot("ledger"), changelog: new MemoryChangelog(), claims: null, max_concurrent: 1, clock, log });
    cleanup.push(async () => {
      await engine.stop();
      await queue.close();
      estate.close();
      rmSync(dir, { recursive: true, force: true });
    });
    // ceo is held here (hydrated by the acquire hook); cto's rows are a copy left by an
    // earlier tenure — another node holds it now and caps its own copy.
    for (const step of engine.hooks().prepare ?? []) await step({ handle: "ceo", epoch: 1, acquired_at: clock.now() });
    const store = engine.memoryStore;
    store.sqlite.transaction(() => {
      for (let i = 1; i <= DIARY_CAP + 7; i++) store.writeDiary({ handle: "ceo", content: `ceo note ${i}`, source: "note", turn_id: null, work_key: null, created_at: i });
      for (let i = 1; i <= DIARY_CAP + 3; i++) store.writeDiary({ handle: "cto", content: `cto note ${i}`, source: "note", turn_id: null, work_key: null, created_at: i });
    })();

    await clock.advance(MAINTENANCE_TICK_MS - 1);
    expect(store.counts("ceo").diary).toBe(DIARY_CAP + 7);
    await clock.advance(1);
    expect(store.counts("ceo").diary).toBe(DIARY_CAP);
    // The oldest went, the newest stayed.
    expect(store.recentDiary("ceo", 1)[0]!.content).toBe(`ceo note ${DIARY_CAP + 7}`);
    expect(store.search("ceo", "note 7", 500).some((h) => h.text === "ceo note 7")).toBe(false);
    expect(store.counts("cto").diary).toBe(DIARY_CAP + 3);
    expect(sink.events("memory_diary_capped").map((l) => l.fields.dropped)).toEqual([{ ceo: 7 }]);
    // A seat within the cap is left alone on the next tick.
    await clock.advance(MAINTENANCE_TICK_MS);
    expect(sink.events("memory_diary_capped")).toHaveLength(1);
  });
});
