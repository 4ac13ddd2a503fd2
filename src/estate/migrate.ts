// Opens a node's estate.db and brings it to the newest migration at boot. Each migration
// runs in its own transaction with its bookkeeping row, so a crash mid-boot leaves the
// file at a migration boundary, never half-way through one.
import { Database } from "bun:sqlite";
import { drizzle, type BunSQLiteDatabase } from "drizzle-orm/bun-sqlite";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { MIGRATIONS, type Migration } from "./migrations.ts";

export type EstateDb = BunSQLiteDatabase<Record<string, never>>;

export interface OpenedDb {
  sqlite: Database;
  db: EstateDb;
}

/**
 * Waits this long for a lock another connection holds (a backup, an operator's sqlite3
 * shell) before an apply fails; longer than any single apply transaction takes.
 */
const BUSY_TIMEOUT_MS = 5_000;

export function openEstateDb(path: string): OpenedDb {
  if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
  const sqlite = new Database(path, { create: true, readwrite: true, strict: true });
  // WAL: readers (API, router answers) never block the applier, nor it them.
  sqlite.run("PRAGMA journal_mode = WAL");
  // NORMAL under WAL may lose the last transactions on power loss, never corrupt: rows and
  // the applied position go together, so the copy simply replays them from the log.
  sqlite.run("PRAGMA synchronous = NORMAL");
  sqlite.run(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  sqlite.run("PRAGMA foreign_keys = OFF");
  migrate(sqlite);
  return { sqlite, db: drizzle({ client: sqlite }) };
}

/** Applies every migration this file has not seen; returns the ids applied now. */
export function migrate(sqlite: Database, migrations: readonly Migration[] = MIGRATIONS): number[] {
  sqlite.run("CREATE TABLE IF NOT EXISTS estate_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL)");
  const done = new Set(
    sqlite
      .query<{ id: number }, []>("SELECT id FROM estate_migrations")
      .all()
      .map((r) => r.id),
  );
  const newest = Math.max(0, ...done);
  const known = Math.max(0, ...migrations.map((m) => m.id));
  if (newest > known) {
    throw new Error(`estate.db is at migration ${newest}, this build knows up to ${known}: run a newer crewlet`);
  }
  const applied: number[] = [];
  for (const m of [...migrations].sort((a, b) => a.id - b.id)) {
    if (done.has(m.id)) continue;
    sqlite.transaction(() => {
      sqlite.run(m.sql);
      sqlite.query("INSERT INTO estate_migrations (id, name) VALUES (?, ?)").run(m.id, m.name);
    })();
    applied.push(m.id);
  }
  return applied;
}
