// GET /chat/channels/{id}/stream?after=<position>: one channel, live, as Server-Sent
// Events, so the dashboard's Chat needs no polling. Frames:
//   ready     {after}                         once, when both feeds are open
//   messages  {messages}                      new messages of the channel, oldest first
//   turn      {turn_id, seat, thread, state, outcome?, error?, at}
//             state "working" when a seat's turn on a thread of this channel starts, then
//             "done" or "failed" (with the outcome and the engine's error) when it ends
//   failed    {seat, message_id, text, at}    the engine told the asker a turn gave up
//   dropped   n                               this client fell behind and lost n frames
//
// New messages: an ordered consumer on the chat state log says when a post for this
// channel was appended, at which position; the messages themselves are read through the
// estate router after `after` (the client's last position) with that position as the
// read's floor (the answering copy waits until it has applied it), so a reconnect with its
// last position misses nothing and a post is never read before it is applied. Turn status:
// an ordered consumer on CREWLET_EVENTS from a few minutes back, so a turn already running
// when the page opened shows as working.
import { Hono } from "hono";
import { DeliverPolicy, ReplayPolicy, type ConsumerMessages, type JsMsg, type NatsConnection } from "nats";
import { z } from "zod";
import type { Clock, Timer } from "../../clock.ts";
import type { Logger } from "../../log.ts";
import { estateCall } from "../estate-http.ts";
import { dmMembers } from "../../estate/mentions.ts";
import { channelId, decodeRecord } from "../../estate/records.ts";
import type { EstateRouter } from "../../estate/router.ts";
import { STREAM_EVENTS, eventSubject, stateLogStream, stateLogSubject } from "../../queue/topics.ts";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { ApiError, parseQuery } from "../errors.ts";
import { openSse, sseFrame } from "../sse.ts";

export interface ChatStreamSource {
  nc: NatsConnection;
  router: EstateRouter;
  clock: Clock;
  log: Logger;
}

/** Channel streams open at once on this node: two consumers each; one per open Chat tab. */
export const CHAT_STREAMS_MAX = 64;
/** Frames held for a slow client (a burst of posts and turn events). */
const CHAT_BUFFER_MAX = 256;
/** Keeps idle proxies from cutting the stream; also re-reads the channel (see below). */
const KEEPALIVE_MS = 15_000;
/** How far back turn events are replayed on open: a turn that started before the page
 * opened shows as working. Turns run seconds to minutes; one that ran longer than this
 * before the page opened shows once it ends. */
export const TURN_LOOKBACK_MS = 5 * 60_000;
/** Turns of this channel remembered between start and end (to match turn_completed, which
 * names no conversation): far more than run at once on one channel. */
const TURNS_REMEMBERED_MAX = 256;
/** Messages per read, and reads per catch-up: a client back from a long sleep is sent up to
 * 2,000 messages, then the rest on the next post. */
const READ_LIMIT = 100;
const READS_PER_PUMP_MAX = 20;
const CONSUMER_INACTIVE_MS = 30_000;
const PULL_MAX_MESSAGES = 64;
const JS_API_TIMEOUT_MS = 5_000;

const TURN_EVENTS = ["turn_started", "turn_completed", "turn_failure_told"] as const;

const query = z.strictObject({
  /** The last position the client has; omitted: from now on. */
  after: z.coerce.number().int().min(0).optional(),
});

const turnStarted = z.object({ turn_id: z.string(), seat: z.string(), conversation: z.string().optional(), at: z.number().optional() });
const turnCompleted = z.object({ turn_id: z.string(), seat: z.string(), outcome: z.string(), error: z.string().nullable().optional(), at: z.number().optional() });
const failureTold = z.object({ seat: z.string(), channel: z.string().nullable(), message_id: z.string().nullable(), text: z.string(), at: z.number().optional() });

/** Outcomes of turn_completed that mean the asker was not answered (src/agent/classify.ts). */
const FAILED_OUTCOMES = new Set(["failed", "budget_exhausted", "stopped", "round_limit"]);

function parseJson(data: Uint8Array): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(data));
  } catch {
    return null;
  }
}

