// Turn receipts in a copy: how long they are kept, how a receipt is applied, and the reads
// GET /turns and the Today view make (a page of receipts, a week per seat per day, each
// work item's last turn). Every row read is decoded against records.ts turnReceipt, the
// same schema every write passed, so a row this build cannot read is an error, never a
// half-shown receipt.
import type { Database } from "bun:sqlite";
import { asc, eq, inArray, lt } from "drizzle-orm";
import { z } from "zod";
import type { EstateDb } from "./migrate.ts";
import { turnReceipt, type TurnReceipt } from "./records.ts";
import { turnReceipts } from "./schema.ts";

/** How long every copy keeps a receipt, counted from the newest receipt's `at` (never a node's
 * clock, so every copy deletes the same rows). 32 days, as the spend counters: a month's turns
 * beside a month's cost, tens of MiB per copy at most. */
export const TURN_RECEIPT_HORIZON_MS = 32 * 24 * 60 * 60 * 1000;
/** Rows one apply deletes at most: a bound on one transaction, the rest go with the next receipts. */
export const TURN_RECEIPT_TRIM_BATCH = 500;

/** The calendar day (YYYY-MM-DD) `at_ms` falls on in `timezone` (an IANA name): a receipt's
 *  `day`, and the days GET /turns/week covers. Pure. */
export function dayIn(at_ms: number, timezone: string): string {
  const parts = new Intl.DateTimeFormat("en-US", { timeZone: timezone, year: "numeric", month: "2-digit", day: "2-digit" }).formatToParts(new Date(at_ms));
  const get = (t: string) => parts.find((p) => p.type === t)?.value ?? "00";
  return `${get("year")}-${get("month")}-${get("day")}`;
}

/** A receipt as stored: the record body without its op. */
export type StoredReceipt = Omit<TurnReceipt, "op">;
/** A receipt as read: the stored body and its log position (the list cursor). */
export type ReceiptRow = StoredReceipt & { position: number };

const storedSchema = turnReceipt.omit({ op: true });

/**
 * Applies one receipt at `position`, and lets go of receipts past the horizon as of the
 * record's own time. A second receipt of one turn (another op id naming the same turn)
 * keeps the first: a turn has one receipt.
 */
export function applyReceipt(db: EstateDb, body: TurnReceipt, at_ms: number, position: number): { inserted: boolean; trimmed: number } {
  const { op: _op, ...stored } = body;
  const had = db.select({ turn_id: turnReceipts.turn_id }).from(turnReceipts).where(eq(turnReceipts.turn_id, body.turn_id)).get();
  if (!had) {
    db.insert(turnReceipts)
      .values({ turn_id: body.turn_id, seat: body.seat, day: body.day, ended_at: body.ended_at, outcome: body.outcome, work_key: body.links.work_key, body: JSON.stringify(stored), position })
      .run();
  }
  const old = db
    .select({ turn_id: turnReceipts.turn_id })
    .from(turnReceipts)
    .where(lt(turnReceipts.ended_at, at_ms - TURN_RECEIPT_HORIZON_MS))
    .orderBy(asc(turnReceipts.ended_at))
    .limit(TURN_RECEIPT_TRIM_BATCH)
    .all()
    .map((r) => r.turn_id);
  if (old.length > 0) db.delete(turnReceipts).where(inArray(turnReceipts.turn_id, old)).run();
  return { inserted: !had, trimmed: old.length };
}

function decodeRow(r: { body: string; position: number }): ReceiptRow {
  const parsed = storedSchema.safeParse(JSON.parse(r.body));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`turn receipt at position ${r.position} cannot be read by this build: ${issue?.path.join(".") || "receipt"}: ${issue?.message ?? "invalid"}`);
  }
  return { ...parsed.data, position: r.position };
}

export interface ReceiptFilter {
  /** ended_at ≥ since, < until (ms). */
  since?: number;
  until?: number;
  /** The company day (YYYY-MM-DD). */
  day?: string;
  seat?: string;
  outcome?: string;
  /** Keyset cursor: receipts before this log position (the list is newest first). */
  cursor?: number;
  limit: number;
}

