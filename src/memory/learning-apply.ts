// The holder's side of a learning wake: the duty's decided changes written into this node's
// copy of the seat's memory, in one transaction, each row decoded by its one schema on the
// way in (store.ts). Idempotent: a version already here stands (append-only), a skill whose
// merged row equals the local one is not written again, so a wake delivered twice — or the
// same decision made again by a killed duty holder's successor — changes nothing twice.
import type { LearningDue } from "./learning-due.ts";
import { SKILL_VERSIONS_KEPT } from "./learning-plan.ts";
import { mergeSkill } from "./learning-due.ts";
import type { SkillRow } from "./records.ts";
import type { MemoryStore } from "./store.ts";

export interface LearningApplied {
  versions: number;
  /** Old versions dropped past SKILL_VERSIONS_KEPT per skill. */
  versions_dropped: number;
  skills: number;
  compacted: number;
  /** State moves that took (the lifecycle's events), in the wake's order. */
  moves: { skill: string; name: string; from: SkillRow["state"] | null; to: SkillRow["state"] }[];
}

export class LearningWakeInvalid extends Error {
  constructor(message: string) {
    super(`learning wake invalid: ${message}`);
    this.name = "LearningWakeInvalid";
  }
}

export function applyLearning(store: MemoryStore, due: LearningDue, now_ms: number): LearningApplied {
  for (const c of due.skills) {
    // A wake is for one seat: a row of another seat's would land in the wrong memory.
    if (c.skill.handle !== due.seat || (c.version && (c.version.handle !== due.seat || c.version.skill_id !== c.skill.id))) {
      throw new LearningWakeInvalid(`skill ${c.skill.id} is not ${due.seat}'s`);
    }
  }
  const out: LearningApplied = { versions: 0, versions_dropped: 0, skills: 0, compacted: 0, moves: [] };
  store.sqlite.transaction(() => {
    for (const c of due.skills) {
      if (c.version && store.writeSkillVersion(c.version)) out.versions += 1;
      const local = store.skill(due.seat, c.skill.id);
      const merged = mergeSkill(local, c, now_ms);
      out.versions_dropped += store.dropOldSkillVersions(due.seat, merged.id, merged.version, SKILL_VERSIONS_KEPT);
      if (local !== null && sameSkill(local, merged)) continue;
      store.putSkill(merged);
      out.skills += 1;
      if (local?.state !== merged.state) out.moves.push({ skill: merged.id, name: merged.name, from: local?.state ?? null, to: merged.state });
    }
    if (due.compact_before !== null) out.compacted = store.dropEpisodesBefore(due.seat, due.compact_before);
  })();
  return out;
}

function sameSkill(a: SkillRow, b: SkillRow): boolean {
  return JSON.stringify({ ...a, updated_at: 0 }) === JSON.stringify({ ...b, updated_at: 0 });
}
