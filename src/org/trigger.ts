// A trigger: what lands in a seat's inbox (`crewlet.seats.{shard}.{handle}.inbox`) and wakes its
// agent. The estate's wake feeds publish them; webhooks, schedules and colleagues will too.
// The agent engine parses every delivery with triggerSchema: a bad one names its field.
import { z } from "zod";

export const TRIGGER_TYPES = [
  /** A work item was assigned to the seat. */
  "task_assigned",
  /** Somebody else commented on a work item the seat is assigned. */
  "task_comment",
  /** A chat message mentioned @seat. */
  "chat_mention",
  /** A chat message in a DM the seat is part of. */
  "chat_direct",
  /** Something outside the company: a webhook, an inbound e-mail. */
  "external_notification",
  /** A colleague asks the seat for something and waits for the answer. */
  "a2a_request",
  /** A colleague tells the seat something; no answer is owed. */
  "a2a_message",
  /** A schedule fired. */
  "schedule",
  /** A coding run the seat started has a result (src/sandbox/seat-runs.ts). */
  "sandbox_run",
  /** A person decided a call the seat parked for approval (src/approvals/). */
  "approval_decided",
] as const;

/** Triggers told in a chat thread when their refs name one (a reply goes there). */
export const CHAT_TOLD_TYPES: ReadonlySet<TriggerType> = new Set<TriggerType>(["chat_mention", "chat_direct", "sandbox_run", "approval_decided"]);
/** Triggers told on a work item when their refs name one. */
export const WORK_TOLD_TYPES: ReadonlySet<TriggerType> = new Set<TriggerType>(["task_assigned", "task_comment", "sandbox_run", "approval_decided"]);
export type TriggerType = (typeof TRIGGER_TYPES)[number];

/** What a trigger points at in the estate, so the agent can read the rest itself. */
export const triggerRefsSchema = z.strictObject({
  channel: z.string().min(1).optional(),
  message_id: z.string().min(1).optional(),
  work_key: z.string().min(1).optional(),
  comment_id: z.string().min(1).optional(),
  /** The thread a reply goes into when the trigger's cause is not a message in it (a
   *  coding run's result, told where the work was asked for). */
  thread_root: z.string().min(1).optional(),
  /** The state-log position of the record that caused it, when one did. */
  position: z.number().int().min(0).optional(),
});

/**
 * A trigger's text is a summary plus the words that caused it; the agent reads anything
 * longer from the estate through refs. 32 KiB matches the largest chat message.
 */
export const MAX_TRIGGER_TEXT_BYTES = 32 * 1024;

export const triggerSchema = z.strictObject({
  type: z.enum(TRIGGER_TYPES),
  /** Unique per (cause, seat): also the inbox message id, so a redelivered cause wakes nobody twice. */
  event_id: z.string().min(1).max(256).regex(/^[A-Za-z0-9_\-.:]+$/, "event ids are letters, digits and _ - . :"),
  /** The seat handle whose inbox this is. */
  seat: z.string().regex(/^[a-z0-9][a-z0-9_\-]{0,47}$/, "seat handles are lower-case letters, digits, _ and -"),
  /**
   * The conversation this continues: `chat:{channel}:{thread root}`, `work:{key}`,
   * `a2a:{exchange}`. Turns on one key share context; different keys do not.
   */
  conversation: z.string().min(1).max(512),
  /** Who caused it (a seat handle, a person, `token:{id}`, an integration). */
  from: z.string().min(1).max(128),
  text: z.string().refine((s) => Buffer.byteLength(s, "utf8") <= MAX_TRIGGER_TEXT_BYTES, `is over ${MAX_TRIGGER_TEXT_BYTES} bytes`),
  refs: triggerRefsSchema,
  /** Clock ms of the cause (the record's time), not of the publish. */
  created_at: z.number().int().min(0),
});

export type Trigger = z.output<typeof triggerSchema>;

export function encodeTrigger(t: Trigger): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(triggerSchema.parse(t)));
}

export type DecodedTrigger = { ok: true; trigger: Trigger } | { ok: false; error: string };

export function decodeTrigger(data: Uint8Array): DecodedTrigger {
  let raw: unknown;
  try {
    raw = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(data));
  } catch (err) {
    return { ok: false, error: `not JSON: ${(err as Error).message}` };
  }
  const parsed = triggerSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, error: `${issue?.path.join(".") || "trigger"}: ${issue?.message ?? "invalid"}` };
  }
  return { ok: true, trigger: parsed.data };
}

/**
 * The estate positions a reader of these triggers' causes must see: each cause is at
 * refs.position on its domain's log, and the reader's copy may lag the writer's. A read at
 * this floor waits for its applier instead of missing the message that woke it.
 */
export function causeFloor(...triggers: Trigger[]): { chat?: number; tracker?: number } {
  const floor: { chat?: number; tracker?: number } = {};
  for (const t of triggers) {
    const p = t.refs.position;
    const domain = p === undefined ? null : t.refs.channel !== undefined ? "chat" : t.refs.work_key !== undefined ? "tracker" : null;
    if (domain !== null) floor[domain] = Math.max(floor[domain] ?? 0, p!);
  }
  return floor;
}
