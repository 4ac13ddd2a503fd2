// The events backlog: recent events read back from CREWLET_EVENTS (a limits stream kept a
// day, src/queue/streams.ts), newest first, in pages, filtered by kind, seat and time. The
// stream is the fleet's, so any node answers for every node's events, and a dashboard
// opened after something happened still shows it.
//
// A page walks the stream backwards in windows of sequence numbers; each window is read by
// a short-lived consumer (no acks, in memory) filtered to the kind asked for, and deleted
// after. Every request is bounded: at most BACKLOG_SCAN_MAX sequence numbers are looked at,
// and a page that stops short says where to go on (`next`).
import { AckPolicy, DeliverPolicy, ReplayPolicy, type JetStreamClient, type JetStreamManager } from "nats";
import { z } from "zod";
import { EVENTS_SUBJECTS, STREAM_EVENTS, eventSubject } from "../queue/topics.ts";

/** A page at most: a screenful many times over, and one JSON answer well under a megabyte. */
export const BACKLOG_PAGE_MAX = 200;
/** Sequence numbers one window reads at most: one consumer's worth, a few hundred KB of
 * events. The first window is twice the page (most pages are found in it); each further
 * window doubles, up to this. */
export const BACKLOG_WINDOW = 1_000;
const FIRST_WINDOW_MIN = 100;
/** Sequence numbers one request looks at, in all: a sparse filter (one seat of many) stops
 * here and hands back `next` instead of reading a day of events in one request. */
export const BACKLOG_SCAN_MAX = 20_000;
/** A window's consumer is deleted after its read; this reaps it if the node dies first. */
const WINDOW_CONSUMER_INACTIVE_MS = 30_000;
/** One window's fetch: the messages exist (num_pending says so); a loaded server is slow. */
const WINDOW_FETCH_EXPIRES_MS = 5_000;
const NS_PER_MS = 1_000_000;

/** Event names as they appear on the stream (`crewlet.events.{name}`). */
export const eventName = z.string().regex(/^[\w-]{1,64}(\.[\w-]{1,64}){0,3}$/, "an event name is letters, digits, _ and -, dotted at most 3 times");

/** A streaming turn's text, emitted every few hundred ms: the live view's, not the backlog's. */
const LIVE_ONLY = new Set(["turn_text"]);

export interface BacklogQuery {
  /** Events strictly before this stream sequence (a previous page's `next`). */
  before?: number;
  limit: number;
  kind?: string;
  /** Events whose `seat` (or `handle`) is this seat. */
  seat?: string;
  /** Events at or after this time (ms since the epoch, by the stream's clock). */
  since?: number;
}

export interface BacklogEvent {
  seq: number;
  name: string;
  /** The event's body as published: {event, at, …fields}. */
  body: Record<string, unknown>;
}

export interface BacklogPage {
  events: BacklogEvent[];
  /** Pass as `before` for older events; null when the stream holds none older that match. */
  next: number | null;
  /** The oldest sequence the stream still holds (older events have aged out). */
  first_seq: number;
}

export interface BacklogSource {
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** Another limits stream read the same way (the audit log); the events stream when absent. */
  stream?: { name: string; subjects: string };
}

const body = z.record(z.string(), z.unknown());

function decode(data: Uint8Array): Record<string, unknown> | null {
  try {
    const parsed = body.safeParse(JSON.parse(new TextDecoder().decode(data)));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** Whether an event concerns `seat`. */
function ofSeat(b: Record<string, unknown>, seat: string): boolean {
  return b.seat === seat || b.handle === seat;
}

/** One window [lo, hi] of the stream, oldest first, those matching the query. Returns the
 * matches and whether the window reached back past `since`. */
async function readWindow(src: BacklogSource, lo: number, hi: number, q: BacklogQuery): Promise<{ found: BacklogEvent[]; pastSince: boolean }> {
  const stream = src.stream ?? { name: STREAM_EVENTS, subjects: EVENTS_SUBJECTS };
  const info = await src.jsm.consumers.add(stream.name, {
    ack_policy: AckPolicy.None,
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: lo,
    replay_policy: ReplayPolicy.Instant,
    filter_subject: q.kind && !src.stream ? eventSubject(q.kind) : stream.subjects,
    inactive_threshold: WINDOW_CONSUMER_INACTIVE_MS * NS_PER_MS,
    mem_storage: true,
    num_replicas: 1,
  });
  const found: BacklogEvent[] = [];
  let pastSince = false;
  try {
    const want = Math.min(info.num_pending, hi - lo + 1);
    if (want === 0) return { found, pastSince };
    const consumer = await src.js.consumers.get(stream.name, info.name);
    const messages = await consumer.fetch({ max_messages: want, expires: WINDOW_FETCH_EXPIRES_MS });
    let seen = 0;
    for await (const m of messages) {
      seen++;
      if (m.seq > hi) {
        messages.stop();
        break;
      }
      if (q.since !== undefined && m.info.timestampNanos / NS_PER_MS < q.since) pastSince = true;
      else {
        const name = m.subject.slice(stream.subjects.length - 1);
        const b = decode(m.data);
        if (b && (q.kind || src.stream || !LIVE_ONLY.has(name)) && (!q.seat || ofSeat(b, q.seat))) found.push({ seq: m.seq, name, body: b });
      }
      if (seen >= want) {
        messages.stop();
        break;
      }
    }
  } finally {
    await src.jsm.consumers.delete(stream.name, info.name).catch(() => undefined);
  }
  return { found, pastSince };
}

/** One page of the backlog, newest first. */
export async function readBacklog(src: BacklogSource, q: BacklogQuery): Promise<BacklogPage> {
  const state = (await src.jsm.streams.info(src.stream?.name ?? STREAM_EVENTS)).state;
  const first = Math.max(1, state.first_seq);
  let hi = Math.min(q.before !== undefined ? q.before - 1 : state.last_seq, state.last_seq);
  const kept: BacklogEvent[] = []; // oldest first
  let scanned = 0;
  let stop = false;
  let window = Math.min(BACKLOG_WINDOW, Math.max(FIRST_WINDOW_MIN, q.limit * 2));
  while (!stop && hi >= first && kept.length < q.limit && scanned < BACKLOG_SCAN_MAX) {
    const lo = Math.max(first, hi - window + 1);
    window = Math.min(BACKLOG_WINDOW, window * 2);
    const { found, pastSince } = await readWindow(src, lo, hi, q);
    kept.unshift(...found);
    scanned += hi - lo + 1;
    hi = lo - 1;
    stop = pastSince;
  }
  if (kept.length > q.limit) {
    const page = kept.slice(kept.length - q.limit);
    // The oldest shown is where the next page starts (strictly before it).
    return { events: [...page].reverse(), next: page[0]!.seq, first_seq: first };
  }
  const more = !stop && hi >= first;
  return { events: kept.reverse(), next: more ? hi + 1 : null, first_seq: first };
}
