// The estate's migrations as TS strings, so `bun build --compile` carries them inside the
// binary and nothing reads a migrations folder (or runs drizzle-kit) at runtime. Append
// only: a shipped migration is never edited, because a node that applied it already
// would never see the edit. test/estate/schema.test.ts holds these against schema.ts.

export interface Migration {
  id: number;
  name: string;
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    id: 1,
    name: "estate",
    sql: `
CREATE TABLE estate_checkpoints (
  domain TEXT PRIMARY KEY,
  stream TEXT NOT NULL,
  stream_created TEXT NOT NULL,
  applied_seq INTEGER NOT NULL
);
CREATE TABLE estate_ops (
  op_id TEXT PRIMARY KEY,
  domain TEXT NOT NULL,
  position INTEGER NOT NULL,
  outcome TEXT NOT NULL
);

CREATE TABLE tracker_projects (
  key TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  unit_id TEXT,
  next_number INTEGER NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE TABLE tracker_items (
  key TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  number INTEGER NOT NULL,
  type TEXT NOT NULL,
  title TEXT NOT NULL,
  body TEXT NOT NULL,
  status TEXT NOT NULL,
  priority TEXT NOT NULL,
  assignee TEXT,
  reporter TEXT NOT NULL,
  parent TEXT,
  labels TEXT NOT NULL,
  due TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  position INTEGER NOT NULL
);
CREATE INDEX tracker_items_project ON tracker_items (project, number);
CREATE INDEX tracker_items_assignee ON tracker_items (assignee);
CREATE TABLE tracker_comments (
  id TEXT PRIMARY KEY,
  item_key TEXT NOT NULL,
  author TEXT NOT NULL,
  body TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  position INTEGER NOT NULL
);
CREATE INDEX tracker_comments_item ON tracker_comments (item_key, position);
CREATE TABLE tracker_activity (
  id TEXT PRIMARY KEY,
  item_key TEXT NOT NULL,
  actor TEXT NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT NOT NULL,
  at INTEGER NOT NULL,
  position INTEGER NOT NULL
);
CREATE INDEX tracker_activity_item ON tracker_activity (item_key, position);

CREATE TABLE kb_containers (
  key TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  unit_id TEXT,
  created_at INTEGER NOT NULL
);
CREATE TABLE kb_pages (
  id INTEGER PRIMARY KEY,
  container TEXT NOT NULL,
  title TEXT NOT NULL,
  body TEXT NOT NULL,
  labels TEXT NOT NULL,
  revision INTEGER NOT NULL,
  author TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX kb_pages_address ON kb_pages (container, title);
CREATE TABLE kb_revisions (
  container TEXT NOT NULL,
  title TEXT NOT NULL,
  revision INTEGER NOT NULL,
  body TEXT NOT NULL,
  author TEXT NOT NULL,
  at INTEGER NOT NULL,
  PRIMARY KEY (container, title, revision)
);
-- External-content FTS over kb_pages: the index holds no second copy of the text, and
-- the triggers keep it in the same transaction as the row, so search never sees a page
-- the table does not hold. porter+unicode61 so "deploying" finds "deploy".
CREATE VIRTUAL TABLE kb_fts USING fts5(
  title, body, content='kb_pages', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER kb_pages_fts_insert AFTER INSERT ON kb_pages BEGIN
  INSERT INTO kb_fts (rowid, title, body) VALUES (new.id, new.title, new.body);
END;
CREATE TRIGGER kb_pages_fts_delete AFTER DELETE ON kb_pages BEGIN
  INSERT INTO kb_fts (kb_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
END;
CREATE TRIGGER kb_pages_fts_update AFTER UPDATE ON kb_pages BEGIN
  INSERT INTO kb_fts (kb_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
  INSERT INTO kb_fts (rowid, title, body) VALUES (new.id, new.title, new.body);
END;

CREATE TABLE chat_channels (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  unit_id TEXT,
  members TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE TABLE chat_messages (
  id TEXT PRIMARY KEY,
  channel TEXT NOT NULL,
  author TEXT NOT NULL,
  body TEXT NOT NULL,
  thread_parent TEXT,
  mentions TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  edited_at INTEGER,
  deleted_at INTEGER,
  position INTEGER NOT NULL
);
CREATE INDEX chat_messages_channel ON chat_messages (channel, position);
CREATE TABLE chat_message_edits (
  message_id TEXT NOT NULL,
  revision INTEGER NOT NULL,
  previous_body TEXT NOT NULL,
  editor TEXT NOT NULL,
  at INTEGER NOT NULL,
  PRIMARY KEY (message_id, revision)
);
`,
  },
  {
    id: 2,
    name: "turn_receipts",
    sql: `
CREATE TABLE turn_receipts (
  turn_id TEXT PRIMARY KEY,
  seat TEXT NOT NULL,
  day TEXT NOT NULL,
  ended_at INTEGER NOT NULL,
  outcome TEXT NOT NULL,
  work_key TEXT,
  body TEXT NOT NULL,
  position INTEGER NOT NULL
);
CREATE INDEX turn_receipts_position ON turn_receipts (position);
CREATE INDEX turn_receipts_seat ON turn_receipts (seat, position);
CREATE INDEX turn_receipts_day ON turn_receipts (day, seat);
CREATE INDEX turn_receipts_ended ON turn_receipts (ended_at);
CREATE INDEX turn_receipts_work ON turn_receipts (work_key, ended_at);
`,
  },
  {
    id: 3,
    name: "work_chat_fts",
    // As kb_fts: external content kept by triggers in the applier's transaction, so an index row
    // exists exactly when its row does, on replay and on a snapshot restore (its DELETE + INSERT
    // fires them). 'rebuild' indexes the rows a copy held before this build.
    sql: `
CREATE VIRTUAL TABLE work_fts USING fts5(
  key, title, body, content='tracker_items', content_rowid='rowid', tokenize='porter unicode61'
);
CREATE TRIGGER tracker_items_fts_insert AFTER INSERT ON tracker_items BEGIN
  INSERT INTO work_fts (rowid, key, title, body) VALUES (new.rowid, new.key, new.title, new.body);
END;
CREATE TRIGGER tracker_items_fts_delete AFTER DELETE ON tracker_items BEGIN
  INSERT INTO work_fts (work_fts, rowid, key, title, body) VALUES ('delete', old.rowid, old.key, old.title, old.body);
END;
CREATE TRIGGER tracker_items_fts_update AFTER UPDATE OF key, title, body ON tracker_items BEGIN
  INSERT INTO work_fts (work_fts, rowid, key, title, body) VALUES ('delete', old.rowid, old.key, old.title, old.body);
  INSERT INTO work_fts (rowid, key, title, body) VALUES (new.rowid, new.key, new.title, new.body);
END;
INSERT INTO work_fts (work_fts) VALUES ('rebuild');

CREATE VIRTUAL TABLE chat_fts USING fts5(
  body, content='chat_messages', content_rowid='rowid', tokenize='porter unicode61'
);
CREATE TRIGGER chat_messages_fts_insert AFTER INSERT ON chat_messages BEGIN
  INSERT INTO chat_fts (rowid, body) VALUES (new.rowid, new.body);
END;
CREATE TRIGGER chat_messages_fts_delete AFTER DELETE ON chat_messages BEGIN
  INSERT INTO chat_fts (chat_fts, rowid, body) VALUES ('delete', old.rowid, old.body);
END;
CREATE TRIGGER chat_messages_fts_update AFTER UPDATE OF body ON chat_messages BEGIN
  INSERT INTO chat_fts (chat_fts, rowid, body) VALUES ('delete', old.rowid, old.body);
  INSERT INTO chat_fts (rowid, body) VALUES (new.rowid, new.body);
END;
INSERT INTO chat_fts (chat_fts) VALUES ('rebuild');
`,
  },
  {
    id: 4,
    name: "file_attachments",
    sql: `
CREATE TABLE file_attachments (
  id TEXT PRIMARY KEY,
  domain TEXT NOT NULL,
  owner TEXT NOT NULL,
  name TEXT NOT NULL,
  content_type TEXT NOT NULL,
  size INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  by TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  position INTEGER NOT NULL
);
CREATE INDEX file_attachments_owner ON file_attachments (owner, position);
`,
  },
];
