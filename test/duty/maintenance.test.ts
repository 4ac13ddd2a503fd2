// Removal markers purged from the ageless buckets once three hours old, each through its
// own revision (the maintenance duty), and the node-local retention rules (each node's own
// tick: node-retention.test.ts).
import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { MemoryCoordination } from "../../src/coord/index.ts";
import { memoryLogger } from "../../src/log.ts";
import { MemoryStore } from "../../src/memory/store.ts";
import { agelessSlots, MARKER_MAX_AGE_MS, purgeOldMarkers } from "../../src/duty/markers.ts";
import { RETENTION_RULES, runRetention, type RetentionRule } from "../../src/duty/retention.ts";

const enc = (s: string) => new TextEncoder().encode(s);

describe("removal markers", () => {
  test("purged from the ageless buckets once 3 h old; a key written again since is untouched", async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const { log, sink } = memoryLogger("debug", clock);
    const coord = new MemoryCoordination({ clock, log }).node();
    const ageless = agelessSlots();
    for (const n of ["config", "status", "mailboxes", "schedules"] as const) expect(ageless).toContain(n);
    for (const n of ["ledger", "claims", "fires"] as const) expect(ageless).not.toContain(n);
    const status = coord.slot("status");
    const mailboxes = coord.slot("mailboxes");
    const r1 = await status.create("node.gone", enc("x"));
    await status.delete("node.gone", r1);
    const r2 = await mailboxes.create("old-seat", enc("y"));
    await mailboxes.delete("old-seat", r2);
    const r3 = await status.create("node.back", enc("z"));
    await status.delete("node.back", r3);
    // The ledger has an age: its markers go with it, and are not this pass's.
    const lr = await coord.slot("ledger").create("ev.1", enc("done"));
    await coord.slot("ledger").delete("ev.1", lr);

    await clock.advance(MARKER_MAX_AGE_MS - 1_000);
    expect(await purgeOldMarkers((n) => coord.slot(n), clock, log)).toBe(0);
    await status.create("node.back", enc("again"));
    await clock.advance(2_000);
    expect(await purgeOldMarkers((n) => coord.slot(n), clock, log)).toBe(2);
    expect(await status.removals()).toEqual([]);
    expect(await mailboxes.removals()).toEqual([]);
    expect(new TextDecoder().decode((await status.get("node.back"))!.value)).toBe("again");
    expect((await coord.slot("ledger").removals()).map((m) => m.key)).toEqual(["ev.1"]);
    expect(sink.events("removal_markers_purged").map((l) => l.fields.bucket).sort()).toEqual(["crewlet_mailboxes", "crewlet_status"]);
  });
});

describe("node-local retention", () => {
  test("a table this build lacks is passed over; the seats' memory has no table rule", () => {
    const db = new Database(":memory:");
    // node.db's memory tables: the diary is capped over the seats held here (a sweep of the
    // same tick, src/memory/sync.ts); the rest travel with the seat uncapped (why: at
    // RETENTION_RULES); the old `episodes` table is written by no node any more.
    new MemoryStore(db, new FakeClock(0));
    expect(RETENTION_RULES.filter((r) => r.table.startsWith("memory_") || r.table === "episodes")).toEqual([]);
    const absent: RetentionRule = { table: "not_here", horizon: "-", why: "-", sweep: () => { throw new Error("must not run"); } };
    expect(runRetention(db, Date.now(), [...RETENTION_RULES, absent])).toEqual([]);
  });
});
