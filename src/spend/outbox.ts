// The charges this node owes the fleet's budget counters, kept in node.db until a counter
// record says it has them (issue 16: "never a lost charge"). A model round's usage is
// written here first — one row per capped (scope, window) record, in one transaction — and
// then added to the record by counters.ts. The row's sequence is its round's identity on
// that record: a record carries, per outbox, the highest sequence it has applied (`marks`),
// so a charge whose write outcome was unknown (a timeout after the write landed) is never
// applied twice, and one that did not land is applied after a restart.
//
// The outbox's own id (minted when its table is created) names it in the records' marks,
// not the node id or the store id: a scratch wipe keeps the store id but starts node.db
// (and the sequence) again, and a fresh sequence under an old name would read as applied.
import type { Database } from "bun:sqlite";
import { randomBytes } from "node:crypto";
import type { Usage } from "./budget.ts";

/**
 * Rows kept at most. One row per capped record per round: 100,000 is days of a busy
 * company's rounds with the store unreachable, a few MB of node.db. Past it the oldest row
 * is dropped (logged as budget_charge_dropped by the caller): the bound every queue needs.
 */
export const OUTBOX_ROWS_MAX = 100_000;

export interface OwedRow {
  seq: number;
  key: string;
  input_tokens: number;
  output_tokens: number;
  cost_micros: number;
}

export class ChargeOutbox {
  /** This outbox's name in the records' marks. */
  readonly id: string;
  private count: number;

  constructor(private readonly db: Database) {
    db.exec(`CREATE TABLE IF NOT EXISTS budget_outbox_meta (id TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS budget_outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        key TEXT NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        cost_micros INTEGER NOT NULL,
        at INTEGER NOT NULL
      );
      CREATE INDEX IF NOT EXISTS budget_outbox_key ON budget_outbox(key, seq);`);
    const row = db.query<{ id: string }, []>("SELECT id FROM budget_outbox_meta LIMIT 1").get();
    if (row) this.id = row.id;
    else {
      this.id = randomBytes(8).toString("hex");
      db.query("INSERT INTO budget_outbox_meta (id) VALUES (?)").run(this.id);
    }
    this.count = db.query<{ n: number }, []>("SELECT count(*) AS n FROM budget_outbox").get()!.n;
  }

  /** One round's charge to each of `keys`, durably, in one transaction. Returns rows dropped to stay bounded. */
  add(keys: readonly string[], usage: Usage, cost_micros: number, at: number): OwedRow[] {
    const dropped: OwedRow[] = [];
    this.db.transaction(() => {
      const insert = this.db.query("INSERT INTO budget_outbox (key, input_tokens, output_tokens, cost_micros, at) VALUES (?, ?, ?, ?, ?)");
      for (const k of keys) insert.run(k, usage.input_tokens, usage.output_tokens, cost_micros, at);
      this.count += keys.length;
      const over = this.count - OUTBOX_ROWS_MAX;
      if (over > 0) {
        dropped.push(...this.db.query<OwedRow, [number]>("SELECT seq, key, input_tokens, output_tokens, cost_micros FROM budget_outbox ORDER BY seq LIMIT ?").all(over));
        this.db.query("DELETE FROM budget_outbox WHERE seq IN (SELECT seq FROM budget_outbox ORDER BY seq LIMIT ?)").run(over);
        this.count -= over;
      }
    })();
    return dropped;
  }

  /** What is owed to one record, oldest first. */
  owed(key: string): OwedRow[] {
    return this.db.query<OwedRow, [string]>("SELECT seq, key, input_tokens, output_tokens, cost_micros FROM budget_outbox WHERE key = ? ORDER BY seq").all(key);
  }

  /** Records something is owed to (at most `limit`, the longest owed first). */
  keys(limit: number): string[] {
    return this.db.query<{ key: string }, [number]>("SELECT key FROM budget_outbox GROUP BY key ORDER BY min(seq) LIMIT ?").all(limit).map((r) => r.key);
  }

  /** The record has everything up to `seq` of this outbox: those rows are settled. */
  settle(key: string, seq: number): void {
    const r = this.db.query("DELETE FROM budget_outbox WHERE key = ? AND seq <= ?").run(key, seq);
    this.count -= r.changes;
  }

  size(): number {
    return this.count;
  }
}
