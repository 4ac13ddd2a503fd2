// Slack Events API deliveries → normalized events. Pure. The url_verification handshake is
// answered with its challenge; an event_callback carrying a `message` or `app_mention` is
// read for the fields we use. Edits, deletions and joins wake nobody, and neither do this
// app's own posts (an agent answering its own reply would never stop): the event names the
// app's bot user in `authorizations`, and `self` may name it too. Other bots' posts (an
// alerting integration in #ops) are news like anyone's.
import { z } from "zod";
import { cutBytes, cutChars, MAX_EVENT_BODY_BYTES, mentionsIn, type NormalizedEvent } from "./event.ts";
import { zodField, type Parsed } from "./parsed.ts";

const ROUTED_EVENTS = new Set(["message", "app_mention"]);

const envelope = z.object({ type: z.string().min(1) });
const verification = z.object({ type: z.literal("url_verification"), challenge: z.string().min(1).max(1024) });
const callback = z.object({
  type: z.literal("event_callback"),
  event_id: z.string().min(1),
  event: z.object({ type: z.string().min(1) }).passthrough(),
  /** The installation's own users (its bot user among them): their posts are ours. */
  authorizations: z.array(z.object({ user_id: z.string().optional(), is_bot: z.boolean().optional() })).default([]),
});
const message = z.object({
  type: z.string(),
  channel: z.string().min(1),
  user: z.string().min(1).optional(),
  text: z.string().default(""),
  ts: z.string().regex(/^\d+\.\d+$/, "is not a Slack timestamp"),
  thread_ts: z.string().regex(/^\d+\.\d+$/).optional(),
  subtype: z.string().optional(),
  bot_id: z.string().optional(),
  /** A bot post's display name (legacy `bot_message`s carry no user). */
  username: z.string().optional(),
});

/** Message subtypes that are somebody saying something; every other subtype is housekeeping. */
const SPOKEN_SUBTYPES = new Set(["bot_message", "thread_broadcast", "file_share", "me_message"]);

/** Slack writes a user mention as `<@U024BE7LH>`; those name Slack users, not seats. */
function plainText(text: string): string {
  return text.replace(/<@[A-Z0-9]+(\|[^>]*)?>/g, "").replace(/<(https?:[^|>]+)(\|([^>]*))?>/g, (_, url: string, _b, label?: string) => label ?? url);
}

/** The Slack delivery id, when the body has one (event_callback's event_id). */
export function slackEventId(payload: unknown): string | null {
  const p = callback.safeParse(payload);
  return p.success ? p.data.event_id : null;
}

export function parseSlack(payload: unknown, self?: string): Parsed {
  const env = envelope.safeParse(payload);
  if (!env.success) return { status: "unusable", event: "slack", ...zodField(env.error) };
  if (env.data.type === "url_verification") {
    const v = verification.safeParse(payload);
    if (!v.success) return { status: "unusable", event: "url_verification", ...zodField(v.error) };
    return { status: "challenge", challenge: v.data.challenge };
  }
  if (env.data.type !== "event_callback") return { status: "ignored", event: env.data.type, reason: `envelope type ${env.data.type} is not one we route` };
  const cb = callback.safeParse(payload);
  if (!cb.success) return { status: "unusable", event: "event_callback", ...zodField(cb.error) };
  const type = cb.data.event.type;
  if (!ROUTED_EVENTS.has(type)) return { status: "ignored", event: type, reason: `event type ${type} is not one we route` };
  const m = message.safeParse(cb.data.event);
  if (!m.success) {
    const { field, message: why } = zodField(m.error);
    return { status: "unusable", event: type, field: `event.${field}`, message: why };
  }
  const e = m.data;
  if (e.subtype !== undefined && !SPOKEN_SUBTYPES.has(e.subtype)) return { status: "ignored", event: type, reason: `message subtype ${e.subtype} (edits, deletions and joins wake nobody)` };
  const own = new Set(cb.data.authorizations.filter((a) => a.is_bot !== false).flatMap((a) => (a.user_id ? [a.user_id] : [])));
  if (self !== undefined) own.add(self);
  if (e.user !== undefined && own.has(e.user)) return { status: "ignored", event: type, reason: "posted by this app's own bot user" };
  if (e.bot_id !== undefined && own.has(e.bot_id)) return { status: "ignored", event: type, reason: "posted by this app's own bot" };
  const actor = e.user ?? e.username ?? e.bot_id;
  if (actor === undefined) return { status: "unusable", event: type, field: "event.user", message: "Required" };
  const text = plainText(e.text);
  const thread_ts = e.thread_ts ?? e.ts;
  const ev: NormalizedEvent = {
    kind: "slack",
    event: type,
    actor: cutChars(actor),
    summary: type === "app_mention" ? "mentioned the app" : e.thread_ts !== undefined && e.thread_ts !== e.ts ? "replied in a thread" : "posted a message",
    where: cutChars(`#${e.channel}`),
    body: cutBytes(text, MAX_EVENT_BODY_BYTES),
    url: `https://slack.com/archives/${encodeURIComponent(e.channel)}/p${e.ts.replace(".", "")}`,
    repository: null,
    channel: cutChars(e.channel),
    labels: [],
    mentions: mentionsIn(text),
    thread: cutChars(`${e.channel}:${thread_ts}`, 600),
    origin: { kind: "slack", channel: cutChars(e.channel), thread_ts },
    message: cutChars(`${e.channel}:${e.ts}`, 600),
  };
  return { status: "event", event: ev };
}
