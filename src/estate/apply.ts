// Applying one decoded record to a copy. Deterministic: the outcome depends only on the
// rows and the record (never this node's clock), so every node that applies the same log
// in the same order holds the same rows. A record whose precondition fails (an unknown
// work item, a stale base revision) is applied as a refusal: nothing changes but the
// ledger, which says why — the same refusal on every node, decided by log order.
//
// Callers run applyRecord inside the transaction that also moves the applied position.
import { and, eq, sql } from "drizzle-orm";
import type { EstateDb } from "./migrate.ts";
import type { BodyOf, StateRecord } from "./records.ts";
import { dmChannelId } from "./mentions.ts";
import { applyReceipt } from "./turn-receipts.ts";
import { applyAttach } from "./attachments.ts";
import { activity, channels, comments, containers, messageEdits, messages, ops, pages, projects, revisions, workItems } from "./schema.ts";

export type Outcome = ({ ok: true } & Record<string, unknown>) | { ok: false; code: string; message: string; field?: string };

const refuse = (code: string, message: string, field?: string): Outcome => ({ ok: false, code, message, ...(field ? { field } : {}) });

/** Applies `record` at log position `position`; returns its outcome (also stored in the ledger). */
export function applyRecord(db: EstateDb, record: StateRecord, position: number): Outcome {
  const seen = db.select({ outcome: ops.outcome }).from(ops).where(eq(ops.op_id, record.op_id)).get();
  if (seen) return JSON.parse(seen.outcome) as Outcome; // a retried op id: applied once, at its first position
  const outcome = applyBody(db, record, position);
  db.insert(ops).values({ op_id: record.op_id, domain: record.domain, position, outcome: JSON.stringify(outcome) }).run();
  return outcome;
}

function applyBody(db: EstateDb, r: StateRecord, position: number): Outcome {
  switch (r.domain) {
    case "tracker":
      return applyTracker(db, r.body, r.op_id, r.at, position);
    case "pages":
      return applyPages(db, r.body, r.at, position);
    case "chat":
      return applyChat(db, r.body, r.op_id, r.at, position);
  }
}

// ---- tracker ----------------------------------------------------------------------------

