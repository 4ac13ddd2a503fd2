// The notification: what the ingress publishes on `crewlet.notifications.inbound` for one
// accepted delivery, and what the handler (any seats node) turns into wakes. It carries
// the normalized event and the seats it routes to — never the provider's raw payload —
// and the delivery key every wake it causes is ledgered on.
import { createHash } from "node:crypto";
import { z } from "zod";
import { cutChars, normalizedEventSchema, type NormalizedEvent } from "./event.ts";
import { INTEGRATION_KINDS, type IntegrationKind } from "../config/integrations.ts";
import type { Trigger } from "../org/trigger.ts";
import { renderEvent } from "./render.ts";

/** Seats one notification wakes at most: routes and mentions are bounded by config and
 * MAX_EVENT_MENTIONS; this bounds the handler's loop whatever a newer ingress sends. */
export const MAX_NOTIFICATION_SEATS = 64;

export const notificationSchema = z.strictObject({
  v: z.literal(1),
  integration: z.string().min(1).max(48),
  kind: z.enum(INTEGRATION_KINDS),
  /** The delivery's dedupe key (deliveryKey): claims, the stream's msg id, the wakes' event ids. */
  delivery: z.string().regex(/^d\.[a-z0-9_\-]+\.[0-9a-f]{32}$/),
  seats: z.array(z.string().regex(/^[a-z0-9][a-z0-9_\-]{0,47}$/)).min(1).max(MAX_NOTIFICATION_SEATS),
  event: normalizedEventSchema,
  /** Clock ms the ingress accepted it. */
  received_at: z.number().int().min(0),
});
export type Notification = z.output<typeof notificationSchema>;

/**
 * One delivery's identity across the fleet: the integration and the provider's delivery
 * id (X-GitHub-Delivery, Slack's event_id, the generic header or body hash), hashed into
 * one KV-safe token. 128 bits: no two deliveries a day's claims hold collide.
 */
export function deliveryKey(integration: string, delivery_id: string): string {
  return `d.${integration}.${createHash("sha256").update(delivery_id, "utf8").digest("hex").slice(0, 32)}`;
}

export function encodeNotification(n: Notification): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(notificationSchema.parse(n)));
}

export type DecodedNotification = { ok: true; notification: Notification } | { ok: false; error: string };

export function decodeNotification(data: Uint8Array): DecodedNotification {
  let raw: unknown;
  try {
    raw = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(data));
  } catch (err) {
    return { ok: false, error: `not JSON: ${(err as Error).message}` };
  }
  const p = notificationSchema.safeParse(raw);
  if (!p.success) {
    const issue = p.error.issues[0];
    return { ok: false, error: `${issue?.path.join(".") || "notification"}: ${issue?.message ?? "invalid"}` };
  }
  return { ok: true, notification: p.data };
}

/** The conversation a wake continues: `{kind}:{integration}:{thread}` (origin.ts reads it back). */
export function conversationOf(kind: IntegrationKind, integration: string, ev: Pick<NormalizedEvent, "thread">): string {
  return `${kind}:${integration}:${ev.thread}`;
}

/**
 * A wake's event id, inbox message id and ledger key: one per (delivery, seat), or per
 * (message, seat) when the event names a message two deliveries can share.
 */
export function wakeEventId(n: Pick<Notification, "integration" | "delivery" | "event">, seat: string): string {
  if (n.event.message !== null) return `hook.${n.integration}.m${createHash("sha256").update(n.event.message, "utf8").digest("hex").slice(0, 32)}.${seat}`;
  return `hook.${n.delivery.slice(2)}.${seat}`;
}

/** Told to the model when its final words will go back where the wake came from. */
export const ANSWERS_BACK_NOTE = "(Your final answer is posted back there as your reply; say nothing to post nothing.)";

/**
 * The trigger one seat's inbox gets for one notification. `answersBack`: the integration
 * has a token and the event a place to answer (the model is told so).
 */
export function triggerFor(n: Notification, seat: string, answersBack = false): Trigger {
  const text = renderEvent(n.integration, n.event);
  return {
    type: "external_notification",
    event_id: wakeEventId(n, seat),
    seat,
    conversation: conversationOf(n.kind, n.integration, n.event),
    from: cutChars(`${n.kind}:${n.event.actor}`, 128),
    text: answersBack && n.event.origin !== null ? `${text}\n${ANSWERS_BACK_NOTE}` : text,
    refs: {},
    created_at: n.received_at,
  };
}
