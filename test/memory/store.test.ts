// A node's copy of its seats' memory (node.db on disk): one episode per unit of work, a
// counterparty counted once per unit of work, and the episodes that touched a work item
// found by its tracker key whichever conversation they came through.
import { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeClock } from "../../src/clock.ts";
import { counterpartyId, type EpisodeRow } from "../../src/memory/records.ts";
import { MemoryStore } from "../../src/memory/store.ts";

const dir = mkdtempSync(join(tmpdir(), "crewlet-memstore-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const open = (strict = true) => new Database(join(dir, `node-${++files}.db`), { create: true, readwrite: true, strict });

const ep = (id: string, handle: string, work_key: string | null, more: Partial<EpisodeRow> = {}): EpisodeRow => ({
  id,
  handle,
  work_key,
  turn_id: id,
  trigger_ids: ["e1"],
  conversation: "chat:general:m1",
  counterparty: "founder",
  outcome: "completed",
  summary: "did it",
  work_items: [],
  created_at: 1,
  ...more,
});

describe("episodes keyed on the work", () => {
  for (const strict of [true, false]) {
    test(`one row per (seat, work_key); unkeyed turns never collapse; the index outlives a restart (strict=${strict})`, () => {
      const db = open(strict);
      const store = new MemoryStore(db, new FakeClock(0));
      expect(store.writeEpisode(ep("t1", "ceo", "k1"))).toBe(true);
      expect(store.writeEpisode(ep("t2", "ceo", "k1"))).toBe(false); // a re-run of the same work
      expect(store.writeEpisode(ep("t3", "cto", "k1"))).toBe(true); // another seat's own memory
      expect(store.writeEpisode(ep("t4", "ceo", null))).toBe(true);
      expect(store.writeEpisode(ep("t5", "ceo", null))).toBe(true);
      expect(store.writeEpisode(ep("t6", "ceo", ""))).toBe(true); // '' is NULL, not a key
      expect(store.recentEpisodes("ceo", 10).map((e) => e.id).sort()).toEqual(["t1", "t4", "t5", "t6"]);
      // A second store on the same file (a restarted node) keeps the index.
      const again = new MemoryStore(db, new FakeClock(0));
      expect(again.writeEpisode(ep("t7", "ceo", "k1"))).toBe(false);
      db.close();
    });
  }
});

describe("a counterparty's interactions", () => {
  // Each step as a turn's end writes it: the counterparty touched, then the turn's episode.
  const cases: { name: string; keys: (string | null)[]; interactions: number }[] = [
    { name: "one unit of work, once", keys: ["w1"], interactions: 1 },
    { name: "a repeat of one work key straight after (a redelivery)", keys: ["w1", "w1"], interactions: 1 },
    { name: "two units of work", keys: ["w1", "w2"], interactions: 2 },
    { name: "a repeat of one work key after other work", keys: ["w1", "w2", "w1"], interactions: 2 },
    { name: "a repeat of each of three, interleaved", keys: ["w1", "w2", "w3", "w2", "w1", "w3"], interactions: 3 },
    { name: "unkeyed turns each count", keys: [null, null, "w1", null], interactions: 4 },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const store = new MemoryStore(open(), new FakeClock(0));
      c.keys.forEach((k, i) => {
        store.touchCounterparty("ceo", "founder", k, 10 + i);
        store.writeEpisode(ep(`t${i}`, "ceo", k));
      });
      expect(store.counterparty("ceo", "founder")).toMatchObject({ interactions: c.interactions, last_seen: 10 + c.keys.length - 1 });
      // Another counterparty of the same seat is its own count.
      expect(store.counterparty("ceo", "bo")).toBeNull();
    });
  }

  test("a work key whose episode was carried in (a re-run after the previous holder died) is not counted again", () => {
    const store = new MemoryStore(open(), new FakeClock(0));
    store.importRecord({ table: "counterparties", row: { id: counterpartyId("ceo", "founder"), handle: "ceo", counterparty: "founder", interactions: 4, last_work_key: "w9", last_seen: 5, note: "", updated_at: 5 } });
    store.importRecord({ table: "episodes", row: ep("t8", "ceo", "w8") });
    expect(store.touchCounterparty("ceo", "founder", "w8", 20).interactions).toBe(4);
    expect(store.touchCounterparty("ceo", "founder", "w10", 21).interactions).toBe(5);
  });
});

describe("episodes on a work item", () => {
  test("found by the tracker key in work_items, across conversations, newest first, bounded; not by the ledger's work key", () => {
    const store = new MemoryStore(open(), new FakeClock(0));
    store.writeEpisode(ep("t1", "ceo", "hash-1", { conversation: "chat:general:m1", work_items: ["ENG-1", "OPS-1"], created_at: 1 }));
    store.writeEpisode(ep("t2", "ceo", "hash-2", { conversation: "work:ENG-1", work_items: ["ENG-1"], created_at: 2 }));
    store.writeEpisode(ep("t3", "ceo", "hash-3", { conversation: "work:ENG-12", work_items: ["ENG-12"], created_at: 3 }));
    store.writeEpisode(ep("t4", "cto", "hash-4", { work_items: ["ENG-1"], created_at: 4 }));
    expect(store.episodesForWorkItem("ceo", "ENG-1", 10).map((e) => e.id)).toEqual(["t2", "t1"]);
    expect(store.episodesForWorkItem("ceo", "ENG-1", 1).map((e) => e.id)).toEqual(["t2"]);
    expect(store.episodesForWorkItem("ceo", "OPS-1", 10).map((e) => e.id)).toEqual(["t1"]);
    expect(store.episodesForWorkItem("ceo", "hash-1", 10)).toEqual([]);
    expect(store.episodesForWorkItem("ceo", "ENG", 10)).toEqual([]);
  });
});
