// The estate's tables (drizzle, bun:sqlite): the tracker, the knowledge base and chat, plus
// the two bookkeeping tables every apply writes in the same transaction as its rows — the
// per-domain checkpoint (applied position) and the operation ledger (op id → outcome).
//
// Every value a row holds comes from a state-log record or from the log position, never
// from the applying node's clock or counters, so three nodes applying one log hold the
// same rows byte for byte. The SQL that creates these tables is in migrations.ts and a
// test holds the two together.
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

export const DOMAINS = ["tracker", "pages", "chat"] as const;
export type Domain = (typeof DOMAINS)[number];

export const WORK_STATUSES = ["todo", "in_progress", "in_review", "done", "cancelled"] as const;
export type WorkStatus = (typeof WORK_STATUSES)[number];
export const WORK_TYPES = ["task", "bug", "story", "epic"] as const;
export const WORK_PRIORITIES = ["none", "low", "medium", "high", "urgent"] as const;

// ---- bookkeeping ------------------------------------------------------------------------

/** Where this copy stands on each domain's log, and which log that is. */
export const checkpoints = sqliteTable("estate_checkpoints", {
  domain: text("domain").primaryKey(),
  /** Stream name and creation time: a log deleted and rebuilt underneath has another. */
  stream: text("stream").notNull(),
  stream_created: text("stream_created").notNull(),
  applied_seq: integer("applied_seq").notNull(),
});

/** Every operation applied, with its outcome: a retried op id answers from here. */
export const ops = sqliteTable("estate_ops", {
  op_id: text("op_id").primaryKey(),
  domain: text("domain").notNull(),
  position: integer("position").notNull(),
  /** JSON: {ok: true, ...result} or {ok: false, code, message, field?}. */
  outcome: text("outcome").notNull(),
});

// ---- tracker ----------------------------------------------------------------------------

export const projects = sqliteTable("tracker_projects", {
  key: text("key").primaryKey(),
  name: text("name").notNull(),
  unit_id: text("unit_id"),
  /** Next item number: keys are assigned at apply, in log order, the same on every node. */
  next_number: integer("next_number").notNull(),
  created_at: integer("created_at").notNull(),
});

export const workItems = sqliteTable(
  "tracker_items",
  {
    key: text("key").primaryKey(),
    project: text("project").notNull(),
    number: integer("number").notNull(),
    type: text("type").notNull(),
    title: text("title").notNull(),
    body: text("body").notNull(),
    status: text("status").notNull(),
    priority: text("priority").notNull(),
    /** A seat handle or a person's name; null when unassigned. */
    assignee: text("assignee"),
    reporter: text("reporter").notNull(),
    parent: text("parent"),
    /** JSON array of strings, kept sorted so equal sets are equal text. */
    labels: text("labels").notNull(),
    /** ISO date (YYYY-MM-DD) or null. */
    due: text("due"),
    created_at: integer("created_at").notNull(),
    updated_at: integer("updated_at").notNull(),
    position: integer("position").notNull(),
  },
  (t) => [index("tracker_items_project").on(t.project, t.number), index("tracker_items_assignee").on(t.assignee)],
);

export const comments = sqliteTable(
  "tracker_comments",
  {
    /** The op id of the write that made it. */
    id: text("id").primaryKey(),
    item_key: text("item_key").notNull(),
    author: text("author").notNull(),
    body: text("body").notNull(),
    created_at: integer("created_at").notNull(),
    position: integer("position").notNull(),
  },
  (t) => [index("tracker_comments_item").on(t.item_key, t.position)],
);

export const activity = sqliteTable(
  "tracker_activity",
  {
    /** `{op_id}:{n}`: one operation may leave several entries. */
    id: text("id").primaryKey(),
    item_key: text("item_key").notNull(),
    actor: text("actor").notNull(),
    /** created | updated | commented */
    kind: text("kind").notNull(),
    /** JSON: what changed ({field: [before, after]}) or the comment id. */
    detail: text("detail").notNull(),
    at: integer("at").notNull(),
    position: integer("position").notNull(),
  },
  (t) => [index("tracker_activity_item").on(t.item_key, t.position)],
);

/**
 * One receipt per finished turn (records.ts turnReceipt), kept TURN_RECEIPT_HORIZON_MS
 * (turn-receipts.ts). The columns a query filters on, and the receipt body as written,
 * decoded against its schema on every read.
 */
