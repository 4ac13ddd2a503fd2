// A provider's delivery reduced to what the fleet uses: the normalized event. It is what
// the ingress routes on, what crosses the notifications stream (never the raw payload) and
// what the trigger text is rendered from. Every field is bounded here, so a notification
// is small whatever the provider sent.
import { z } from "zod";
import { INTEGRATION_KINDS } from "../config/integrations.ts";

/** The body quoted in a wake; the rest is one URL away. 4 KiB is a long comment. */
export const MAX_EVENT_BODY_BYTES = 4 * 1024;
/** Titles, names and labels are short by nature; a longer one is cut. */
export const MAX_EVENT_FIELD_CHARS = 256;
/** Labels carried (a label route matches among them). */
export const MAX_EVENT_LABELS = 32;
/** Handles mentioned that are kept (each becomes at most one wake). */
export const MAX_EVENT_MENTIONS = 16;

/** Cuts at a UTF-8 byte bound without splitting a character. */
export function cutBytes(s: string, max: number): string {
  if (Buffer.byteLength(s, "utf8") <= max) return s;
  return Buffer.from(s, "utf8").subarray(0, max).toString("utf8").replace(/\uFFFD+$/, "") + "…";
}

export function cutChars(s: string, max = MAX_EVENT_FIELD_CHARS): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

const field = z.string().max(MAX_EVENT_FIELD_CHARS + 1);

/**
 * Where a reply goes back to: a GitHub issue or pull request (comments on both are issue
 * comments), or a Slack thread. None for an event with nowhere to answer (a check run on
 * no pull request, a generic hook).
 */
export const originSchema = z.discriminatedUnion("kind", [
  z.strictObject({ kind: z.literal("github"), repository: field, number: z.number().int().min(1) }),
  z.strictObject({ kind: z.literal("slack"), channel: field, thread_ts: field }),
]);
export type Origin = z.output<typeof originSchema>;

export const normalizedEventSchema = z.strictObject({
  kind: z.enum(INTEGRATION_KINDS),
  /** `issues.opened`, `issue_comment.created`, `message`, a generic event name. */
  event: field,
  /** Who did it: a GitHub login, a Slack user id, a generic sender. */
  actor: field,
  /** What they did, as words: "opened issue #12 “Crash on start”". */
  summary: z.string().max(2 * MAX_EVENT_FIELD_CHARS + 64),
  /** Where: `owner/repo`, `#C024BE91L`. */
  where: field,
  body: z.string().refine((s) => Buffer.byteLength(s, "utf8") <= MAX_EVENT_BODY_BYTES + 4, "body is over the bound"),
  url: z.string().max(2048).nullable(),
  repository: field.nullable(),
  channel: field.nullable(),
  labels: z.array(field).max(MAX_EVENT_LABELS),
  /** Handles written as @handle in the body (lower-cased; not yet checked against the org). */
  mentions: z.array(field).max(MAX_EVENT_MENTIONS),
  /** The conversation a wake continues: one per issue / pull request / Slack thread. */
  thread: z.string().min(1).max(600),
  origin: originSchema.nullable(),
  /**
   * The message the event is about, when two deliveries can name one: Slack sends a
   * message that mentions the app both as `message` and as `app_mention`, each with its
   * own event_id. A wake is keyed on it, so the seat is woken once for the message.
   */
  message: z.string().max(600).nullable(),
});
export type NormalizedEvent = z.output<typeof normalizedEventSchema>;

/**
 * Appended (invisibly: an HTML comment) to everything the outbound tools write on GitHub,
 * so the webhook that write causes is known for an agent's own words and wakes nobody —
 * whichever account the token is, and on whichever node the webhook lands.
 */
export const CREWLET_MARKER = "<!-- crewlet -->";

/**
 * `@handle` tokens in free text, in order, once each. A handle follows the org's grammar;
 * an e-mail address (`a@b.c`) is not a mention because the `@` must not follow a word
 * character.
 */
export function mentionsIn(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/(?<![\w@])@([a-z0-9][a-z0-9_\-]{0,47})\b/gi)) {
    const h = m[1]!.toLowerCase();
    if (!out.includes(h)) out.push(h);
    if (out.length >= MAX_EVENT_MENTIONS) break;
  }
  return out;
}