export function chatStreamGroup(src: ChatStreamSource): RouteGroup {
  let open = 0;
  return {
    prefix: "/chat",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/channels/:id/stream", auth.require("state:read"), async (c) => {
        const parsedId = channelId.safeParse(c.req.param("id"));
        if (!parsedId.success) throw new ApiError(400, "invalid_input", `params.id: ${parsedId.error.issues[0]?.message}`, "id");
        const id = parsedId.data;
        const q = parseQuery(c, query);
        const channel = await estateCall(() => src.router.read({ q: "chat.channel", id }));
        // A DM nobody has written to yet exists from its first message: it may be watched.
        if (!channel && !dmMembers(id)) throw new ApiError(404, "unknown_channel", `no channel ${id}`, "id");
        if (open >= CHAT_STREAMS_MAX) throw new ApiError(503, "too_many_streams", `this node already streams chat to ${CHAT_STREAMS_MAX} clients; close a tab and retry`);
        open++;

        const feeds: ConsumerMessages[] = [];
        let cursor = q.after ?? null;
        /** The highest position of a post to this channel seen on the log. */
        let target = 0;
        let pumping: Promise<void> | null = null;
        let again = false;
        const turns = new Map<string, { seat: string; thread: string }>();
        let sweep: Timer | null = null;
        const sse = openSse({
          clock: src.clock,
          signal: c.req.raw.signal,
          buffer_max: CHAT_BUFFER_MAX,
          keepalive_ms: KEEPALIVE_MS,
          onClose: (dropped) => {
            open--;
            sweep?.cancel();
            for (const f of feeds) f.stop();
            src.log.debug("chat_stream_closed", { channel: id, dropped });
          },
        });

        /** Reads what is new after the cursor and sends it; serialised, re-run when asked meanwhile. */
        const pump = (): Promise<void> => {
          if (pumping) {
            again = true;
            return pumping;
          }
          pumping = (async () => {
            do {
              again = false;
              for (let i = 0; i < READS_PER_PUMP_MAX && !sse.closed; i++) {
                // At least up to the newest post seen on the log: the copy answering waits
                // for its applier to get there (a read before the apply would miss it).
                const got = await src.router.read({ q: "chat.messages", channel: id, cursor: cursor ?? undefined, limit: READ_LIMIT }, { atLeast: { chat: target } });
                if (got.messages.length === 0) break;
                cursor = got.messages[got.messages.length - 1]!.position;
                sse.send(sseFrame("messages", { messages: got.messages }));
                if (got.next === null) break;
              }
            } while (again && !sse.closed);
          })()
            .catch((err: unknown) => {
              if (!sse.closed) src.log.warn("chat_stream_read_failed", { channel: id, error: err as Error });
            })
            .finally(() => {
              pumping = null;
            });
          return pumping;
        };

        const onLog = (m: JsMsg) => {
          const decoded = decodeRecord("chat", m.data);
          if (!decoded.ok) return;
          const b = decoded.record.body;
          if (b.op !== "chat.post" || b.channel !== id) return;
          if (m.seq > target) target = m.seq;
          void pump();
        };

        const onEvent = (m: JsMsg) => {
          const raw = parseJson(m.data);
          if (m.subject === eventSubject("turn_started")) {
            const e = turnStarted.safeParse(raw);
            const prefix = `chat:${id}:`;
            if (!e.success || !e.data.conversation?.startsWith(prefix)) return;
            const thread = e.data.conversation.slice(prefix.length);
            turns.set(e.data.turn_id, { seat: e.data.seat, thread });
            if (turns.size > TURNS_REMEMBERED_MAX) turns.delete(turns.keys().next().value!);
            sse.send(sseFrame("turn", { turn_id: e.data.turn_id, seat: e.data.seat, thread, state: "working", at: e.data.at ?? null }));
          } else if (m.subject === eventSubject("turn_completed")) {
            const e = turnCompleted.safeParse(raw);
            if (!e.success) return;
            const t = turns.get(e.data.turn_id);
            if (!t) return;
            turns.delete(e.data.turn_id);
            const failed = FAILED_OUTCOMES.has(e.data.outcome);
            sse.send(
              sseFrame("turn", {
                turn_id: e.data.turn_id,
                seat: t.seat,
                thread: t.thread,
                state: failed ? "failed" : e.data.outcome === "completed" ? "done" : "waiting",
                outcome: e.data.outcome,
                error: e.data.error ?? null,
                at: e.data.at ?? null,
              }),
            );
          } else if (m.subject === eventSubject("turn_failure_told")) {
            const e = failureTold.safeParse(raw);
            if (!e.success || e.data.channel !== id) return;
            sse.send(sseFrame("failed", { seat: e.data.seat, message_id: e.data.message_id, text: e.data.text, at: e.data.at ?? null }));
          }
        };

        try {
          const js = src.nc.jetstream({ timeout: JS_API_TIMEOUT_MS });
          const log = await js.consumers.get(stateLogStream("chat"), {
            filterSubjects: stateLogSubject("chat", "chat_post"),
            deliver_policy: DeliverPolicy.New,
            replay_policy: ReplayPolicy.Instant,
            inactive_threshold: CONSUMER_INACTIVE_MS,
          });
          feeds.push(await log.consume({ max_messages: PULL_MAX_MESSAGES, callback: onLog }));
          const events = await js.consumers.get(STREAM_EVENTS, {
            filterSubjects: TURN_EVENTS.map((n) => eventSubject(n)),
            deliver_policy: DeliverPolicy.StartTime,
            opt_start_time: new Date(src.clock.now() - TURN_LOOKBACK_MS).toISOString(),
            replay_policy: ReplayPolicy.Instant,
            inactive_threshold: CONSUMER_INACTIVE_MS,
          });
          feeds.push(await events.consume({ max_messages: PULL_MAX_MESSAGES, callback: onEvent }));
          if (cursor === null) {
            // From now on: the newest message is where this client is.
            const last = await src.router.read({ q: "chat.messages", channel: id, order: "newest", limit: 1 });
            cursor = last.messages[0]?.position ?? 0;
          }
        } catch (err) {
          sse.close();
          src.log.warn("chat_stream_failed", { channel: id, error: err as Error });
          throw new ApiError(503, "chat_stream_unavailable", "the chat stream cannot be opened right now; retry shortly");
        }
        for (const f of feeds) void f.closed().then(sse.close, sse.close);
        if (sse.closed) for (const f of feeds) f.stop();
        sse.send(sseFrame("ready", { after: cursor }));
        void pump();
        // A post missed by the log feed (a reconnect of its consumer) is read on the next
        // keepalive at the latest.
        sweep = src.clock.setInterval(() => void pump(), KEEPALIVE_MS);
        if (sse.closed) sweep.cancel();
        return sse.response();
      });
      return app;
    },
  };
}
