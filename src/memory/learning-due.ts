// What the learning duty tells a seat's holder (spec: "What the seat learns is learned where
// it is held"; the changelog's latest value for a row is its holder's). The duty runs on one
// node and decides; the holder writes. The wake rides the seat's reflection subject
// (crewlet.agent.{handle}.reflect), so one published while the seat is between holders waits
// there for the next. Pure parts here: the wake's one schema, its message id, and the merge
// of a decided skill into the holder's own row.
import { createHash } from "node:crypto";
import { z } from "zod";
import { HandleSchema } from "../queue/topics.ts";
import { SkillRow, SkillVersionRow, SKILL_STATES, type SkillState } from "./records.ts";
import { decodeWake } from "./reflection.ts";

/**
 * Skills a seat keeps live (active or stale): the clustering keeps the biggest clusters and
 * the prompt picks a few of them. Also the bound on one wake's changes, so a wake is at most
 * 32 × (a 2 KiB body + its row) ≈ 100 KiB, under the broker's 1 MiB message.
 */
export const MAX_SKILLS_PER_SEAT = 32;

export const SkillChange = z.strictObject({
  /** The row the duty decided (its uses and last use are the holder's and are not taken). */
  skill: SkillRow,
  /** A new version to append first, or null when the body did not change. */
  version: SkillVersionRow.nullable(),
  /**
   * What the duty saw when it decided a state move: the holder applies the move only while
   * its row still says this (optimistic concurrency — a use since makes it void). Null: the
   * duty saw no row (a new skill).
   */
  seen: z.strictObject({ state: z.enum(SKILL_STATES), last_used_at: z.number().int().nonnegative().nullable() }).nullable(),
});
export type SkillChange = z.infer<typeof SkillChange>;

export const LearningDue = z.strictObject({
  type: z.literal("learning_due"),
  seat: HandleSchema,
  skills: z.array(SkillChange).max(MAX_SKILLS_PER_SEAT),
  /** Episode compaction: drop the seat's episodes created before this (null: none). */
  compact_before: z.number().int().nonnegative().nullable(),
  at: z.number().int().nonnegative(),
});
export type LearningDue = z.infer<typeof LearningDue>;

export function encodeLearningDue(d: LearningDue): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(LearningDue.parse(d)));
}

/** A wake on the reflection subject is a reflection or a learning wake: tell which by `type`. */
export function wakeType(data: Uint8Array): string | null {
  try {
    const v = JSON.parse(new TextDecoder().decode(data)) as unknown;
    return typeof v === "object" && v !== null && typeof (v as { type?: unknown }).type === "string" ? (v as { type: string }).type : null;
  } catch {
    return null;
  }
}

export function decodeLearningDue(data: Uint8Array): { ok: true; due: LearningDue } | { ok: false; error: string } {
  return decodeWake(LearningDue, data);
}

/**
 * The wake's message id: a digest of what it decides (not of the wake's own `at`), so a
 * retried publish is kept once by the broker. A successor deciding at another instant
 * stamps other times but names the same rows (ids are digests of content), which the
 * holder's apply writes once.
 */
export function learningMsgId(d: Omit<LearningDue, "at">): string {
  const h = createHash("sha256").update(JSON.stringify({ seat: d.seat, skills: d.skills, compact_before: d.compact_before })).digest("hex").slice(0, 32);
  return `learn-${h}`;
}

/**
 * The holder's row after a decided change. The holder owns the use count and the last use
 * (it counts them as prompts carry the skill); the duty owns the terms, name, version and
 * state — but a state move applies only while the holder's row still reads as the duty saw
 * it, so a skill used since the duty looked is not made stale.
 */
export function mergeSkill(local: SkillRow | null, change: SkillChange, now_ms: number): SkillRow {
  const want = change.skill;
  if (local === null) return { ...want, uses: 0, last_used_at: null, updated_at: now_ms };
  const seenMatches = change.seen !== null && change.seen.state === local.state && change.seen.last_used_at === local.last_used_at;
  // A new version is new evidence: it refreshes the skill whatever the holder's row says.
  const refreshed = change.version !== null && want.version !== local.version;
  const take = refreshed || (want.state !== local.state && seenMatches);
  const state: SkillState = take ? want.state : local.state;
  return {
    ...local,
    terms: want.terms,
    name: want.name,
    version: refreshed ? want.version : local.version,
    state,
    state_at: take ? want.state_at : local.state_at,
    updated_at: now_ms,
  };
}
