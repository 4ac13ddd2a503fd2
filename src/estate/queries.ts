// Reads of a copy: the query vocabulary (zod, because a query crosses the wire to a data
// node) and how a copy answers each one. Every caller — tools, the API, the CLI through
// the API — asks through the router, which runs these here or on a data node.
import { and, asc, desc, eq, gt, lt, or, type SQL } from "drizzle-orm";
import { z } from "zod";
import type { Database } from "bun:sqlite";
import type { EstateDb } from "./migrate.ts";
import { actor, channelId, containerKey, handle, opId, pageTitle, projectKey, workKey } from "./records.ts";
import { fileQueries, listFiles, type FileRow } from "./attachments.ts";
import { lastTurnByWork, listReceipts, receiptQueries, weekOfReceipts, type ReceiptRow, type SeatDay } from "./turn-receipts.ts";
import { ftsExpression, searchChat, searchQueries, searchWork, SNIPPET_TOKENS, type ChatHit, type SearchAnswer, type WorkHit } from "./search.ts";
import { activity, channels, comments, containers, messages, pages, projects, workItems, WORK_STATUSES, type Domain } from "./schema.ts";

/** Largest page any list answers: a list is for reading, not for export. */
export const MAX_LIST_LIMIT = 500;
const limit = (dflt: number) => z.coerce.number().int().min(1).max(MAX_LIST_LIMIT).default(dflt);

export const querySchema = z.discriminatedUnion("q", [
  z.strictObject({ q: z.literal("projects.list") }),
  z.strictObject({
    q: z.literal("work.list"),
    project: projectKey.optional(),
    status: z.enum(WORK_STATUSES).optional(),
    assignee: actor.optional(),
    /** Keyset cursor: items after this log position. */
    after: z.coerce.number().int().min(0).optional(),
    limit: limit(100),
  }),
  z.strictObject({ q: z.literal("work.get"), key: workKey }),
  searchQueries.work,
  z.strictObject({ q: z.literal("pages.containers") }),
  z.strictObject({
    q: z.literal("pages.list"),
    container: containerKey.optional(),
    /** Keyset cursor: pages after this (container, title), in list order. */
    after: z.tuple([containerKey, pageTitle]).optional(),
    limit: limit(100),
  }),
  z.strictObject({ q: z.literal("pages.search"), text: z.string().min(1).max(500), container: containerKey.optional(), limit: limit(20) }),
  z.strictObject({ q: z.literal("pages.get"), container: containerKey, title: pageTitle }),
  z.strictObject({ q: z.literal("chat.channels"), member: handle.optional() }),
  z.strictObject({ q: z.literal("chat.channel"), id: channelId }),
  z.strictObject({
    q: z.literal("chat.messages"),
    channel: channelId,
    /** Forward: messages after this log position (oldest first). */
    cursor: z.coerce.number().int().min(0).optional(),
    /** Backward: the newest messages before this log position (still returned oldest first); `next` is then the cursor for the page before. */
    before: z.coerce.number().int().min(1).optional(),
    /** `newest`: the last `limit` messages (and `before` pages further back). */
    order: z.enum(["oldest", "newest"]).default("oldest"),
    limit: limit(100),
  }),
  z.strictObject({ q: z.literal("chat.message"), id: opId }),
  searchQueries.chat,
  fileQueries.work,
  fileQueries.pages,
  fileQueries.chat,
  receiptQueries.list,
  receiptQueries.week,
  receiptQueries.lastByWork,
]);

export type Query = z.output<typeof querySchema>;
export type QueryInput = z.input<typeof querySchema>;
export type QueryName = Query["q"];

export function domainOfQuery(q: QueryName): Domain {
  // Turn receipts are on the tracker log (records.ts turnReceipt).
  if (q.startsWith("work.") || q.startsWith("projects.") || q.startsWith("turns.")) return "tracker";
  if (q.startsWith("pages.")) return "pages";
  return "chat";
}

// ---- result shapes ----------------------------------------------------------------------

