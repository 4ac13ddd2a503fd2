// A turn's transcript: what a person reads to see what an agent did — the trigger, each
// round (what was sent, in summary; the model's text; each tool call with its input and
// output; tokens, cost and time), the outcome and error. ONE zod schema; the store decodes
// every transcript against it before it writes (transcripts.ts), and the holder's read
// answer carries exactly this shape.
//
// Bounded twice: each text is cut at its own limit, and the whole transcript spends one
// byte budget (TRANSCRIPT_MAX_BYTES) — a 24-round turn calling 16 tools a round would
// otherwise be megabytes, and a transcript travels in one request/reply answer when it is
// read through the holder (NATS' default max_payload is 1 MiB).
import { z } from "zod";
import type { ChatMessage, ToolCall, Usage } from "./providers/contract.ts";

/** The whole transcript's text budget: half of NATS' 1 MiB payload, leaving room for JSON. */
export const TRANSCRIPT_MAX_BYTES = 512 * 1024;
/** One tool input or output kept: enough to read a work item or a page; the model saw up to
 * 16,000 characters (turn.ts MAX_TOOL_RESULT_CHARS), the transcript keeps the first 8 KiB. */
export const TRANSCRIPT_TOOL_TEXT_MAX = 8 * 1024;
/** The model's text of one round, and the opening message the turn sent. */
export const TRANSCRIPT_TEXT_MAX = 16 * 1024;
/** Once the budget is spent, each further text keeps this much, so the shape stays readable. */
export const TRANSCRIPT_SPENT_TEXT_MAX = 200;
/** Rounds kept: turn.ts MAX_ROUNDS is 24; a larger configured cap still records its first 64. */
export const TRANSCRIPT_ROUNDS_MAX = 64;
/** Tool calls kept per round: turn.ts runs at most 16 (MAX_TOOL_CALLS_PER_ROUND), records 32. */
export const TRANSCRIPT_CALLS_PER_ROUND_MAX = 32;

const ms = z.number().int().nonnegative();
const count = z.number().int().nonnegative();
const cutText = (max: number) => z.string().max(max + 64);

/** Skills a transcript names: the prompt carries at most three (memory/skill-pick.ts); eight
 * leaves room should that bound grow, without an unbounded list. */
export const TRANSCRIPT_SKILLS_MAX = 8;

export const TranscriptSkill = z.strictObject({
  id: z.string().min(1).max(200),
  name: z.string().max(200),
  kind: z.enum(["learned", "tool"]),
});
export type TranscriptSkill = z.infer<typeof TranscriptSkill>;

export const TranscriptUsage = z.strictObject({ input_tokens: count, output_tokens: count });

export const TranscriptToolCall = z.strictObject({
  id: z.string().max(200),
  name: z.string().min(1).max(200),
  /** The arguments as the model sent them (JSON text), cut. */
  input: cutText(TRANSCRIPT_TOOL_TEXT_MAX),
  /** What the tool answered (what the model heard), cut. */
  output: cutText(TRANSCRIPT_TOOL_TEXT_MAX),
  is_error: z.boolean(),
  /** The call wrote outside the engine (the estate, a webhook…). */
  reached: z.boolean(),
  duration_ms: ms,
});
export type TranscriptToolCall = z.infer<typeof TranscriptToolCall>;

export const TranscriptRound = z.strictObject({
  n: z.number().int().min(1),
  started_at: ms,
  /** The model call's time (its retries included). */
  model_ms: ms,
  /** The round as a whole: the model call and its tools. */
  duration_ms: ms,
  /** What this round sent the model, in summary: messages and characters. */
  sent: z.strictObject({ messages: count, chars: count }),
  text: cutText(TRANSCRIPT_TEXT_MAX),
  usage: TranscriptUsage,
  /** Micro-units of the provider's currency; null when the model has no pricing. */
  cost_micros: count.nullable(),
  tool_calls: z.array(TranscriptToolCall).max(TRANSCRIPT_CALLS_PER_ROUND_MAX),
});
export type TranscriptRound = z.infer<typeof TranscriptRound>;

