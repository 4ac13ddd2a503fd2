// A digest of every replicated table: two copies that applied the same log hold the same
// digests. Used by the replication tests and worth having for an operator comparing nodes.
import type { Database } from "bun:sqlite";
import { createHash } from "node:crypto";
import { REPLICATED_TABLES } from "./schema.ts";

/** Per table: row count and a sha256 over the rows in a canonical (sorted) order. */
export function digestTables(sqlite: Database, tables: readonly string[] = [...REPLICATED_TABLES, "estate_checkpoints"]): Record<string, { rows: number; sha256: string }> {
  const out: Record<string, { rows: number; sha256: string }> = {};
  for (const table of tables) {
    if (!/^[a-z_]+$/.test(table)) throw new Error(`not a table name: ${table}`);
    const rows = sqlite.query<Record<string, unknown>, []>(`SELECT * FROM ${table}`).all().map((r) => JSON.stringify(r));
    rows.sort();
    const h = createHash("sha256");
    for (const r of rows) h.update(r).update("\n");
    out[table] = { rows: rows.length, sha256: h.digest("hex") };
  }
  return out;
}