export interface Project {
  key: string;
  name: string;
  unit_id: string | null;
}
export interface WorkItem {
  key: string;
  project: string;
  type: string;
  title: string;
  body: string;
  status: string;
  priority: string;
  assignee: string | null;
  reporter: string;
  parent: string | null;
  labels: string[];
  due: string | null;
  created_at: number;
  updated_at: number;
  position: number;
}
export interface Comment {
  id: string;
  author: string;
  body: string;
  created_at: number;
}
export interface Activity {
  actor: string;
  kind: string;
  detail: unknown;
  at: number;
}
export interface Container {
  key: string;
  name: string;
  unit_id: string | null;
}
export interface PageSummary {
  container: string;
  title: string;
  revision: number;
  labels: string[];
  updated_at: number;
}
export interface Page extends PageSummary {
  body: string;
  author: string;
  created_at: number;
}
export interface SearchHit {
  container: string;
  title: string;
  snippet: string;
  rank: number;
}
export interface Channel {
  id: string;
  kind: string;
  name: string;
  unit_id: string | null;
  members: string[];
}
export interface Message {
  id: string;
  channel: string;
  author: string;
  body: string;
  thread_parent: string | null;
  mentions: string[];
  created_at: number;
  edited_at: number | null;
  deleted: boolean;
  position: number;
}

export interface Results {
  "projects.list": Project[];
  "work.list": { items: WorkItem[]; next: number | null };
  "work.get": { item: WorkItem; comments: Comment[]; activity: Activity[] } | null;
  /** Ranked (bm25); searched: false when nobody could search. */
  "work.search": SearchAnswer<WorkHit>;
  "pages.containers": Container[];
  /** In (container, title) order; a full page's last entry is the `after` of the next. */
  "pages.list": PageSummary[];
  /** searched: false when nobody could search (best effort: never "nothing matched"). */
  "pages.search": { hits: SearchHit[]; searched: boolean };
  "pages.get": Page | null;
  "chat.channels": Channel[];
  "chat.channel": Channel | null;
  "chat.messages": { messages: Message[]; next: number | null };
  "chat.message": Message | null;
  /** Ranked (bm25), open channels and the member's DMs; searched: false when nobody could search. */
  "chat.search": SearchAnswer<ChatHit>;
  /** Newest first; `next` is the cursor of the page after, null at the end. */
  "turns.list": { turns: ReceiptRow[]; next: number | null };
  "turns.week": SeatDay[];
  /** An owner's files, oldest first. */
  "work.files": FileRow[];
  "pages.files": FileRow[];
  "chat.files": FileRow[];
  /** Work key → the end (ms) of the last turn that worked on it. */
  "turns.last_by_work": Record<string, number>;
}

export type QueryOf<K extends QueryName> = Extract<QueryInput, { q: K }>;

// ---- answering from a copy --------------------------------------------------------------

const toItem = (r: typeof workItems.$inferSelect): WorkItem => ({ ...r, labels: JSON.parse(r.labels) as string[] });
const toChannel = (r: typeof channels.$inferSelect): Channel => ({ id: r.id, kind: r.kind, name: r.name, unit_id: r.unit_id, members: JSON.parse(r.members) as string[] });
const toMessage = (r: typeof messages.$inferSelect): Message => ({
  id: r.id,
  channel: r.channel,
  author: r.author,
  body: r.body,
  thread_parent: r.thread_parent,
  mentions: JSON.parse(r.mentions) as string[],
  created_at: r.created_at,
  edited_at: r.edited_at,
  deleted: r.deleted_at !== null,
  position: r.position,
});