export const turnReceipts = sqliteTable(
  "turn_receipts",
  {
    /** The turn id (the record's op id). */
    turn_id: text("turn_id").primaryKey(),
    seat: text("seat").notNull(),
    /** YYYY-MM-DD in the company's time zone. */
    day: text("day").notNull(),
    ended_at: integer("ended_at").notNull(),
    outcome: text("outcome").notNull(),
    work_key: text("work_key"),
    /** JSON: the receipt body (records.ts turnReceipt, without `op`). */
    body: text("body").notNull(),
    /** Log position of the receipt: the list's order and the paging cursor. */
    position: integer("position").notNull(),
  },
  (t) => [index("turn_receipts_position").on(t.position), index("turn_receipts_seat").on(t.seat, t.position), index("turn_receipts_day").on(t.day, t.seat), index("turn_receipts_ended").on(t.ended_at), index("turn_receipts_work").on(t.work_key, t.ended_at)],
);

// ---- knowledge --------------------------------------------------------------------------

export const containers = sqliteTable("kb_containers", {
  key: text("key").primaryKey(),
  name: text("name").notNull(),
  unit_id: text("unit_id"),
  created_at: integer("created_at").notNull(),
});

export const pages = sqliteTable(
  "kb_pages",
  {
    /** SQLite's rowid (max + 1 on insert, so the same on every node); the FTS row id. */
    id: integer("id").primaryKey(),
    container: text("container").notNull(),
    title: text("title").notNull(),
    body: text("body").notNull(),
    labels: text("labels").notNull(),
    revision: integer("revision").notNull(),
    author: text("author").notNull(),
    created_at: integer("created_at").notNull(),
    updated_at: integer("updated_at").notNull(),
  },
  (t) => [uniqueIndex("kb_pages_address").on(t.container, t.title)],
);

export const revisions = sqliteTable(
  "kb_revisions",
  {
    container: text("container").notNull(),
    title: text("title").notNull(),
    revision: integer("revision").notNull(),
    body: text("body").notNull(),
    author: text("author").notNull(),
    at: integer("at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.container, t.title, t.revision] })],
);

// ---- chat -------------------------------------------------------------------------------

export const channels = sqliteTable("chat_channels", {
  id: text("id").primaryKey(),
  /** unit | general | dm */
  kind: text("kind").notNull(),
  name: text("name").notNull(),
  unit_id: text("unit_id"),
  /** JSON array: a DM's participants (sorted); empty for open channels. */
  members: text("members").notNull(),
  created_at: integer("created_at").notNull(),
});

export const messages = sqliteTable(
  "chat_messages",
  {
    /** The op id of the post. */
    id: text("id").primaryKey(),
    channel: text("channel").notNull(),
    author: text("author").notNull(),
    /** Empty once deleted: the row stays as the tombstone. */
    body: text("body").notNull(),
    thread_parent: text("thread_parent"),
    /** JSON array of handles parsed from @handle in the body, sorted. */
    mentions: text("mentions").notNull(),
    created_at: integer("created_at").notNull(),
    edited_at: integer("edited_at"),
    deleted_at: integer("deleted_at"),
    /** Log position of the post: the channel's order and the paging cursor. */
    position: integer("position").notNull(),
  },
  (t) => [index("chat_messages_channel").on(t.channel, t.position)],
);

/** An edit keeps what the message said before it. */
export const messageEdits = sqliteTable(
  "chat_message_edits",
  {
    message_id: text("message_id").notNull(),
    revision: integer("revision").notNull(),
    previous_body: text("previous_body").notNull(),
    editor: text("editor").notNull(),
    at: integer("at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.message_id, t.revision] })],
);

// ---- files (every domain) ---------------------------------------------------------------

/**
 * A file attached to a work item, a chat message or a page (attachments.ts): the row that
 * names an object in the fleet's object store. The bytes are never here.
 */
export const attachments = sqliteTable(
  "file_attachments",
  {
    /** The object's key in the store (fl- and 24 hex digits). */
    id: text("id").primaryKey(),
    /** The log the attach record is on: tracker, pages or chat. */
    domain: text("domain").notNull(),
    /** work:{key} | message:{id} | page:{container}/{title} */
    owner: text("owner").notNull(),
    name: text("name").notNull(),
    content_type: text("content_type").notNull(),
    size: integer("size").notNull(),
    sha256: text("sha256").notNull(),
    by: text("by").notNull(),
    created_at: integer("created_at").notNull(),
    position: integer("position").notNull(),
  },
  (t) => [index("file_attachments_owner").on(t.owner, t.position)],
);

/** Every replicated table, for the digest (the FTS index is derived and checked separately). */
export const REPLICATED_TABLES = [
  "estate_ops",
  "tracker_projects",
  "tracker_items",
  "tracker_comments",
  "tracker_activity",
  "turn_receipts",
  "kb_containers",
  "kb_pages",
  "kb_revisions",
  "chat_channels",
  "chat_messages",
  "chat_message_edits",
  "file_attachments",
] as const;
