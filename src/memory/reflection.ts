// Post-turn reflection (spec: "What the seat learns is learned where it is held"): the
// node that ran a turn puts a reflection_due wake on the seat's own reflection subject; the
// seat's holder runs one model call and keeps what it learned as diary notes and its note
// on the counterparty. Pure parts here: the wake's one schema, the prompt, the answer's
// parse. The dispatcher that runs the call is the agent engine's (src/agent/reflect.ts).
import { z } from "zod";
import { HandleSchema } from "../queue/topics.ts";
import { MAX_COUNTERPARTY_NOTE_BYTES, MAX_NOTE_BYTES, MAX_SUMMARY_BYTES, maxBytes, type CounterpartyRow, type DiaryRow } from "./records.ts";

/** Notes one reflection may add: a pass that "learned" more than this is summarising. */
export const MAX_REFLECTION_NOTES = 3;

export const ReflectionDue = z.strictObject({
  type: z.literal("reflection_due"),
  seat: HandleSchema,
  turn_id: z.string().min(1).max(200),
  work_key: z.string().max(200).nullable(),
  conversation: z.string().max(512),
  /** Who woke the turn: whose profile the reflection keeps current. */
  counterparty: z.string().min(1).max(200).nullable(),
  outcome: z.string().max(32),
  summary: z.string().refine(maxBytes(MAX_SUMMARY_BYTES), `is over ${MAX_SUMMARY_BYTES} bytes`),
  /** What woke the turn, in words (the first trigger's text, cut). */
  asked: z.string().refine(maxBytes(MAX_NOTE_BYTES), `is over ${MAX_NOTE_BYTES} bytes`),
  at: z.number().int().nonnegative(),
});
export type ReflectionDue = z.infer<typeof ReflectionDue>;

export function encodeReflectionDue(r: ReflectionDue): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(ReflectionDue.parse(r)));
}

export function decodeReflectionDue(data: Uint8Array): { ok: true; due: ReflectionDue } | { ok: false; error: string } {
  return decodeWake(ReflectionDue, data);
}

/** A wake on a seat's reflection subject, decoded by its one schema; the error names the field. */
export function decodeWake<T>(schema: z.ZodType<T>, data: Uint8Array): { ok: true; due: T } | { ok: false; error: string } {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(data));
  } catch (err) {
    return { ok: false, error: `not JSON: ${(err as Error).message}` };
  }
  const p = schema.safeParse(value);
  if (p.success) return { ok: true, due: p.data };
  const issue = p.error.issues[0];
  return { ok: false, error: `${issue?.path.join(".") || "(wake)"}: ${issue?.message ?? "invalid"}` };
}

/** The message id of a turn's reflection wake: a re-published wake is one wake. */
export const reflectionMsgId = (turn_id: string): string => `reflect-${turn_id}`;

/** The one model call's opening message. */
export function reflectionPrompt(due: ReflectionDue, diary: readonly DiaryRow[], cp: CounterpartyRow | null): string {
  const out: string[] = [];
  out.push("Reflect on the turn you just finished and keep what is worth remembering.");
  out.push(`You were asked by ${due.counterparty ?? "nobody in particular"}: ${due.asked}`);
  out.push(`Outcome: ${due.outcome}. What you did: ${due.summary || "(nothing said)"}`);
  if (due.work_key) out.push(`Work: ${due.work_key}`);
  if (cp) out.push(`Your current note about ${cp.counterparty}: ${cp.note || "(none)"}`);
  if (diary.length > 0) {
    out.push("Your newest diary notes (do not repeat them):");
    for (const d of diary) out.push(`- ${d.content.replace(/\s+/g, " ")}`);
  }
  out.push(
    `Answer in lines only: up to ${MAX_REFLECTION_NOTES} lines "diary: <a fact worth keeping>", and at most one line "about: <a short note on ${due.counterparty ?? "them"}>". Nothing new to keep: answer "nothing".`,
  );
  return out.join("\n");
}

export interface Reflection {
  notes: string[];
  counterparty_note: string | null;
}

/**
 * Reads the model's answer. Lines `diary: …` are notes, `about: …` the counterparty note;
 * an answer with neither (a model that ignored the format) is kept whole as one note,
 * unless it says "nothing". Each is cut to its row's byte limit on a character boundary.
 */
export function parseReflection(text: string): Reflection {
  const notes: string[] = [];
  let about: string | null = null;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim().replace(/^[-*]\s*/, "");
    const m = /^(diary|about)\s*:\s*(.+)$/i.exec(line);
    if (!m) continue;
    const body = m[2]!.trim();
    if (body === "") continue;
    if (m[1]!.toLowerCase() === "diary") {
      if (notes.length < MAX_REFLECTION_NOTES) notes.push(cutBytes(body, MAX_NOTE_BYTES));
    } else about = cutBytes(body, MAX_COUNTERPARTY_NOTE_BYTES);
  }
  const whole = text.trim();
  if (notes.length === 0 && about === null && whole !== "" && !/^nothing\b/i.test(whole)) notes.push(cutBytes(whole.replace(/\s+/g, " "), MAX_NOTE_BYTES));
  return { notes, counterparty_note: about };
}

export function cutBytes(s: string, limit: number): string {
  if (Buffer.byteLength(s, "utf8") <= limit) return s;
  let out = "";
  let used = 0;
  for (const ch of s) {
    const b = Buffer.byteLength(ch, "utf8");
    if (used + b > limit) break;
    out += ch;
    used += b;
  }
  return out;
}
