// Files attached to a work item, a chat message or a knowledge page: the row that names an
// object in the fleet's object store (Scaling Out: "Files are the exception" — the bytes
// are in the store, the row is an ordinary replicated row). One record kind per domain,
// `file.attach`, applied here; the reads list an owner's files and every named object.
import type { Database } from "bun:sqlite";
import { and, asc, eq, sql } from "drizzle-orm";
import { z } from "zod";
import type { EstateDb } from "./migrate.ts";
import { containerKey, opId, pageTitle, workKey, type FileAttach } from "./records.ts";
import { attachments, messages, pages, workItems, type Domain } from "./schema.ts";

/**
 * Files one owner (an item, a message, a page) holds at most: a list is read whole in one
 * answer, and past this an owner is a file share. Refused at apply, in log order, so every
 * copy refuses the same one.
 */
export const MAX_FILES_PER_OWNER = 100;
/** The owner as one text column: `work:ENG-1`, `message:{id}`, `page:{container}/{title}` (titles hold no '/'). */
export type FileOwner = { work: string } | { message: string } | { container: string; title: string };
export function ownerKey(on: FileOwner): string {
  if ("work" in on) return `work:${on.work}`;
  if ("message" in on) return `message:${on.message}`;
  return `page:${on.container}/${on.title}`;
}

export interface FileRow {
  id: string;
  owner: string;
  name: string;
  content_type: string;
  size: number;
  sha256: string;
  by: string;
  created_at: number;
  position: number;
}

type Refusal = { ok: false; code: string; message: string; field?: string };

function ownerMissing(db: EstateDb, on: FileOwner): Refusal | null {
  if ("work" in on) {
    const hit = db.select({ k: workItems.key }).from(workItems).where(eq(workItems.key, on.work)).get();
    return hit ? null : { ok: false, code: "unknown_work_item", message: `no work item ${on.work}`, field: "on.work" };
  }
  if ("message" in on) {
    const m = db.select({ deleted_at: messages.deleted_at }).from(messages).where(eq(messages.id, on.message)).get();
    if (!m) return { ok: false, code: "unknown_message", message: `no message ${on.message}`, field: "on.message" };
    return m.deleted_at === null ? null : { ok: false, code: "message_deleted", message: `message ${on.message} was deleted`, field: "on.message" };
  }
  const p = db.select({ id: pages.id }).from(pages).where(and(eq(pages.container, on.container), eq(pages.title, on.title))).get();
  return p ? null : { ok: false, code: "unknown_page", message: `no page ${on.container}/${on.title}`, field: "on.title" };
}

/**
 * Applies one attachment at `position`. Deterministic: the owner must exist in this copy
 * at this position and hold fewer than MAX_FILES_PER_OWNER files, else a refusal every
 * copy makes alike. A second record naming the same object keeps the first row.
 */
export function applyAttach(db: EstateDb, domain: Domain, b: FileAttach, at_ms: number, position: number): ({ ok: true } & Record<string, unknown>) | Refusal {
  const missing = ownerMissing(db, b.on);
  if (missing) return missing;
  const owner = ownerKey(b.on);
  if (db.select({ id: attachments.id }).from(attachments).where(eq(attachments.id, b.file)).get()) return { ok: true, file: b.file, owner, kept: false };
  const held = db.select({ n: sql<number>`count(*)` }).from(attachments).where(eq(attachments.owner, owner)).get()?.n ?? 0;
  if (held >= MAX_FILES_PER_OWNER) return { ok: false, code: "too_many_files", message: `${owner} already holds ${MAX_FILES_PER_OWNER} files, the most one owner holds`, field: "on" };
  db.insert(attachments)
    .values({ id: b.file, domain, owner, name: b.name, content_type: b.content_type, size: b.size, sha256: b.sha256, by: b.by, created_at: at_ms, position })
    .run();
  return { ok: true, file: b.file, owner, kept: true };
}

const toRow = (r: typeof attachments.$inferSelect): FileRow => ({
  id: r.id,
  owner: r.owner,
  name: r.name,
  content_type: r.content_type,
  size: r.size,
  sha256: r.sha256,
  by: r.by,
  created_at: r.created_at,
  position: r.position,
});

/** An owner's files, oldest first (at most MAX_FILES_PER_OWNER by construction). */
export function listFiles(db: EstateDb, on: FileOwner): FileRow[] {
  return db.select().from(attachments).where(eq(attachments.owner, ownerKey(on))).orderBy(asc(attachments.position)).all().map(toRow);
}

/**
 * Every object id any row of this copy names, in every domain: what the object collector
 * must never delete. Read straight from the copy (the collector runs on a data node).
 */
export function namedFileIds(sqlite: Database): Set<string> {
  const rows = sqlite.query<{ id: string }, []>("SELECT id FROM file_attachments").all();
  return new Set(rows.map((r) => r.id));
}

/** The per-domain queries (queries.ts): one owner's files. */
export const fileQueries = {
  work: z.strictObject({ q: z.literal("work.files"), key: workKey }),
  pages: z.strictObject({ q: z.literal("pages.files"), container: containerKey, title: pageTitle }),
  chat: z.strictObject({ q: z.literal("chat.files"), message: opId }),
};
