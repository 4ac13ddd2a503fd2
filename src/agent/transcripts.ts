// Turn transcripts in the node store (node.db), kept by the node that ran the turn and read
// through the seat's holder like its memory (src/agent/holder-reads.ts). Every write decodes the
// transcript against its one schema first (transcript.ts). Bounded per seat by count and by
// age, trimmed on every insert, so the table never holds more than a seat's cap.
//
// Not on the memory changelog: that stream keeps one message per row subject for good
// (max_age 0, no deletes), so a capped, expiring table of up-to-512 KiB documents would
// grow it without bound and make every seat move replay megabytes before the seat may run.
// A seat that moves starts a new history on its new holder; the old holder keeps its own
// until the horizon (the issue: "kept by the node that ran the turn for a named horizon").
import type { Database } from "bun:sqlite";
import { mustDecodeTranscript, summarize, type TranscriptSummary, type TurnTranscript } from "./transcript.ts";

/** Transcripts kept per seat: a few days of a busy seat (the usual turn is a few KiB). */
export const TRANSCRIPTS_PER_SEAT_MAX = 200;
/** …and bytes kept per seat, whichever binds first: 16 MiB is 32 of the largest (512 KiB)
 * transcripts, so a seat of long tool-heavy turns cannot fill the node's disk. */
export const TRANSCRIPT_SEAT_BYTES_MAX = 16 * 1024 * 1024;
/** How long a transcript is kept: a week covers "what did it do on Monday" on Friday. */
export const TRANSCRIPT_HORIZON_MS = 7 * 24 * 60 * 60 * 1000;
/** Rows one page lists at most (summaries: small). */
export const TRANSCRIPT_PAGE_MAX = 50;
export const TRANSCRIPT_PAGE_DEFAULT = 20;

export const TRANSCRIPTS_DDL = [
  `CREATE TABLE IF NOT EXISTS turn_transcripts (
     seq INTEGER PRIMARY KEY AUTOINCREMENT,
     handle TEXT NOT NULL,
     id TEXT NOT NULL,
     started_at INTEGER NOT NULL,
     summary TEXT NOT NULL,
     body TEXT NOT NULL,
     bytes INTEGER NOT NULL
   )`,
  `CREATE UNIQUE INDEX IF NOT EXISTS turn_transcripts_id ON turn_transcripts (handle, id)`,
  `CREATE INDEX IF NOT EXISTS turn_transcripts_recent ON turn_transcripts (handle, seq)`,
  `CREATE INDEX IF NOT EXISTS turn_transcripts_age ON turn_transcripts (started_at)`,
];

export interface TranscriptPage {
  turns: TranscriptSummary[];
  /** Pass as `before` for the next (older) page; null at the end. */
  next: number | null;
}

export class TranscriptStore {
  constructor(
    private readonly db: Database,
    private readonly caps: { per_seat: number; seat_bytes: number; horizon_ms: number } = { per_seat: TRANSCRIPTS_PER_SEAT_MAX, seat_bytes: TRANSCRIPT_SEAT_BYTES_MAX, horizon_ms: TRANSCRIPT_HORIZON_MS },
  ) {
    for (const ddl of TRANSCRIPTS_DDL) db.run(ddl);
  }

  /** Keeps a transcript (decoded first; a second write of one turn id keeps the first). */
  insert(value: unknown, now_ms: number): void {
    const t = mustDecodeTranscript(value);
    const body = JSON.stringify(t);
    this.db.transaction(() => {
      this.db
        .query(`INSERT INTO turn_transcripts (handle, id, started_at, summary, body, bytes) VALUES ($handle, $id, $started_at, $summary, $body, $bytes) ON CONFLICT DO NOTHING`)
        .run({ $handle: t.handle, $id: t.id, $started_at: t.started_at, $summary: JSON.stringify(summarize(t)), $body: body, $bytes: Buffer.byteLength(body, "utf8") });
      // The seat's caps: past its newest per_seat rows, or past seat_bytes counted from the
      // newest, the older rows go (the newest is always kept).
      this.db
        .query(
          `DELETE FROM turn_transcripts WHERE seq IN (
             SELECT seq FROM (SELECT seq, ROW_NUMBER() OVER w AS n, SUM(bytes) OVER w AS run FROM turn_transcripts WHERE handle = $handle WINDOW w AS (ORDER BY seq DESC))
             WHERE n > 1 AND (n > $cap OR run > $bytes))`,
        )
        .run({ $handle: t.handle, $cap: this.caps.per_seat, $bytes: this.caps.seat_bytes });
      this.trim(now_ms);
    })();
  }

  /** Drops what is past the horizon (every seat); returns how many rows went. */
  trim(now_ms: number): number {
    return this.db.query(`DELETE FROM turn_transcripts WHERE started_at < $before`).run({ $before: now_ms - this.caps.horizon_ms }).changes;
  }

  /** A seat's transcripts, newest first, `limit` a page, older than `before` when given. */
  list(handle: string, limit: number, before?: number | null): TranscriptPage {
    const lim = Math.max(1, Math.min(limit, TRANSCRIPT_PAGE_MAX));
    const rows = this.db
      .query(`SELECT seq, summary FROM turn_transcripts WHERE handle = $handle AND seq < $before ORDER BY seq DESC LIMIT $limit`)
      .all({ $handle: handle, $before: before ?? Number.MAX_SAFE_INTEGER, $limit: lim + 1 }) as { seq: number; summary: string }[];
    const page = rows.slice(0, lim);
    return { turns: page.map((r) => JSON.parse(r.summary) as TranscriptSummary), next: rows.length > lim ? page[page.length - 1]!.seq : null };
  }

  get(handle: string, id: string): TurnTranscript | null {
    const row = this.db.query(`SELECT body FROM turn_transcripts WHERE handle = $handle AND id = $id`).get({ $handle: handle, $id: id }) as { body: string } | null;
    if (!row) return null;
    const t = JSON.parse(row.body) as TurnTranscript;
    // A transcript kept before skills existed names none.
    return { ...t, skills: t.skills ?? [] };
  }

  count(handle: string): number {
    return (this.db.query(`SELECT COUNT(*) AS n FROM turn_transcripts WHERE handle = $handle`).get({ $handle: handle }) as { n: number }).n;
  }
}
