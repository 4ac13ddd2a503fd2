// The holder's side of a learning wake on a real node.db: idempotent (a wake twice, or a
// successor's same decision, writes nothing twice), a skill keeps SKILL_VERSIONS_KEPT
// versions with its current one always among them, and compaction drops old episodes.
import { Database } from "bun:sqlite";
import { afterEach, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeClock } from "../../src/clock.ts";
import { applyLearning, LearningWakeInvalid } from "../../src/memory/learning-apply.ts";
import type { LearningDue, SkillChange } from "../../src/memory/learning-due.ts";
import { SKILL_VERSIONS_KEPT } from "../../src/memory/learning-plan.ts";
import { skillId, skillVersionId, type EpisodeRow, type SkillRow } from "../../src/memory/records.ts";
import { MemoryStore } from "../../src/memory/store.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function store(): MemoryStore {
  const dir = mkdtempSync(join(tmpdir(), "crewlet-learning-apply-"));
  dirs.push(dir);
  return new MemoryStore(new Database(join(dir, "node.db"), { create: true, strict: true }), new FakeClock(1_000_000));
}

const ID = skillId("ann", ["invoice", "refund"]);
function change(body: string, at: number, seen: SkillChange["seen"]): SkillChange {
  const vid = skillVersionId(ID, body);
  const skill: SkillRow = { id: ID, handle: "ann", terms: ["invoice", "refund"], name: "invoice, refund", state: "active", origin: "clustered", promoted_from: null, version: vid, uses: 0, last_used_at: null, state_at: at, updated_at: at };
  return { skill, version: { id: vid, handle: "ann", skill_id: ID, body, evidence: [], created_at: at }, seen };
}
const wake = (skills: SkillChange[], compact_before: number | null = null): LearningDue => ({ type: "learning_due", seat: "ann", skills, compact_before, at: 0 });

test("a wake applied twice writes once", () => {
  const s = store();
  const w = wake([change("Check the payment first.", 10, null)]);
  expect(applyLearning(s, w, 10)).toMatchObject({ versions: 1, skills: 1, moves: [{ skill: ID, from: null, to: "active" }] });
  expect(applyLearning(s, w, 20)).toMatchObject({ versions: 0, skills: 0, moves: [] });
  expect(s.counts("ann")).toMatchObject({ skills: 1, skill_versions: 1 });
});

test(`a skill keeps its newest ${SKILL_VERSIONS_KEPT} versions, the current one always`, () => {
  const s = store();
  for (let i = 0; i < SKILL_VERSIONS_KEPT + 5; i++) {
    const cur = s.skill("ann", ID);
    applyLearning(s, wake([change(`Body number ${i}.`, 100 + i, cur ? { state: cur.state, last_used_at: cur.last_used_at } : null)]), 100 + i);
  }
  expect(s.counts("ann").skill_versions).toBe(SKILL_VERSIONS_KEPT);
  const cur = s.skill("ann", ID)!;
  expect(s.skillVersion("ann", cur.version)!.body).toBe(`Body number ${SKILL_VERSIONS_KEPT + 4}.`);
  expect(s.skillVersion("ann", skillVersionId(ID, "Body number 4."))).toBeNull();
  expect(s.skillVersion("ann", skillVersionId(ID, "Body number 5."))).not.toBeNull();
});

test("compaction drops the seat's episodes before the cutoff, and no other seat's", () => {
  const s = store();
  const ep = (handle: string, id: string, at: number): EpisodeRow => ({ id, handle, work_key: id, turn_id: id, trigger_ids: [], conversation: "c", counterparty: null, outcome: "completed", summary: "x", work_items: [], created_at: at });
  s.writeEpisode(ep("ann", "old", 5));
  s.writeEpisode(ep("ann", "new", 50));
  s.writeEpisode(ep("bob", "old", 5));
  expect(applyLearning(s, wake([], 10), 60).compacted).toBe(1);
  expect(s.recentEpisodes("ann", 10).map((e) => e.id)).toEqual(["new"]);
  expect(s.counts("bob").episodes).toBe(1);
});

test("a wake carrying another seat's row is refused whole, before anything is written", () => {
  const s = store();
  const other = change("Check the payment first.", 10, null);
  const w = wake([change("Fine.", 10, null), { ...other, skill: { ...other.skill, handle: "bob" } }], 100);
  expect(() => applyLearning(s, w, 10)).toThrow(LearningWakeInvalid);
  expect(s.counts("ann")).toMatchObject({ skills: 0, skill_versions: 0 });
});