export const TurnTranscript = z.strictObject({
  /** The turn id. */
  id: z.string().min(1).max(200),
  handle: z.string().min(1).max(64),
  node: z.string().min(1).max(64),
  epoch: count,
  provider: z.string().max(200).nullable(),
  model: z.string().max(200).nullable(),
  trigger: z.strictObject({
    type: z.string().max(64),
    from: z.string().max(200),
    conversation: z.string().max(600),
    /** What woke the turn, as its trigger said it (cut). */
    text: cutText(TRANSCRIPT_TOOL_TEXT_MAX),
    /** Triggers the turn ran on (one drain's partition may hold several). */
    count: count,
  }),
  /** The first message the turn sent (the trigger in context, with recalled memory), cut. */
  opening: cutText(TRANSCRIPT_TEXT_MAX),
  system_chars: count,
  /** The skills the turn's prompt carried (none: an empty list; a transcript kept before
   *  skills existed reads as none). */
  skills: z.array(TranscriptSkill).max(TRANSCRIPT_SKILLS_MAX).default([]),
  started_at: ms,
  ended_at: ms,
  duration_ms: ms,
  /** completed | failed | retry | … (classify.ts), and how the turn ended. */
  outcome: z.string().min(1).max(64),
  end: z.string().max(64),
  error: z.string().max(4096).nullable(),
  usage: TranscriptUsage,
  cost_micros: count.nullable(),
  rounds: z.array(TranscriptRound).max(TRANSCRIPT_ROUNDS_MAX),
  /** Some text was cut to the spent-budget length (TRANSCRIPT_MAX_BYTES). */
  truncated: z.boolean(),
});
export type TurnTranscript = z.infer<typeof TurnTranscript>;

/** A transcript's line in a list: everything but the rounds. */
export type TranscriptSummary = Omit<TurnTranscript, "rounds" | "opening"> & { rounds: number; tool_calls: number };

export function summarize(t: TurnTranscript): TranscriptSummary {
  const { rounds, opening: _opening, ...rest } = t;
  return { ...rest, rounds: rounds.length, tool_calls: rounds.reduce((n, r) => n + r.tool_calls.length, 0) };
}

/** Decodes a transcript or throws naming the field: the store's guard on every write. */
export function mustDecodeTranscript(value: unknown): TurnTranscript {
  const parsed = TurnTranscript.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new Error(`turn transcript invalid: ${issue?.path.join(".") || "(transcript)"}: ${issue?.message ?? "invalid"}`);
}