function applyTracker(db: EstateDb, b: BodyOf<"tracker">, op_id: string, at: number, position: number): Outcome {
  switch (b.op) {
    // The marker itself changes nothing: the skip happened when a copy met the record it names.
    case "log.skip":
      return { ok: true, skip_marker_for: b.position };
    case "tracker.seed": {
      for (const p of b.projects) {
        db.insert(projects).values({ key: p.key, name: p.name, unit_id: p.unit_id, next_number: 1, created_at: at }).onConflictDoNothing().run();
      }
      return { ok: true, projects: b.projects.length };
    }
    case "work.create": {
      const project = db.select().from(projects).where(eq(projects.key, b.project)).get();
      if (!project) return refuse("unknown_project", `no project ${b.project}`, "project");
      if (b.parent !== null && !db.select({ key: workItems.key }).from(workItems).where(eq(workItems.key, b.parent)).get()) {
        return refuse("unknown_work_item", `no work item ${b.parent}`, "parent");
      }
      const key = `${project.key}-${project.next_number}`;
      db.update(projects).set({ next_number: project.next_number + 1 }).where(eq(projects.key, project.key)).run();
      db.insert(workItems)
        .values({
          key,
          project: project.key,
          number: project.next_number,
          type: b.type,
          title: b.title,
          body: b.body,
          status: b.status,
          priority: b.priority,
          assignee: b.assignee,
          reporter: b.reporter,
          parent: b.parent,
          labels: JSON.stringify(b.labels),
          due: b.due,
          created_at: at,
          updated_at: at,
          position,
        })
        .run();
      db.insert(activity).values({ id: `${op_id}:0`, item_key: key, actor: b.reporter, kind: "created", detail: "{}", at, position }).run();
      return { ok: true, key };
    }
    case "work.update": {
      const item = db.select().from(workItems).where(eq(workItems.key, b.key)).get();
      if (!item) return refuse("unknown_work_item", `no work item ${b.key}`, "key");
      const p = b.patch;
      if (p.parent !== undefined && p.parent !== null) {
        if (p.parent === b.key) return refuse("invalid_parent", "a work item cannot be its own parent", "parent");
        if (!db.select({ key: workItems.key }).from(workItems).where(eq(workItems.key, p.parent)).get()) {
          return refuse("unknown_work_item", `no work item ${p.parent}`, "parent");
        }
      }
      const before: Record<string, unknown> = { ...item, labels: JSON.parse(item.labels) as string[] };
      const changed: Record<string, [unknown, unknown]> = {};
      for (const [field, value] of Object.entries(p)) {
        if (value === undefined) continue;
        if (JSON.stringify(before[field]) !== JSON.stringify(value)) changed[field] = [before[field], value];
      }
      const fields = Object.keys(changed).sort();
      if (fields.length === 0) return { ok: true, key: b.key, changed: [], title: item.title };
      const set: Record<string, unknown> = { updated_at: at };
      for (const f of fields) set[f] = f === "labels" ? JSON.stringify(changed[f]![1]) : changed[f]![1];
      db.update(workItems).set(set).where(eq(workItems.key, b.key)).run();
      db.insert(activity).values({ id: `${op_id}:0`, item_key: b.key, actor: b.actor, kind: "updated", detail: JSON.stringify(changed), at, position }).run();
      // The title as it stands after this record: the wake feed reads facts from the
      // outcome, because by the time it runs later records may have changed the row.
      return { ok: true, key: b.key, changed: fields, title: (changed.title?.[1] as string | undefined) ?? item.title };
    }
    case "file.attach":
      return applyAttach(db, "tracker", b, at, position);
    case "turn.receipt": {
      const r = applyReceipt(db, b, at, position);
      return { ok: true, turn_id: b.turn_id, kept: r.inserted, trimmed: r.trimmed };
    }
    case "work.comment": {
      const item = db.select({ assignee: workItems.assignee, title: workItems.title }).from(workItems).where(eq(workItems.key, b.key)).get();
      if (!item) return refuse("unknown_work_item", `no work item ${b.key}`, "key");
      db.insert(comments).values({ id: op_id, item_key: b.key, author: b.author, body: b.body, created_at: at, position }).run();
      db.update(workItems).set({ updated_at: at }).where(eq(workItems.key, b.key)).run();
      db.insert(activity)
        .values({ id: `${op_id}:0`, item_key: b.key, actor: b.author, kind: "commented", detail: JSON.stringify({ comment: op_id }), at, position })
        .run();
      // Who the item was assigned to when the comment landed: the seat the comment is for.
      return { ok: true, key: b.key, comment_id: op_id, assignee: item.assignee, title: item.title };
    }
  }
}

// ---- knowledge --------------------------------------------------------------------------

function applyPages(db: EstateDb, b: BodyOf<"pages">, at: number, position: number): Outcome {
  switch (b.op) {
    // The marker itself changes nothing: the skip happened when a copy met the record it names.
    case "log.skip":
      return { ok: true, skip_marker_for: b.position };
    case "file.attach":
      return applyAttach(db, "pages", b, at, position);
    case "pages.seed": {
      for (const c of b.containers) {
        db.insert(containers).values({ key: c.key, name: c.name, unit_id: c.unit_id, created_at: at }).onConflictDoNothing().run();
      }
      return { ok: true, containers: b.containers.length };
    }
    case "page.put": {
      if (!db.select({ key: containers.key }).from(containers).where(eq(containers.key, b.container)).get()) {
        return refuse("unknown_container", `no container ${b.container}`, "container");
      }
      const page = db.select().from(pages).where(and(eq(pages.container, b.container), eq(pages.title, b.title))).get();
      const current = page?.revision ?? 0;
      if (b.base_revision !== null && b.base_revision !== current) {
        return refuse("revision_conflict", `page is at revision ${current}, not ${b.base_revision}`, "base_revision");
      }
      const revision = current + 1;
      const labels = JSON.stringify(b.labels);
      if (page) {
        db.update(pages).set({ body: b.body, labels, revision, author: b.author, updated_at: at }).where(eq(pages.id, page.id)).run();
      } else {
        db.insert(pages)
          .values({ container: b.container, title: b.title, body: b.body, labels, revision, author: b.author, created_at: at, updated_at: at })
          .run();
      }
      db.insert(revisions).values({ container: b.container, title: b.title, revision, body: b.body, author: b.author, at }).run();
      return { ok: true, container: b.container, title: b.title, revision };
    }
  }
}

