// Node-local retention (spec: Singleton duties, `maintenance`): the short-horizon tables in
// the node's own database (node.db), each with its horizon and why, swept by EVERY node on
// its own maintenance tick (startNodeRetention) — not by the maintenance duty, which runs on
// one node of the fleet while every node (a leaf too) has its own node.db. Idempotent range
// deletes. A table this build does not have (yet) is passed over, so a rule can be listed
// before the table lands.
import type { Database } from "bun:sqlite";
import { TRANSCRIPT_HORIZON_MS } from "../agent/transcripts.ts";
import type { Clock, Timer } from "../clock.ts";
import type { Logger } from "../log.ts";

export interface RetentionRule {
  table: string;
  /** What is kept, in words, for the log and the docs. */
  horizon: string;
  why: string;
  /** Deletes what the rule lets go; returns the rows deleted. */
  sweep(db: Database, now_ms: number): number;
}

// The seats' memory tables are not table rules here:
// - memory_diary is capped per seat over the seats this node holds (MemorySync.capDiaries,
//   DIARY_CAP at its definition), run by the same per-node tick as one of its `sweeps`.
// - memory_episodes, memory_counterparties, memory_conversations have no horizon and no cap
//   on purpose. They are the seat's memory that travels with it (spec: A seat's memory
//   follows it; The removed seat — memory is kept, so a seat added back reattaches to it),
//   and the memory changelog keeps every row for good (max_age 0, one message per row): a
//   local delete is never replicated, so the next hydration of the seat would bring every
//   row back. A bound on them belongs where the changelog is bounded too — the spec's
//   episode compaction is a `learning` pass that rewrites them, not a delete. Their growth is
//   bounded by the work the seat does: an episode per unit of work, a counterparty row per
//   distinct counterparty, a conversation row per conversation (each row small and capped by
//   the memory schemas' maxBytes).
// - The old `episodes` table (agent/episodes.ts) is created by no node any more (its rows
//   moved to memory_episodes), so it has no rule: a node.db from an older build keeps what
//   it had, and nothing is written to it.
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

/**
 * A per-node sweep that is not a table rule: the diary cap over the seats this node holds
 * (MemorySync.capDiaries), which only the node's memory sync knows. Logs what it did.
 */
export interface NodeSweep {
  name: string;
  run(): void;
}

/**
 * Every node's own retention: RETENTION_RULES over its node.db, then each of `sweeps`, once
 * per `every_ms` (the node passes MAINTENANCE_TICK_MS, as for the audit trim). One tick for
 * all of node.db's retention. Never throws: a failing rule or sweep is logged and the rest
 * still run; the next tick tries again.
 */
export function startNodeRetention(o: { db: () => Database | null; sweeps?: readonly NodeSweep[]; clock: Clock; log: Logger; every_ms: number }): Timer {
  return o.clock.setInterval(() => sweepNode(o), o.every_ms);
}

/** One tick of startNodeRetention. */
function sweepNode(o: { db: () => Database | null; sweeps?: readonly NodeSweep[]; clock: Clock; log: Logger }): void {
  const db = o.db();
  if (db) {
    try {
      for (const r of runRetention(db, o.clock.now())) if (r.deleted > 0) o.log.info("retention_swept", { table: r.table, deleted: r.deleted, horizon: r.horizon });
    } catch (err) {
      o.log.warn("retention_failed", { error: err as Error });
    }
  }
  for (const s of o.sweeps ?? []) {
    try {
      s.run();
    } catch (err) {
      o.log.warn("retention_failed", { sweep: s.name, error: err as Error });
    }
  }
}
