import { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EpisodeStore, type Episode } from "../../src/agent/episodes.ts";
import { workKeyOf } from "../../src/agent/ledger.ts";

const dir = mkdtempSync(join(tmpdir(), "crewlet-episodes-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ep = (id: string, handle: string, work_key: string | null): Episode => ({
  id,
  agent_handle: handle,
  work_key,
  turn_id: id,
  trigger_ids: ["e1"],
  conversation: "chat:general:m1",
  outcome: "completed",
  summary: "did it",
  created_at: 1,
});

describe("episodes keyed on the work (node.db)", () => {
  for (const strict of [true, false]) {
    test(`one row per (seat, work_key); unkeyed turns never collapse (strict=${strict})`, () => {
      const db = new Database(join(dir, `node-${strict}.db`), { create: true, readwrite: true, strict });
      const store = new EpisodeStore(db);
      expect(store.insert(ep("t1", "ceo", "k1"))).toBe(true);
      expect(store.insert(ep("t2", "ceo", "k1"))).toBe(false); // a re-run of the same work
      expect(store.insert(ep("t3", "cto", "k1"))).toBe(true); // another seat's own memory
      expect(store.insert(ep("t4", "ceo", null))).toBe(true);
      expect(store.insert(ep("t5", "ceo", null))).toBe(true);
      expect(store.insert(ep("t6", "ceo", ""))).toBe(true); // '' is NULL, not a key
      expect(store.recent("ceo", 10).map((e) => e.id).sort()).toEqual(["t1", "t4", "t5", "t6"]);
      // A second store on the same file (a restarted node) keeps the index.
      const again = new EpisodeStore(db);
      expect(again.insert(ep("t7", "ceo", "k1"))).toBe(false);
      db.close();
    });
  }

  test("the work key is the constituents' identity, order-free, ledgered types only", () => {
    const a = { type: "chat_mention" as const, event_id: "a" };
    const b = { type: "task_assigned" as const, event_id: "b" };
    const s = { type: "schedule" as const, event_id: "s" };
    expect(workKeyOf([a, b])).toBe(workKeyOf([b, a])!);
    expect(workKeyOf([a])).not.toBe(workKeyOf([a, b]));
    // A schedule fire is ledgered: its instant's event id is its work.
    expect(workKeyOf([s])).not.toBeNull();
    expect(workKeyOf([a, b, s])).not.toBe(workKeyOf([a, b])!);
    expect(workKeyOf([])).toBeNull();
  });
});
