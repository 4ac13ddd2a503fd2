// GET /events: the backlog, newest first in pages (src/api/event-backlog.ts).
// GET /events/stream: the engine's events (turn_started, tool_called, turn_completed,
// seat_claimed …) as Server-Sent Events, read live from CREWLET_EVENTS. Each client gets
// its own ordered consumer starting at new messages: nothing is acknowledged or kept for
// it, and it costs the stream nothing when the client goes. A client that reads slower
// than events arrive is told how many it missed rather than holding memory for them.
import { Hono } from "hono";
import { DeliverPolicy, ReplayPolicy, type ConsumerMessages, type JsMsg, type NatsConnection } from "nats";
import { z } from "zod";
import type { Clock } from "../../clock.ts";
import type { Logger } from "../../log.ts";
import { EVENTS_SUBJECTS, STREAM_EVENTS } from "../../queue/topics.ts";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { ApiError, parseNoQuery, parseQuery } from "../errors.ts";
import { BACKLOG_PAGE_MAX, eventName, readBacklog } from "../event-backlog.ts";
import { openSse, sseFrame } from "../sse.ts";
import { handle } from "../../estate/records.ts";

export { sseFrame };

export interface EventsSource {
  nc: NatsConnection;
  clock: Clock;
  log: Logger;
}

/** Frames waiting for one slow client: a few seconds of a busy company's events. Past it
 * events are dropped and counted, so a stalled tab cannot grow the node's memory. */
export const EVENT_BUFFER_MAX = 256;
/** Streams open at once on this node: each holds a consumer on the server; a dashboard
 * needs one per open tab, and this is far past a small team's tabs. */
export const EVENT_STREAMS_MAX = 32;
/** A comment line this often keeps idle proxies from cutting the stream and shows up a
 * client that has gone (the write fails) even when no event arrives. */
export const KEEPALIVE_MS = 15_000;
/** The server deletes a consumer nobody pulled from for this long: a client that vanished
 * without a close (a killed node) leaves nothing behind for longer. */
const CONSUMER_INACTIVE_MS = 30_000;
/** Messages per pull: events are small; a pull's worth is well under the buffer. */
const PULL_MAX_MESSAGES = 64;
/** The consumer create call: a local server answers in ~1 ms; a cluster electing waits. */
const JS_API_TIMEOUT_MS = 5_000;

const EVENT_PREFIX = EVENTS_SUBJECTS.slice(0, -1); // "crewlet.events."
/** One event body: a JSON object ({event, at, …fields}); anything else on the subject is skipped. */
const eventBody = z.record(z.string(), z.unknown());

const backlogQuery = z.strictObject({
  before: z.coerce.number().int().min(1).optional(),
  limit: z.coerce.number().int().min(1).max(BACKLOG_PAGE_MAX).default(50),
  kind: eventName.optional(),
  seat: handle.optional(),
  since: z.coerce.number().int().min(0).optional(),
});

/** The frame for one stream message, or null when it is not an event we can show. Its SSE
 * id is the stream sequence, so a client can tell a live event from one it read in the
 * backlog (GET /events gives the same `seq`). */
export function eventFrame(subject: string, payload: Uint8Array, seq?: number): Uint8Array | null {
  if (!subject.startsWith(EVENT_PREFIX)) return null;
  const name = subject.slice(EVENT_PREFIX.length);
  if (!/^[\w.-]{1,128}$/.test(name)) return null;
  let raw: unknown;
  try {
    raw = JSON.parse(new TextDecoder().decode(payload));
  } catch {
    return null;
  }
  const parsed = eventBody.safeParse(raw);
  if (!parsed.success) return null;
  return seq === undefined ? sseFrame(name, parsed.data) : new Uint8Array([...new TextEncoder().encode(`id: ${seq}\n`), ...sseFrame(name, parsed.data)]);
}

export function eventsGroup(src: EventsSource): RouteGroup {
  let open = 0;
  return {
    prefix: "/events",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/", auth.require("state:read"), async (c) => {
        const q = parseQuery(c, backlogQuery);
        try {
          const js = src.nc.jetstream({ timeout: JS_API_TIMEOUT_MS });
          const jsm = await src.nc.jetstreamManager({ checkAPI: false, timeout: JS_API_TIMEOUT_MS });
          return c.json(await readBacklog({ js, jsm }, q));
        } catch (err) {
          if (err instanceof ApiError) throw err;
          src.log.warn("events_backlog_failed", { error: err as Error });
          throw new ApiError(503, "events_unavailable", "the event backlog cannot be read right now; retry shortly");
        }
      });
      app.get("/stream", auth.require("state:read"), async (c) => {
        parseNoQuery(c);
        if (open >= EVENT_STREAMS_MAX) throw new ApiError(503, "too_many_streams", `this node already streams events to ${EVENT_STREAMS_MAX} clients; close a tab and retry`);
        open++;
        let messages: ConsumerMessages | null = null;
        const sse = openSse({
          clock: src.clock,
          signal: c.req.raw.signal,
          buffer_max: EVENT_BUFFER_MAX,
          keepalive_ms: KEEPALIVE_MS,
          onClose: (dropped) => {
            open--;
            messages?.stop();
            src.log.debug("events_stream_closed", { dropped });
          },
        });
        try {
          const js = src.nc.jetstream({ timeout: JS_API_TIMEOUT_MS });
          const consumer = await js.consumers.get(STREAM_EVENTS, {
            filterSubjects: EVENTS_SUBJECTS,
            deliver_policy: DeliverPolicy.New,
            replay_policy: ReplayPolicy.Instant,
            inactive_threshold: CONSUMER_INACTIVE_MS,
          });
          messages = await consumer.consume({
            max_messages: PULL_MAX_MESSAGES,
            callback: (m: JsMsg) => {
              const frame = eventFrame(m.subject, m.data, m.seq);
              if (frame) sse.send(frame);
            },
          });
        } catch (err) {
          sse.close();
          src.log.warn("events_stream_failed", { error: err as Error });
          throw new ApiError(503, "events_unavailable", "the event stream cannot be read right now; retry shortly");
        }
        // The connection closing (the node stopping) ends the stream for its client.
        void messages.closed().then(sse.close, sse.close);
        if (sse.closed) messages.stop();
        sse.send(sseFrame("ready", { stream: STREAM_EVENTS }));
        return sse.response();
      });
      return app;
    },
  };
}
