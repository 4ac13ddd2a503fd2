// A seat's episodes in the node store (node.db): one row per unit of work, keyed on the
// work rather than fenced on the writer (spec: Seat Ownership § "Keying a write on the
// work"). A unique index on (agent_handle, work_key) plus INSERT … ON CONFLICT DO NOTHING:
// one statement, no read-then-write, so two writers racing in one process cannot both
// insert. work_key is NULL for an unkeyed turn, and SQLite treats NULLs as distinct, so
// unkeyed turns are never deduped against each other.
import type { Database } from "bun:sqlite";

/** An episode's summary is what recall shows; the whole turn is in the events stream. */
export const MAX_SUMMARY_CHARS = 4_000;

export interface Episode {
  id: string;
  agent_handle: string;
  /** Null for an unkeyed turn (no ledgered trigger). */
  work_key: string | null;
  turn_id: string;
  trigger_ids: string[];
  conversation: string;
  outcome: string;
  summary: string;
  created_at: number;
}

export const EPISODES_DDL = [
  `CREATE TABLE IF NOT EXISTS episodes (
     id TEXT PRIMARY KEY,
     agent_handle TEXT NOT NULL,
     work_key TEXT,
     turn_id TEXT NOT NULL,
     trigger_ids TEXT NOT NULL,
     conversation TEXT NOT NULL,
     outcome TEXT NOT NULL,
     summary TEXT NOT NULL,
     created_at INTEGER NOT NULL
   )`,
  `CREATE UNIQUE INDEX IF NOT EXISTS episodes_work ON episodes (agent_handle, work_key)`,
  `CREATE INDEX IF NOT EXISTS episodes_recent ON episodes (agent_handle, created_at)`,
];

export class EpisodeStore {
  constructor(private readonly db: Database) {
    for (const ddl of EPISODES_DDL) db.run(ddl);
  }

  /** True when this call inserted the row; false when the (handle, work_key) was there. */
  insert(e: Episode): boolean {
    const res = this.db
      .query(
        `INSERT INTO episodes (id, agent_handle, work_key, turn_id, trigger_ids, conversation, outcome, summary, created_at)
         VALUES ($id, $agent_handle, $work_key, $turn_id, $trigger_ids, $conversation, $outcome, $summary, $created_at)
         ON CONFLICT DO NOTHING`,
      )
      .run({
        $id: e.id,
        $agent_handle: e.agent_handle,
        // An empty key is NULL, never '': '' would collide every unkeyed turn into one row.
        $work_key: e.work_key === null || e.work_key === "" ? null : e.work_key,
        $turn_id: e.turn_id,
        $trigger_ids: JSON.stringify(e.trigger_ids),
        $conversation: e.conversation,
        $outcome: e.outcome,
        $summary: e.summary.slice(0, MAX_SUMMARY_CHARS),
        $created_at: e.created_at,
      });
    return res.changes === 1;
  }

  /** The seat's newest episodes, newest first (bounded by `limit`). */
  recent(agent_handle: string, limit: number): Episode[] {
    const rows = this.db
      .query(`SELECT * FROM episodes WHERE agent_handle = $h ORDER BY created_at DESC, rowid DESC LIMIT $limit`)
      .all({ $h: agent_handle, $limit: Math.max(1, Math.min(limit, 1000)) }) as (Omit<Episode, "trigger_ids"> & { trigger_ids: string })[];
    return rows.map((r) => ({ ...r, trigger_ids: JSON.parse(r.trigger_ids) as string[] }));
  }
}