function cutTo(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max)}…(cut at ${max} characters)`;
}

/**
 * Gathers a turn's transcript while it runs (pure: the turn engine passes the times in).
 * Texts are cut at their limits and charged to one budget; once it is spent, each further
 * text keeps TRANSCRIPT_SPENT_TEXT_MAX characters and the transcript says it was cut.
 */
export class TranscriptRecorder {
  private budget = TRANSCRIPT_MAX_BYTES;
  private truncated = false;
  private readonly rounds: TranscriptRound[] = [];
  private opening = "";
  private system_chars = 0;
  private skills: TranscriptSkill[] = [];

  constructor(
    private readonly head: Pick<TurnTranscript, "id" | "handle" | "node" | "epoch" | "provider" | "model" | "trigger" | "started_at">,
  ) {
    const t = head.trigger;
    this.head = { ...head, trigger: { ...t, type: t.type.slice(0, 64), from: t.from.slice(0, 200), conversation: t.conversation.slice(0, 600), text: this.keep(t.text, TRANSCRIPT_TOOL_TEXT_MAX) } };
  }

  private keep(s: string, max: number): string {
    const room = Math.min(max, Math.max(this.budget, TRANSCRIPT_SPENT_TEXT_MAX));
    const kept = cutTo(s, room);
    if (kept.length < s.length && room < max) this.truncated = true;
    this.budget -= Math.min(s.length, room);
    return kept;
  }

  /** The turn's opening: the system prompt's size and the first message. */
  opened(system: string, first: string): void {
    this.system_chars = system.length;
    this.opening = this.keep(first, TRANSCRIPT_TEXT_MAX);
  }

  /** The skills the turn's prompt carried. */
  skillsUsed(skills: readonly TranscriptSkill[]): void {
    this.skills = skills.slice(0, TRANSCRIPT_SKILLS_MAX).map((k) => ({ id: k.id.slice(0, 200), name: k.name.slice(0, 200), kind: k.kind }));
  }

  /** A model round answered: what was sent (summary), the text and the usage. */
  round(r: { n: number; started_at: number; model_ms: number; sent: readonly ChatMessage[]; text: string; usage: Usage; cost_micros: number | null }): void {
    if (this.rounds.length >= TRANSCRIPT_ROUNDS_MAX) {
      this.truncated = true;
      return;
    }
    const chars = r.sent.reduce((n, m) => n + m.content.length + (m.role === "assistant" ? m.tool_calls.reduce((k, c) => k + c.raw_arguments.length, 0) : 0), 0);
    this.rounds.push({
      n: r.n,
      started_at: r.started_at,
      model_ms: r.model_ms,
      duration_ms: r.model_ms,
      sent: { messages: r.sent.length, chars },
      text: this.keep(r.text, TRANSCRIPT_TEXT_MAX),
      usage: { input_tokens: r.usage.input_tokens, output_tokens: r.usage.output_tokens },
      cost_micros: r.cost_micros,
      tool_calls: [],
    });
  }

  /** A tool call of the current round, with what it answered. */
  toolCalled(call: ToolCall, output: string, is_error: boolean, reached: boolean, duration_ms: number): void {
    const round = this.rounds[this.rounds.length - 1];
    if (!round) return;
    if (round.tool_calls.length >= TRANSCRIPT_CALLS_PER_ROUND_MAX) {
      this.truncated = true;
      return;
    }
    round.tool_calls.push({
      id: call.id.slice(0, 200),
      name: call.name.slice(0, 200) || "(unnamed)",
      input: this.keep(call.arguments === null ? call.raw_arguments : JSON.stringify(call.arguments, null, 2), TRANSCRIPT_TOOL_TEXT_MAX),
      output: this.keep(output, TRANSCRIPT_TOOL_TEXT_MAX),
      is_error,
      reached,
      duration_ms: Math.max(0, duration_ms),
    });
  }

  /** The current round's end (its tools ran): its whole duration. */
  roundEnded(at: number): void {
    const round = this.rounds[this.rounds.length - 1];
    if (round) round.duration_ms = Math.max(round.model_ms, at - round.started_at);
  }

  /** The finished transcript, decoded against the schema. */
  finish(end: { ended_at: number; outcome: string; end: string; error: string | null; usage: Usage }): TurnTranscript {
    const priced = this.rounds.map((r) => r.cost_micros).filter((c): c is number => c !== null);
    return mustDecodeTranscript({
      ...this.head,
      opening: this.opening,
      system_chars: this.system_chars,
      skills: this.skills,
      ended_at: end.ended_at,
      duration_ms: Math.max(0, end.ended_at - this.head.started_at),
      outcome: end.outcome.slice(0, 64),
      end: end.end.slice(0, 64),
      error: end.error === null ? null : cutTo(end.error, 4000),
      usage: { input_tokens: end.usage.input_tokens, output_tokens: end.usage.output_tokens },
      // Null when no round was priced (a model without pricing reads in tokens only).
      cost_micros: priced.length > 0 ? priced.reduce((a, c) => a + c, 0) : null,
      rounds: this.rounds,
      truncated: this.truncated,
    });
  }
}
