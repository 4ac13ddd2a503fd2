// Node-local retention (spec: Singleton duties, `maintenance`): the short-horizon tables in
// the node's own database (node.db), each with its horizon and why. Idempotent range
// deletes, so a peer running the same sweep is harmless. A table this build does not have
// (yet) is passed over, so a rule can be listed before the table lands.
import type { Database } from "bun:sqlite";
import { DIARY_CAP } from "../memory/store.ts";
import { TRANSCRIPT_HORIZON_MS } from "../agent/transcripts.ts";

export interface RetentionRule {
  table: string;
  /** What is kept, in words, for the log and the docs. */
  horizon: string;
  why: string;
  /** Deletes what the rule lets go; returns the rows deleted. */
  sweep(db: Database, now_ms: number): number;
}

/**
 * Episodes kept per seat. Recall reads a seat's newest episodes (at most 1,000 a read:
 * agent/episodes.ts), and the whole of every turn is on the events stream, so older rows
 * are a cost with no reader. Counted per seat, never by age: memory outlives a removed
 * seat (spec: The removed seat — a seat added back reattaches to it).
 */
export const EPISODES_PER_SEAT_MAX = 1_000;

export const RETENTION_RULES: readonly RetentionRule[] = [
  {
    // The seat diary's cap (src/memory/store.ts DIARY_CAP, with its reason): the oldest
    // notes beyond it go. Not replicated, like every memory delete: a later hydration may
    // bring dropped notes back and the next sweep drops them again. Each node's own copies
    // are also capped by MemorySync.capDiaries.
    table: "memory_diary",
    horizon: `newest ${DIARY_CAP} notes per seat`,
    why: "recall and memory_search read a seat's newer notes; older knowledge belongs in the knowledge base",
    sweep(db) {
      return db
        .query(
          `DELETE FROM memory_diary WHERE rowid IN (
             SELECT rowid FROM (
               SELECT rowid, ROW_NUMBER() OVER (PARTITION BY handle ORDER BY created_at DESC, seq DESC, rowid DESC) AS n FROM memory_diary
             ) WHERE n > $max
           )`,
        )
        .run({ $max: DIARY_CAP }).changes;
    },
  },
  {
    table: "episodes",
    horizon: `newest ${EPISODES_PER_SEAT_MAX} per seat`,
    why: "recall reads a seat's newest episodes; the full turn is on the events stream",
    sweep(db) {
      return db
        .query(
          `DELETE FROM episodes WHERE rowid IN (
             SELECT rowid FROM (
               SELECT rowid, ROW_NUMBER() OVER (PARTITION BY agent_handle ORDER BY created_at DESC, rowid DESC) AS n FROM episodes
             ) WHERE n > $max
           )`,
        )
        .run({ $max: EPISODES_PER_SEAT_MAX }).changes;
    },
  },
  {
    // Each insert trims its own seat and the horizon (src/agent/transcripts.ts); this sweep
    // lets the horizon go on a node that has stopped running turns too.
    table: "turn_transcripts",
    horizon: `${TRANSCRIPT_HORIZON_MS / 86_400_000} days`,
    why: "a transcript answers 'what did it do this week'; the turn's outcome stays in its episode",
    sweep(db, now_ms) {
      return db.query(`DELETE FROM turn_transcripts WHERE started_at < $before`).run({ $before: now_ms - TRANSCRIPT_HORIZON_MS }).changes;
    },
  },
];

export interface RetentionResult {
  table: string;
  deleted: number;
  horizon: string;
}

export function runRetention(db: Database, now_ms: number, rules: readonly RetentionRule[] = RETENTION_RULES): RetentionResult[] {
  const tables = new Set((db.query(`SELECT name FROM sqlite_master WHERE type = 'table'`).all() as { name: string }[]).map((r) => r.name));
  const out: RetentionResult[] = [];
  for (const rule of rules) {
    if (!tables.has(rule.table)) continue;
    out.push({ table: rule.table, deleted: rule.sweep(db, now_ms), horizon: rule.horizon });
  }
  return out;
}
