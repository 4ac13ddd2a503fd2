// Node-local retention (spec: Singleton duties, `maintenance`): the short-horizon tables in
// the node's own database (node.db), each with its horizon and why. Idempotent range
// deletes, so a peer running the same sweep is harmless. A table this build does not have
// (yet) is passed over, so a rule can be listed before the table lands.
import type { Database } from "bun:sqlite";
import { TRANSCRIPT_HORIZON_MS } from "../agent/transcripts.ts";

export interface RetentionRule {
  table: string;
  /** What is kept, in words, for the log and the docs. */
  horizon: string;
  why: string;
  /** Deletes what the rule lets go; returns the rows deleted. */
  sweep(db: Database, now_ms: number): number;
}

// The seats' memory tables are not here: a seat's diary is capped by every node that holds
// it, on that node's own maintenance tick (src/memory/sync.ts, DIARY_CAP at its definition),
// since this duty runs on one node while every holder writes its own seats' rows.
export const RETENTION_RULES: readonly RetentionRule[] = [
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
