// Ranked search of a copy's work items and chat (FTS5, bm25), beside the knowledge base's
// in queries.ts: the query vocabulary (zod, because a query crosses the wire to a data
// node) and how a copy answers each. The indexes (work_fts, chat_fts) are kept by the
// triggers of migration 3, so a search sees exactly the rows the copy holds.
import type { Database } from "bun:sqlite";
import { z } from "zod";
import { actor, channelId, handle, projectKey } from "./records.ts";
import { WORK_STATUSES } from "./schema.ts";

/** Most hits one search answers: a result list is for reading, and bm25 ranks every match anyway. */
export const MAX_SEARCH_LIMIT = 100;
/** Longest search text: a few sentences; FTS terms past 32 words are dropped (ftsExpression). */
export const MAX_SEARCH_TEXT = 500;
/** Words of snippet context either side of a hit: a line's worth in a result list. */
export const SNIPPET_TOKENS = 16;
/** Words of a query that count: more only narrows an all-words match and costs a posting list each. */
const MAX_QUERY_WORDS = 32;

const searchText = z.string().min(1, "is empty").max(MAX_SEARCH_TEXT);
const searchLimit = z.coerce.number().int().min(1).max(MAX_SEARCH_LIMIT).default(20);

export const searchQueries = {
  work: z.strictObject({
    q: z.literal("work.search"),
    text: searchText,
    project: projectKey.optional(),
    status: z.enum(WORK_STATUSES).optional(),
    assignee: actor.optional(),
    limit: searchLimit,
  }),
  chat: z.strictObject({
    q: z.literal("chat.search"),
    text: searchText,
    channel: channelId.optional(),
    /** DMs are searched only for a participant, as chat.channels lists them. */
    member: handle.optional(),
    limit: searchLimit,
  }),
};
export type WorkSearch = z.output<typeof searchQueries.work>;
export type ChatSearch = z.output<typeof searchQueries.chat>;

/**
 * An FTS5 MATCH expression from free text: every word quoted (so operators and column
 * filters in user text are literal), all of them required. Null when nothing is left.
 */
export function ftsExpression(text: string): string | null {
  const words = text.match(/[\p{L}\p{N}_]+/gu) ?? [];
  if (words.length === 0) return null;
  return words.slice(0, MAX_QUERY_WORDS).map((w) => `"${w}"`).join(" ");
}

export interface WorkHit {
  key: string;
  project: string;
  title: string;
  status: string;
  assignee: string | null;
  snippet: string;
  /** bm25: lower is better (FTS5's sign). */
  rank: number;
}
export interface ChatHit {
  id: string;
  channel: string;
  author: string;
  thread_parent: string | null;
  created_at: number;
  position: number;
  snippet: string;
  rank: number;
}
/** searched: false when nobody could search (best effort: never "nothing matched"). */
export interface SearchAnswer<H> {
  hits: H[];
  searched: boolean;
}

type Params = Record<string, string | number>;

/**
 * Work items ranked by bm25, the title weighted like a knowledge page's (5×) and the key
 * above both (10×): a query naming an item's key means that item. Ties: newest first.
 */
export function searchWork(sqlite: Database, q: WorkSearch): SearchAnswer<WorkHit> {
  const expr = ftsExpression(q.text);
  if (expr === null) return { hits: [], searched: true };
  const where = ["work_fts MATCH $expr"];
  const params: Params = { expr, limit: q.limit };
  for (const f of ["project", "status", "assignee"] as const) {
    const v = q[f];
    if (v === undefined) continue;
    where.push(`i.${f} = $${f}`);
    params[f] = v;
  }
  const hits = sqlite
    .query<WorkHit, Params>(
      `SELECT i.key AS key, i.project AS project, i.title AS title, i.status AS status, i.assignee AS assignee,
              snippet(work_fts, 2, '[', ']', '…', ${SNIPPET_TOKENS}) AS snippet, bm25(work_fts, 10.0, 5.0, 1.0) AS rank
         FROM work_fts JOIN tracker_items i ON i.rowid = work_fts.rowid
        WHERE ${where.join(" AND ")}
        ORDER BY rank, i.position DESC LIMIT $limit`,
    )
    .all(params);
  return { hits, searched: true };
}

/**
 * Chat messages ranked by bm25, ties newest first; deleted messages never match (their
 * body is emptied, and the filter says so outright). DMs only for a participant.
 */
export function searchChat(sqlite: Database, q: ChatSearch): SearchAnswer<ChatHit> {
  const expr = ftsExpression(q.text);
  if (expr === null) return { hits: [], searched: true };
  const where = ["chat_fts MATCH $expr", "m.deleted_at IS NULL"];
  const params: Params = { expr, limit: q.limit };
  if (q.channel !== undefined) {
    where.push("m.channel = $channel");
    params.channel = q.channel;
  }
  if (q.member !== undefined) {
    where.push("(c.kind != 'dm' OR EXISTS (SELECT 1 FROM json_each(c.members) WHERE value = $member))");
    params.member = q.member;
  } else {
    where.push("c.kind != 'dm'");
  }
  const hits = sqlite
    .query<ChatHit, Params>(
      `SELECT m.id AS id, m.channel AS channel, m.author AS author, m.thread_parent AS thread_parent,
              m.created_at AS created_at, m.position AS position,
              snippet(chat_fts, 0, '[', ']', '…', ${SNIPPET_TOKENS}) AS snippet, bm25(chat_fts) AS rank
         FROM chat_fts JOIN chat_messages m ON m.rowid = chat_fts.rowid JOIN chat_channels c ON c.id = m.channel
        WHERE ${where.join(" AND ")}
        ORDER BY rank, m.position DESC LIMIT $limit`,
    )
    .all(params);
  return { hits, searched: true };
}