// ---- chat -------------------------------------------------------------------------------

function applyChat(db: EstateDb, b: BodyOf<"chat">, op_id: string, at: number, position: number): Outcome {
  switch (b.op) {
    // The marker itself changes nothing: the skip happened when a copy met the record it names.
    case "log.skip":
      return { ok: true, skip_marker_for: b.position };
    case "file.attach":
      return applyAttach(db, "chat", b, at, position);
    case "chat.seed": {
      for (const c of b.channels) {
        db.insert(channels).values({ id: c.id, kind: c.kind, name: c.name, unit_id: c.unit_id, members: "[]", created_at: at }).onConflictDoNothing().run();
      }
      return { ok: true, channels: b.channels.length };
    }
    case "chat.post": {
      let channel = db.select({ id: channels.id }).from(channels).where(eq(channels.id, b.channel)).get();
      if (!channel && b.dm !== null) {
        const members = [...new Set(b.dm.members)].sort();
        if (dmChannelId(members) !== b.channel) return refuse("invalid_dm", "the channel id is not the DM of these members", "channel");
        db.insert(channels).values({ id: b.channel, kind: "dm", name: members.join(", "), unit_id: null, members: JSON.stringify(members), created_at: at }).run();
        channel = { id: b.channel };
      }
      if (!channel) return refuse("unknown_channel", `no channel ${b.channel}`, "channel");
      if (b.thread_parent !== null) {
        const parent = db.select({ channel: messages.channel }).from(messages).where(eq(messages.id, b.thread_parent)).get();
        if (!parent || parent.channel !== b.channel) return refuse("unknown_message", `no message ${b.thread_parent} in ${b.channel}`, "thread_parent");
      }
      db.insert(messages)
        .values({
          id: op_id,
          channel: b.channel,
          author: b.author,
          body: b.body,
          thread_parent: b.thread_parent,
          mentions: JSON.stringify(b.mentions),
          created_at: at,
          edited_at: null,
          deleted_at: null,
          position,
        })
        .run();
      return { ok: true, channel: b.channel, message_id: op_id };
    }
    case "chat.edit": {
      const m = db.select().from(messages).where(eq(messages.id, b.message_id)).get();
      if (!m) return refuse("unknown_message", `no message ${b.message_id}`, "message_id");
      if (m.deleted_at !== null) return refuse("message_deleted", `message ${b.message_id} was deleted`, "message_id");
      const n = db.select({ n: sql<number>`count(*)` }).from(messageEdits).where(eq(messageEdits.message_id, m.id)).get()?.n ?? 0;
      db.insert(messageEdits).values({ message_id: m.id, revision: n + 1, previous_body: m.body, editor: b.editor, at }).run();
      db.update(messages).set({ body: b.body, mentions: JSON.stringify(b.mentions), edited_at: at }).where(eq(messages.id, m.id)).run();
      return { ok: true, message_id: m.id };
    }
    case "chat.delete": {
      const m = db.select().from(messages).where(eq(messages.id, b.message_id)).get();
      if (!m) return refuse("unknown_message", `no message ${b.message_id}`, "message_id");
      if (m.deleted_at !== null) return { ok: true, message_id: m.id };
      // The row stays as the tombstone: replies keep their parent and the channel its order.
      db.update(messages).set({ body: "", mentions: "[]", deleted_at: at }).where(eq(messages.id, m.id)).run();
      return { ok: true, message_id: m.id };
    }
  }
}

