// Generic signed webhooks → normalized events. Pure. The sender posts a small JSON object
// of its own making; `text` is the one field we need, the rest improve the wake.
import { z } from "zod";
import { cutBytes, cutChars, MAX_EVENT_BODY_BYTES, mentionsIn, type NormalizedEvent } from "./event.ts";
import { zodField, type Parsed } from "./parsed.ts";

export const genericPayloadSchema = z.object({
  /** Matched by a route's `events`; absent reads as `notification`. */
  event: z.string().regex(/^[a-z_]+(\.[a-z_]+)?$/, "is `event` or `event.action`").optional(),
  text: z.string().min(1),
  title: z.string().optional(),
  url: z.string().url().optional(),
  sender: z.string().min(1).optional(),
  /** Deliveries sharing a thread continue one conversation. */
  thread: z.string().min(1).max(200).optional(),
});

export function parseGeneric(payload: unknown, delivery: string): Parsed {
  const p = genericPayloadSchema.safeParse(payload);
  const event = typeof (payload as { event?: unknown } | null)?.event === "string" ? String((payload as { event: string }).event) : "notification";
  if (!p.success) return { status: "unusable", event, ...zodField(p.error) };
  const d = p.data;
  const ev: NormalizedEvent = {
    kind: "generic",
    event: cutChars(d.event ?? "notification"),
    actor: cutChars(d.sender ?? "webhook"),
    summary: d.title ? `sent “${cutChars(d.title)}”` : "sent a notification",
    where: "webhook",
    body: cutBytes(d.text, MAX_EVENT_BODY_BYTES),
    url: d.url && d.url.length <= 2048 ? d.url : null,
    repository: null,
    channel: null,
    labels: [],
    mentions: mentionsIn(d.text),
    thread: cutChars(d.thread ?? delivery, 600),
    origin: null,
    message: null,
  };
  return { status: "event", event: ev };
}