/** Receipts newest first (log order); `next` is the cursor of the page after, null at the end. */
export function listReceipts(sqlite: Database, f: ReceiptFilter): { turns: ReceiptRow[]; next: number | null } {
  const where: string[] = [];
  const args: Record<string, string | number> = { limit: f.limit };
  if (f.since !== undefined) (where.push("ended_at >= $since"), (args.since = f.since));
  if (f.until !== undefined) (where.push("ended_at < $until"), (args.until = f.until));
  if (f.day !== undefined) (where.push("day = $day"), (args.day = f.day));
  if (f.seat !== undefined) (where.push("seat = $seat"), (args.seat = f.seat));
  if (f.outcome !== undefined) (where.push("outcome = $outcome"), (args.outcome = f.outcome));
  if (f.cursor !== undefined) (where.push("position < $cursor"), (args.cursor = f.cursor));
  const rows = sqlite
    .query<{ body: string; position: number }, Record<string, string | number>>(
      `SELECT body, position FROM turn_receipts ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY position DESC LIMIT $limit`,
    )
    .all(args);
  const turns = rows.map(decodeRow);
  return { turns, next: rows.length === f.limit ? rows[rows.length - 1]!.position : null };
}

export interface SeatDay {
  seat: string;
  day: string;
  turns: number;
  /** Turns per outcome (completed, failed, …). */
  outcomes: Record<string, number>;
}

/** Turns and outcomes per seat per day, for the days from `first_day` to `last_day` (inclusive). */
export function weekOfReceipts(sqlite: Database, first_day: string, last_day: string): SeatDay[] {
  const rows = sqlite
    .query<{ seat: string; day: string; outcome: string; n: number }, Record<string, string>>(
      `SELECT seat, day, outcome, COUNT(*) AS n FROM turn_receipts WHERE day >= $first AND day <= $last GROUP BY seat, day, outcome ORDER BY seat, day, outcome`,
    )
    .all({ first: first_day, last: last_day });
  const out = new Map<string, SeatDay>();
  for (const r of rows) {
    const key = `${r.seat}\n${r.day}`;
    const cell = out.get(key) ?? { seat: r.seat, day: r.day, turns: 0, outcomes: {} };
    cell.turns += r.n;
    cell.outcomes[r.outcome] = r.n;
    out.set(key, cell);
  }
  return [...out.values()];
}

/** Each work item's last receipt's end (ms), for those of `keys` a turn worked on. */
export function lastTurnByWork(sqlite: Database, keys: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  if (keys.length === 0) return out;
  const rows = sqlite
    .query<{ work_key: string; at: number }, string[]>(
      `SELECT work_key, MAX(ended_at) AS at FROM turn_receipts WHERE work_key IN (${keys.map(() => "?").join(", ")}) GROUP BY work_key`,
    )
    .all(...keys);
  for (const r of rows) out[r.work_key] = r.at;
  return out;
}

/** The query parameters these reads take over the wire (queries.ts includes them). */
export const receiptQueries = {
  list: z.strictObject({
    q: z.literal("turns.list"),
    since: z.number().int().min(0).optional(),
    until: z.number().int().min(0).optional(),
    day: z.string().regex(/^\d{4}-\d{2}-\d{2}$/).optional(),
    seat: z.string().min(1).max(64).optional(),
    outcome: z.string().min(1).max(64).optional(),
    cursor: z.number().int().min(1).optional(),
    limit: z.number().int().min(1).max(500).default(100),
  }),
  week: z.strictObject({ q: z.literal("turns.week"), first_day: z.string().regex(/^\d{4}-\d{2}-\d{2}$/), last_day: z.string().regex(/^\d{4}-\d{2}-\d{2}$/) }),
  lastByWork: z.strictObject({ q: z.literal("turns.last_by_work"), keys: z.array(z.string().min(1).max(32)).max(500) }),
} as const;
