// The memory tables in node.db (drizzle, bun:sqlite). Every table is keyed (handle, id): a
// row's id is its changelog subject token, unique within its seat. `seq` is this node's
// change sequence (spec: "What is new is found by that change sequence"): stamped from one
// per-node counter on every insert and every update of a mutable row, 0 on a row carried
// in from the changelog (it is already there), and what a flush publishes past.
import type { Database } from "bun:sqlite";
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

export const diary = sqliteTable(
  "memory_diary",
  {
    handle: text("handle").notNull(),
    id: text("id").notNull(),
    content: text("content").notNull(),
    source: text("source").notNull(),
    turn_id: text("turn_id"),
    work_key: text("work_key"),
    created_at: integer("created_at").notNull(),
    seq: integer("seq").notNull(),
  },
  (t) => [primaryKey({ columns: [t.handle, t.id] }), index("memory_diary_recent").on(t.handle, t.created_at), index("memory_diary_seq").on(t.handle, t.seq)],
);

export const episodes = sqliteTable(
  "memory_episodes",
  {
    handle: text("handle").notNull(),
    id: text("id").notNull(),
    /** NULL for an unkeyed turn: SQLite's NULLs are distinct, so those never collide. */
    work_key: text("work_key"),
    turn_id: text("turn_id").notNull(),
    /** JSON array. */
    trigger_ids: text("trigger_ids").notNull(),
    conversation: text("conversation").notNull(),
    counterparty: text("counterparty"),
    outcome: text("outcome").notNull(),
    summary: text("summary").notNull(),
    /** JSON array. */
    work_items: text("work_items").notNull(),
    created_at: integer("created_at").notNull(),
    seq: integer("seq").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.handle, t.id] }),
    // One episode per unit of work per seat (spec: Keying a write on the work).
    uniqueIndex("memory_episodes_work").on(t.handle, t.work_key),
    index("memory_episodes_recent").on(t.handle, t.created_at),
    index("memory_episodes_seq").on(t.handle, t.seq),
  ],
);

export const counterparties = sqliteTable(
  "memory_counterparties",
  {
    handle: text("handle").notNull(),
    id: text("id").notNull(),
    counterparty: text("counterparty").notNull(),
    interactions: integer("interactions").notNull(),
    last_work_key: text("last_work_key"),
    last_seen: integer("last_seen").notNull(),
    note: text("note").notNull(),
    updated_at: integer("updated_at").notNull(),
    seq: integer("seq").notNull(),
  },
  (t) => [primaryKey({ columns: [t.handle, t.id] }), index("memory_counterparties_seq").on(t.handle, t.seq)],
);

export const onboarding = sqliteTable(
  "memory_onboarding",
  {
    handle: text("handle").notNull(),
    id: text("id").notNull(),
    done_at: integer("done_at").notNull(),
    detail: text("detail").notNull(),
    seq: integer("seq").notNull(),
  },
  (t) => [primaryKey({ columns: [t.handle, t.id] })],
);

export const conversations = sqliteTable(
  "memory_conversations",
  {
    handle: text("handle").notNull(),
    id: text("id").notNull(),
    conversation: text("conversation").notNull(),
    turns: integer("turns").notNull(),
    last_turn_id: text("last_turn_id").notNull(),
    /** JSON array. */
    last_trigger_ids: text("last_trigger_ids").notNull(),
    last_at: integer("last_at").notNull(),
    seq: integer("seq").notNull(),
  },
  (t) => [primaryKey({ columns: [t.handle, t.id] }), index("memory_conversations_seq").on(t.handle, t.seq)],
);

/** A synthesized skill (mutable: state, version, use count). `terms` is a JSON array. */
export const skills = sqliteTable(
  "memory_skills",
  {
    handle: text("handle").notNull(),
    id: text("id").notNull(),
    terms: text("terms").notNull(),
    name: text("name").notNull(),
    state: text("state").notNull(),
    origin: text("origin").notNull(),
    promoted_from: text("promoted_from"),
    version: text("version").notNull(),
    uses: integer("uses").notNull(),
    last_used_at: integer("last_used_at"),
    state_at: integer("state_at").notNull(),
    updated_at: integer("updated_at").notNull(),
    seq: integer("seq").notNull(),
  },
  (t) => [primaryKey({ columns: [t.handle, t.id] }), index("memory_skills_seq").on(t.handle, t.seq)],
);

