// The object collector's decision as a table: which objects go, which uploads are
// abandoned, and that a copy that is not whole (behind, restoring, wrong, none) deletes
// nothing — a named object is never in the plan, whatever else the row says.
import { describe, expect, test } from "bun:test";
import { copyState, OBJECT_KEEP_MS, planCollection, UNFINISHED_AFTER_MS, type CollectFacts } from "../../src/objects/collect.ts";

const NOW = 10 * OBJECT_KEEP_MS;
const old = NOW - OBJECT_KEEP_MS - 1;
const young = NOW - OBJECT_KEEP_MS + 60_000;
const obj = (key: string, stored_at_ms: number) => ({ key, size: 1, stored_at_ms });
const WHOLE = { whole: true } as const;
const RESTORING = { whole: false, reason: "the chat copy is out of service: restoring from snapshot" } as const;

interface Row {
  name: string;
  facts: Partial<CollectFacts>;
  delete: string[];
  abandon?: string[];
  held?: string | null;
  young?: number;
  deferred?: number;
  missing?: string[];
}

const rows: Row[] = [
  { name: "nothing stored", facts: {}, delete: [] },
  { name: "an old unnamed object goes", facts: { objects: [obj("fl-a", old)] }, delete: ["fl-a"] },
  { name: "an old NAMED object stays", facts: { objects: [obj("fl-a", old)], named: new Set(["fl-a"]) }, delete: [] },
  { name: "a young unnamed object waits (its row may be on its way)", facts: { objects: [obj("fl-a", young)] }, delete: [], young: 1 },
  { name: "exactly a day old goes", facts: { objects: [obj("fl-a", NOW - OBJECT_KEEP_MS)] }, delete: ["fl-a"] },
  {
    name: "mixed: only the old unnamed ones, oldest first",
    facts: { objects: [obj("fl-b", old - 5), obj("fl-n", old - 9), obj("fl-a", old - 10), obj("fl-y", young)], named: new Set(["fl-n"]) },
    delete: ["fl-a", "fl-b"],
    young: 1,
  },
  { name: "a copy restoring deletes nothing", facts: { objects: [obj("fl-a", old)], copy: RESTORING }, delete: [], held: RESTORING.reason },
  { name: "a copy behind deletes nothing", facts: { objects: [obj("fl-a", old)], copy: { whole: false, reason: "the tracker copy is behind" } }, delete: [], held: "the tracker copy is behind" },
  {
    name: "a copy restoring still abandons unfinished uploads (no row names one)",
    facts: { copy: RESTORING, unfinished: [{ nuid: "N1", last_chunk_ms: NOW - UNFINISHED_AFTER_MS, chunks: 3 }] },
    delete: [],
    abandon: ["N1"],
    held: RESTORING.reason,
  },
  { name: "an upload still adding chunks is left alone", facts: { unfinished: [{ nuid: "N1", last_chunk_ms: NOW - 1_000, chunks: 3 }] }, delete: [], abandon: [] },
  { name: "the per-pass bound defers the rest", facts: { objects: [obj("fl-a", old - 2), obj("fl-b", old - 1), obj("fl-c", old)], max_deletes: 2 }, delete: ["fl-a", "fl-b"], deferred: 1 },
  { name: "a shortened keep (tests) is honoured", facts: { objects: [obj("fl-a", NOW - 5_000)], keep_ms: 5_000 }, delete: ["fl-a"] },
  { name: "audit: a name read before the listing whose object is not stored is missing", facts: { objects: [obj("fl-a", young)], named: new Set(["fl-a", "fl-m"]), namedBefore: new Set(["fl-a", "fl-m"]) }, delete: [], missing: ["fl-m"] },
  { name: "audit: a name read only after the listing proves nothing (its object may be newer)", facts: { objects: [], named: new Set(["fl-new"]), namedBefore: new Set() }, delete: [], missing: [] },
  { name: "audit: nothing is judged missing while the copy is not whole", facts: { copy: RESTORING, namedBefore: new Set(["fl-m"]) }, delete: [], held: RESTORING.reason, missing: [] },
];

describe("planCollection", () => {
  for (const r of rows) {
    test(r.name, () => {
      const plan = planCollection({ objects: [], named: new Set(), copy: WHOLE, unfinished: [], now_ms: NOW, ...r.facts });
      expect(plan.delete).toEqual(r.delete);
      expect(plan.abandon).toEqual(r.abandon ?? []);
      expect(plan.held).toBe(r.held ?? null);
      expect(plan.young).toBe(r.young ?? 0);
      expect(plan.deferred).toBe(r.deferred ?? 0);
      expect(plan.missing).toEqual(r.missing ?? []);
      // Whatever the row: no named object is ever in the plan.
      for (const k of r.facts.named ?? []) expect(plan.delete).not.toContain(k);
    });
  }
});

describe("copyState", () => {
  const level = { state: "level", in_service: true };
  const table: { name: string; domains: Parameters<typeof copyState>[0]; whole: boolean; reason?: string }[] = [
    { name: "no copy", domains: null, whole: false, reason: "this node holds no copy of the estate" },
    { name: "every domain level", domains: { tracker: level, pages: level, chat: level }, whole: true },
    { name: "one behind", domains: { tracker: level, pages: { state: "behind", in_service: true }, chat: level }, whole: false, reason: "the pages copy is behind" },
    { name: "one unknown", domains: { tracker: { state: "unknown", in_service: true }, pages: level, chat: level }, whole: false, reason: "the tracker copy is unknown" },
    {
      name: "one out of service (a restore)",
      domains: { tracker: level, pages: level, chat: { state: "wrong", in_service: false, reason: "log starts at 40, copy applied only to 3" } },
      whole: false,
      reason: "the chat copy is out of service: log starts at 40, copy applied only to 3",
    },
  ];
  for (const r of table) {
    test(r.name, () => {
      const s = copyState(r.domains);
      expect(s.whole).toBe(r.whole);
      if (!s.whole) expect(s.reason).toBe(r.reason!);
    });
  }
});
