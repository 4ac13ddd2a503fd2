// GET /events/stream: the engine's events (turn_started, tool_called, turn_completed,
// seat_claimed …) as Server-Sent Events, read live from CREWLET_EVENTS. Each client gets
// its own ordered consumer starting at new messages: nothing is acknowledged or kept for
// it, and it costs the stream nothing when the client goes. A client that reads slower
// than events arrive is told how many it missed rather than holding memory for them.
import { Hono } from "hono";
import { DeliverPolicy, ReplayPolicy, type ConsumerMessages, type JsMsg, type NatsConnection } from "nats";
import { z } from "zod";
import type { Clock, Timer } from "../../clock.ts";
import type { Logger } from "../../log.ts";
import { EVENTS_SUBJECTS, STREAM_EVENTS } from "../../queue/topics.ts";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { ApiError } from "../errors.ts";

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

const encoder = new TextEncoder();

/** One SSE frame; `name` is a subject's tail (no newlines), data one line of JSON. */
export function sseFrame(name: string, data: unknown): Uint8Array {
  return encoder.encode(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
}

/** The frame for one stream message, or null when it is not an event we can show. */
export function eventFrame(subject: string, payload: Uint8Array): Uint8Array | null {
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
  return parsed.success ? sseFrame(name, parsed.data) : null;
}

export function eventsGroup(src: EventsSource): RouteGroup {
  let open = 0;
  return {
    prefix: "/events",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/stream", auth.require("state:read"), async (c) => {
        if (open >= EVENT_STREAMS_MAX) throw new ApiError(503, "too_many_streams", `this node already streams events to ${EVENT_STREAMS_MAX} clients; close a tab and retry`);
        open++;
        let messages: ConsumerMessages | null = null;
        let keepalive: Timer | null = null;
        let closed = false;
        let dropped = 0;
        let controller!: ReadableStreamDefaultController<Uint8Array>;
        const close = () => {
          if (closed) return;
          closed = true;
          open--;
          keepalive?.cancel();
          messages?.stop();
          try {
            controller.close();
          } catch {
            // already closed or errored by the client going
          }
          src.log.debug("events_stream_closed", { dropped });
        };
        const send = (frame: Uint8Array) => {
          if (closed) return;
          // desiredSize counts free slots in the bounded queue; at zero the client is behind.
          if ((controller.desiredSize ?? 0) <= 0) {
            dropped++;
            return;
          }
          if (dropped > 0) {
            controller.enqueue(sseFrame("dropped", dropped));
            dropped = 0;
          }
          controller.enqueue(frame);
        };
        const body = new ReadableStream<Uint8Array>(
          {
            start: (ctl) => {
              controller = ctl;
            },
            cancel: close,
          },
          new CountQueuingStrategy({ highWaterMark: EVENT_BUFFER_MAX }),
        );
        c.req.raw.signal.addEventListener("abort", close, { once: true });
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
              const frame = eventFrame(m.subject, m.data);
              if (frame) send(frame);
            },
          });
        } catch (err) {
          close();
          src.log.warn("events_stream_failed", { error: err as Error });
          throw new ApiError(503, "events_unavailable", "the event stream cannot be read right now; retry shortly");
        }
        // The connection closing (the node stopping) ends the stream for its client.
        void messages.closed().then(close, close);
        if (c.req.raw.signal.aborted) close();
        send(sseFrame("ready", { stream: STREAM_EVENTS }));
        keepalive = src.clock.setInterval(() => {
          // A client that is behind has data coming; it needs no keepalive.
          if (!closed && (controller.desiredSize ?? 0) > 0) controller.enqueue(encoder.encode(": keepalive\n\n"));
        }, KEEPALIVE_MS);
        return new Response(body, {
          status: 200,
          headers: {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache, no-transform",
            "x-accel-buffering": "no",
          },
        });
      });
      return app;
    },
  };
}