/** A skill's versions: append-only. `evidence` is a JSON array. */
export const skillVersions = sqliteTable(
  "memory_skill_versions",
  {
    handle: text("handle").notNull(),
    id: text("id").notNull(),
    skill_id: text("skill_id").notNull(),
    body: text("body").notNull(),
    evidence: text("evidence").notNull(),
    created_at: integer("created_at").notNull(),
    seq: integer("seq").notNull(),
  },
  (t) => [primaryKey({ columns: [t.handle, t.id] }), index("memory_skill_versions_seq").on(t.handle, t.seq), index("memory_skill_versions_skill").on(t.handle, t.skill_id)],
);

/** Per seat: the highest change sequence a flush has published. */
export const published = sqliteTable("memory_published", {
  handle: text("handle").primaryKey(),
  seq: integer("seq").notNull(),
});

/** The node's one change-sequence counter (a single row, k = 'seq'). */
export const counter = sqliteTable("memory_counter", {
  k: text("k").primaryKey(),
  seq: integer("seq").notNull(),
});

/**
 * The SQL behind the tables above, run at open (idempotent). The FTS index holds the
 * searchable text of the diary and the episodes (memory_search); triggers keep it in step,
 * so a write and its index entry are one statement's transaction.
 */
export const MEMORY_DDL = `
CREATE TABLE IF NOT EXISTS memory_diary (
  handle TEXT NOT NULL, id TEXT NOT NULL, content TEXT NOT NULL, source TEXT NOT NULL,
  turn_id TEXT, work_key TEXT, created_at INTEGER NOT NULL, seq INTEGER NOT NULL,
  PRIMARY KEY (handle, id)
);
CREATE INDEX IF NOT EXISTS memory_diary_recent ON memory_diary (handle, created_at);
CREATE INDEX IF NOT EXISTS memory_diary_seq ON memory_diary (handle, seq);
CREATE TABLE IF NOT EXISTS memory_episodes (
  handle TEXT NOT NULL, id TEXT NOT NULL, work_key TEXT, turn_id TEXT NOT NULL,
  trigger_ids TEXT NOT NULL, conversation TEXT NOT NULL, counterparty TEXT, outcome TEXT NOT NULL,
  summary TEXT NOT NULL, work_items TEXT NOT NULL, created_at INTEGER NOT NULL, seq INTEGER NOT NULL,
  PRIMARY KEY (handle, id)
);
CREATE UNIQUE INDEX IF NOT EXISTS memory_episodes_work ON memory_episodes (handle, work_key);
CREATE INDEX IF NOT EXISTS memory_episodes_recent ON memory_episodes (handle, created_at);
CREATE INDEX IF NOT EXISTS memory_episodes_seq ON memory_episodes (handle, seq);
CREATE TABLE IF NOT EXISTS memory_counterparties (
  handle TEXT NOT NULL, id TEXT NOT NULL, counterparty TEXT NOT NULL, interactions INTEGER NOT NULL,
  last_work_key TEXT, last_seen INTEGER NOT NULL, note TEXT NOT NULL, updated_at INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  PRIMARY KEY (handle, id)
);
CREATE INDEX IF NOT EXISTS memory_counterparties_seq ON memory_counterparties (handle, seq);
CREATE TABLE IF NOT EXISTS memory_onboarding (
  handle TEXT NOT NULL, id TEXT NOT NULL, done_at INTEGER NOT NULL, detail TEXT NOT NULL, seq INTEGER NOT NULL,
  PRIMARY KEY (handle, id)
);
CREATE TABLE IF NOT EXISTS memory_conversations (
  handle TEXT NOT NULL, id TEXT NOT NULL, conversation TEXT NOT NULL, turns INTEGER NOT NULL,
  last_turn_id TEXT NOT NULL, last_trigger_ids TEXT NOT NULL, last_at INTEGER NOT NULL, seq INTEGER NOT NULL,
  PRIMARY KEY (handle, id)
);
CREATE INDEX IF NOT EXISTS memory_conversations_seq ON memory_conversations (handle, seq);
CREATE TABLE IF NOT EXISTS memory_skills (
  handle TEXT NOT NULL, id TEXT NOT NULL, terms TEXT NOT NULL, name TEXT NOT NULL, state TEXT NOT NULL,
  origin TEXT NOT NULL, promoted_from TEXT, version TEXT NOT NULL, uses INTEGER NOT NULL, last_used_at INTEGER,
  state_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, seq INTEGER NOT NULL,
  PRIMARY KEY (handle, id)
);
CREATE INDEX IF NOT EXISTS memory_skills_seq ON memory_skills (handle, seq);
CREATE TABLE IF NOT EXISTS memory_skill_versions (
  handle TEXT NOT NULL, id TEXT NOT NULL, skill_id TEXT NOT NULL, body TEXT NOT NULL, evidence TEXT NOT NULL,
  created_at INTEGER NOT NULL, seq INTEGER NOT NULL,
  PRIMARY KEY (handle, id)
);
CREATE INDEX IF NOT EXISTS memory_skill_versions_seq ON memory_skill_versions (handle, seq);
CREATE INDEX IF NOT EXISTS memory_skill_versions_skill ON memory_skill_versions (handle, skill_id);
CREATE TABLE IF NOT EXISTS memory_published (handle TEXT PRIMARY KEY, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS memory_counter (k TEXT PRIMARY KEY, seq INTEGER NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(handle UNINDEXED, kind UNINDEXED, id UNINDEXED, body);
CREATE TRIGGER IF NOT EXISTS memory_diary_fts_ins AFTER INSERT ON memory_diary BEGIN
  INSERT INTO memory_fts (handle, kind, id, body) VALUES (new.handle, 'diary', new.id, new.content);
END;
CREATE TRIGGER IF NOT EXISTS memory_diary_fts_del AFTER DELETE ON memory_diary BEGIN
  DELETE FROM memory_fts WHERE handle = old.handle AND kind = 'diary' AND id = old.id;
END;
CREATE TRIGGER IF NOT EXISTS memory_episodes_fts_ins AFTER INSERT ON memory_episodes BEGIN
  INSERT INTO memory_fts (handle, kind, id, body) VALUES (new.handle, 'episode', new.id, new.summary);
END;
CREATE TRIGGER IF NOT EXISTS memory_episodes_fts_del AFTER DELETE ON memory_episodes BEGIN
  DELETE FROM memory_fts WHERE handle = old.handle AND kind = 'episode' AND id = old.id;
END;
-- A note's or an episode's embedding (src/memory/vectors.ts), beside the row rather than in
-- it, so the rows stay immutable; it goes when its row goes. seq is stamped when it is set
-- (the changelog carries it as diary_vectors / episode_vectors), embedded_at by the filler.
-- A node.db made before those two columns gains them in upgradeMemoryVectors.
CREATE TABLE IF NOT EXISTS memory_vectors (
  handle TEXT NOT NULL, kind TEXT NOT NULL, id TEXT NOT NULL, model TEXT NOT NULL, dims INTEGER NOT NULL,
  vector BLOB NOT NULL, embedded_at INTEGER NOT NULL DEFAULT 0, seq INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (handle, kind, id)
);
CREATE TRIGGER IF NOT EXISTS memory_diary_vec_del AFTER DELETE ON memory_diary BEGIN
  DELETE FROM memory_vectors WHERE handle = old.handle AND kind = 'diary' AND id = old.id;
END;
CREATE TRIGGER IF NOT EXISTS memory_episodes_vec_del AFTER DELETE ON memory_episodes BEGIN
  DELETE FROM memory_vectors WHERE handle = old.handle AND kind = 'episode' AND id = old.id;
END;
`;

/**
 * memory_vectors as the search merge made it (no embedded_at, no seq) gains both, 0: those
 * vectors were made before they travelled, so none is owed to the changelog (a next holder
 * re-embeds them once, as it did before) and any carried one is newer. Idempotent.
 */
export function upgradeMemoryVectors(sqlite: Database): void {
  const cols = sqlite.query<{ name: string }, []>("PRAGMA table_info(memory_vectors)").all();
  if (!cols.some((c) => c.name === "embedded_at")) sqlite.exec("ALTER TABLE memory_vectors ADD COLUMN embedded_at INTEGER NOT NULL DEFAULT 0");
  if (!cols.some((c) => c.name === "seq")) sqlite.exec("ALTER TABLE memory_vectors ADD COLUMN seq INTEGER NOT NULL DEFAULT 0");
  sqlite.exec("CREATE INDEX IF NOT EXISTS memory_vectors_seq ON memory_vectors (handle, seq)");
}