export function runQuery(db: EstateDb, sqlite: Database, query: Query): Results[QueryName] {
  switch (query.q) {
    case "projects.list":
      return db.select({ key: projects.key, name: projects.name, unit_id: projects.unit_id }).from(projects).orderBy(asc(projects.key)).all();
    case "work.list": {
      const where: SQL[] = [];
      if (query.project) where.push(eq(workItems.project, query.project));
      if (query.status) where.push(eq(workItems.status, query.status));
      if (query.assignee) where.push(eq(workItems.assignee, query.assignee));
      if (query.after !== undefined) where.push(gt(workItems.position, query.after));
      const rows = db
        .select()
        .from(workItems)
        .where(where.length ? and(...where) : undefined)
        .orderBy(asc(workItems.position))
        .limit(query.limit)
        .all();
      return { items: rows.map(toItem), next: rows.length === query.limit ? rows[rows.length - 1]!.position : null };
    }
    case "work.search":
      return searchWork(sqlite, query);
    case "work.get": {
      const item = db.select().from(workItems).where(eq(workItems.key, query.key)).get();
      if (!item) return null;
      const cs = db.select().from(comments).where(eq(comments.item_key, query.key)).orderBy(asc(comments.position)).all();
      const as = db.select().from(activity).where(eq(activity.item_key, query.key)).orderBy(asc(activity.position), asc(activity.id)).all();
      return {
        item: toItem(item),
        comments: cs.map((c) => ({ id: c.id, author: c.author, body: c.body, created_at: c.created_at })),
        activity: as.map((a) => ({ actor: a.actor, kind: a.kind, detail: JSON.parse(a.detail) as unknown, at: a.at })),
      };
    }
    case "pages.containers":
      return db.select({ key: containers.key, name: containers.name, unit_id: containers.unit_id }).from(containers).orderBy(asc(containers.key)).all();
    case "pages.list": {
      const where: SQL[] = [];
      if (query.container) where.push(eq(pages.container, query.container));
      if (query.after) {
        const [c, t] = query.after;
        where.push(or(gt(pages.container, c), and(eq(pages.container, c), gt(pages.title, t)))!);
      }
      const rows = db
        .select({ container: pages.container, title: pages.title, revision: pages.revision, labels: pages.labels, updated_at: pages.updated_at })
        .from(pages)
        .where(where.length ? and(...where) : undefined)
        .orderBy(asc(pages.container), asc(pages.title))
        .limit(query.limit)
        .all();
      return rows.map((r) => ({ ...r, labels: JSON.parse(r.labels) as string[] }));
    }
    case "pages.search": {
      const expr = ftsExpression(query.text);
      if (expr === null) return { hits: [], searched: true };
      const filter = query.container ? "AND p.container = $container" : "";
      const rows = sqlite
        .query<SearchHit, Record<string, string | number>>(
          `SELECT p.container AS container, p.title AS title,
                  snippet(kb_fts, 1, '[', ']', '…', ${SNIPPET_TOKENS}) AS snippet, bm25(kb_fts, 5.0, 1.0) AS rank
             FROM kb_fts JOIN kb_pages p ON p.id = kb_fts.rowid
            WHERE kb_fts MATCH $expr ${filter}
            ORDER BY rank LIMIT $limit`,
        )
        .all({ expr, limit: query.limit, ...(query.container ? { container: query.container } : {}) });
      return { hits: rows, searched: true };
    }
    case "pages.get": {
      const r = db.select().from(pages).where(and(eq(pages.container, query.container), eq(pages.title, query.title))).get();
      if (!r) return null;
      return {
        container: r.container,
        title: r.title,
        revision: r.revision,
        labels: JSON.parse(r.labels) as string[],
        updated_at: r.updated_at,
        body: r.body,
        author: r.author,
        created_at: r.created_at,
      };
    }
    case "chat.channels": {
      const rows = db.select().from(channels).orderBy(asc(channels.id)).all().map(toChannel);
      // DMs are listed only to their participants; open channels to everyone.
      return rows.filter((c) => c.kind !== "dm" || (query.member !== undefined && c.members.includes(query.member)));
    }
    case "chat.channel": {
      const r = db.select().from(channels).where(eq(channels.id, query.id)).get();
      return r ? toChannel(r) : null;
    }
    case "chat.messages": {
      const where = [eq(messages.channel, query.channel)];
      if (query.order === "newest" || query.before !== undefined) {
        if (query.before !== undefined) where.push(lt(messages.position, query.before));
        const rows = db.select().from(messages).where(and(...where)).orderBy(desc(messages.position)).limit(query.limit).all();
        rows.reverse();
        // Backward: `next` is the `before` of the page of older messages.
        return { messages: rows.map(toMessage), next: rows.length === query.limit ? rows[0]!.position : null };
      }
      if (query.cursor !== undefined) where.push(gt(messages.position, query.cursor));
      const rows = db.select().from(messages).where(and(...where)).orderBy(asc(messages.position)).limit(query.limit).all();
      return { messages: rows.map(toMessage), next: rows.length === query.limit ? rows[rows.length - 1]!.position : null };
    }
    case "chat.search":
      return searchChat(sqlite, query);
    case "chat.message": {
      const r = db.select().from(messages).where(eq(messages.id, query.id)).get();
      return r ? toMessage(r) : null;
    }
    case "turns.list": {
      const { q: _q, ...filter } = query;
      return listReceipts(sqlite, filter);
    }
    case "work.files":
      return listFiles(db, { work: query.key });
    case "pages.files":
      return listFiles(db, { container: query.container, title: query.title });
    case "chat.files":
      return listFiles(db, { message: query.message });
    case "turns.week":
      return weekOfReceipts(sqlite, query.first_day, query.last_day);
    case "turns.last_by_work":
      return lastTurnByWork(sqlite, query.keys);
  }
}

