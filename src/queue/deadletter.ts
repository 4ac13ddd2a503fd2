// What a dead letter carries and how it is read back. Both backends store a dead letter as
// the original message with these headers added, so deadLetters() parses one shape.
import { createHash } from "node:crypto";
import { z } from "zod";
import type { DeadLetter, Delivery, PublishOptions, PublishResult } from "./contract.ts";
import { currentMailboxSubject, dlqSubject } from "./topics.ts";

export const H_MSG_ID = "Nats-Msg-Id";
export const H_ORIGINAL_MSG_ID = "Crewlet-Original-Msg-Id";
export const H_DLQ_SUBJECT = "Crewlet-Dlq-Subject";
export const H_DLQ_GROUP = "Crewlet-Dlq-Group";
export const H_DLQ_REASON = "Crewlet-Dlq-Reason";
export const H_DLQ_DELIVERIES = "Crewlet-Dlq-Deliveries";
export const H_DLQ_STREAM_SEQ = "Crewlet-Dlq-Stream-Seq";

/** Reasons can quote a thrown error; a header is no place for a stack trace. */
const REASON_MAX_CHARS = 512;

export interface DeadLetterCopy {
  subject: string;
  headers: Record<string, string>;
  /** De-duplication id: one copy per (mailbox, message) however often the copy is retried. */
  msgId: string;
}

/** The header the broker checks a publish against: the stream the publisher expected. */
export const H_EXPECTED_STREAM = "Nats-Expected-Stream";

/**
 * Whether a header is one the broker acts on at publish time (`Nats-Expected-Stream`, the
 * other `Nats-Expected-*`, `Nats-Rollup`, `Nats-TTL`, batch, schedule and counter headers —
 * every `Nats-` header). Such a header on a copy makes the broker judge the copy by the
 * original's publish: the dead-letter stream refused every copy whose original expected
 * CREWLET_AGENT ("expected stream does not match"), and a replay would carry the DLQ's own.
 */
export function isPublishControlHeader(name: string): boolean {
  return name.toLowerCase().startsWith("nats-");
}

/**
 * The copy of `delivery` that goes to the dead-letter stream: the original's own headers
 * and ours, and none the broker would act on. The original's Nats-Msg-Id moves to
 * Crewlet-Original-Msg-Id: the DLQ's own de-duplication must be keyed on the (mailbox,
 * message) pair, not on the publisher's id.
 */
export function deadLetterCopy(stream: string, delivery: Delivery, group: string, reason: string): DeadLetterCopy {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(delivery.headers)) {
    if (k.toLowerCase() === H_MSG_ID.toLowerCase()) headers[H_ORIGINAL_MSG_ID] = v;
    else if (!isPublishControlHeader(k)) headers[k] = v;
  }
  headers[H_DLQ_SUBJECT] = delivery.subject;
  headers[H_DLQ_GROUP] = group;
  headers[H_DLQ_REASON] = reason.replace(/[\r\n]+/g, " ").slice(0, REASON_MAX_CHARS);
  headers[H_DLQ_DELIVERIES] = String(delivery.deliveryCount);
  headers[H_DLQ_STREAM_SEQ] = String(delivery.streamSeq);
  const key = `${stream}:${group}:${delivery.streamSeq}`;
  const digest = createHash("sha256").update(key).digest("hex").slice(0, 16);
  return { subject: dlqSubject(delivery.subject, group, digest), headers, msgId: key };
}

const DeadLetterHeaders = z.object({
  [H_DLQ_SUBJECT]: z.string().min(1),
  [H_DLQ_GROUP]: z.string().min(1),
  [H_DLQ_REASON]: z.string(),
  [H_DLQ_DELIVERIES]: z.coerce.number().int().positive(),
});

/** Reads a stored dead letter back (`id`: its DLQ stream sequence); a message missing our headers is an error naming the field. */
export function parseDeadLetter(id: number, subject: string, headers: Record<string, string>, data: Uint8Array): DeadLetter {
  const parsed = DeadLetterHeaders.safeParse(headers);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`dead letter ${subject}: header ${String(issue?.path[0])}: ${issue?.message}`);
  }
  const h = parsed.data;
  const original: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (k.startsWith("Crewlet-Dlq-") || isPublishControlHeader(k)) continue;
    if (k === H_ORIGINAL_MSG_ID) original[H_MSG_ID] = v;
    else original[k] = v;
  }
  return {
    id,
    subject,
    originalSubject: h[H_DLQ_SUBJECT],
    group: h[H_DLQ_GROUP],
    reason: h[H_DLQ_REASON],
    headers: original,
    data,
    deliveryCount: h[H_DLQ_DELIVERIES],
  };
}

/** deadLetters() reads at most this many (the newest): a listing is for an operator's screen. */
export const DEAD_LETTER_LIST_MAX = 1_000;

/**
 * How a dead letter goes back to its mailbox: to its original subject, with its original
 * headers but none the broker acts on, under a message id of its own — the original's id
 * is likely still inside the mail stream's de-duplication window, which would swallow the
 * replay — derived from the dead letter, so replaying the same one twice is one message.
 */
export function replayOf(dl: DeadLetter): { subject: string; headers: Record<string, string>; msgId: string } {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(dl.headers)) if (!isPublishControlHeader(k)) headers[k] = v;
  const digest = createHash("sha256").update(`${dl.subject}:${dl.id}`).digest("hex").slice(0, 24);
  return { subject: currentMailboxSubject(dl.originalSubject), headers, msgId: `dlq-replay-${digest}` };
}

/**
 * A replay, the same on both backends: the dead letter republished (see replayOf), then
 * removed. Republished first, so a failure between the two leaves a copy to replay again,
 * which the replay's own message id keeps from arriving twice.
 */
export async function replayDeadLetterVia(
  q: { deadLetter(id: number): Promise<DeadLetter | null>; publish(subject: string, data: Uint8Array, opts: PublishOptions): Promise<PublishResult>; deleteDeadLetter(id: number): Promise<boolean> },
  id: number,
): Promise<PublishResult | null> {
  const dl = await q.deadLetter(id);
  if (!dl) return null;
  const r = replayOf(dl);
  const out = await q.publish(r.subject, dl.data, { msgId: r.msgId, headers: r.headers });
  await q.deleteDeadLetter(id);
  return out;
}
