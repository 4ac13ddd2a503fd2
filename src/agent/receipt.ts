// A turn's receipt, built from its transcript by a pure function and written by the holder
// with op id = the turn id, so a retried write is the same write. The transcript stays on the
// holder; the receipt, a few hundred bytes, is on every copy, so any node reads any seat's day.
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import {
  channelId,
  MAX_ACTOR_BYTES,
  MAX_RECEIPT_ERROR_BYTES,
  MAX_RECEIPT_SUMMARY_BYTES,
  MAX_RECEIPT_TOOLS,
  MAX_TOOL_NAME_BYTES,
  opId,
  truncateToBytes,
  turnReceipt,
  workKey,
  type TurnReceipt,
} from "../estate/records.ts";
import { dayIn } from "../estate/turn-receipts.ts";
import { conversationTarget } from "./conversation-post.ts";
import type { Disposition } from "./classify.ts";
import type { EstatePort } from "./tools/estate-port.ts";
import type { TurnTranscript } from "./transcript.ts";

/** A receipt's cut text ends with this: a list line, so one character rather than a sentence. */
const CUT = "…";

// Every outcome the turn engine gives is a word the receipt's schema takes (checked here at
// compile time: a new outcome with a capital or a dot would fail this line, not a write).
type LowerWord<S extends string> = S extends `${string}${"." | " " | "-"}${string}` ? never : S extends Lowercase<S> ? S : never;
const _outcomesAreWords: LowerWord<Disposition["outcome"]> extends Disposition["outcome"] ? true : never = true;
void _outcomesAreWords;

const WORK_KEY_IN_JSON = /"key"\s*:\s*"([A-Z][A-Z0-9]{1,9}-[1-9][0-9]{0,9})"/;

/** What the turn engine knows of a finished turn beyond its transcript. */
export interface ReceiptFacts {
  /** Why it did not finish, in words an operator acts on (notice.ts causeOf); null when it did. */
  error_words: string | null;
  /** The work item that woke it, then those its tools named. */
  work_items: readonly string[];
}

/** Where a receipt links to: the thread of a chat conversation, the work item of a work one,
 *  else the first work item the turn named (`work_items`, or failing those, the first a
 *  work_* tool's input or output names). Only values the schema takes. Pure. */
export function receiptLinks(t: Pick<TurnTranscript, "trigger" | "rounds">, work_items?: readonly string[]): TurnReceipt["links"] {
  const target = conversationTarget(t.trigger.conversation);
  const links: TurnReceipt["links"] = { channel: null, thread_root: null, work_key: null };
  if (target?.kind === "chat" && channelId.safeParse(target.channel).success) {
    links.channel = target.channel;
    if (opId.safeParse(target.root).success) links.thread_root = target.root;
  }
  if (target?.kind === "work" && workKey.safeParse(target.key).success) links.work_key = target.key;
  if (links.work_key === null && work_items) links.work_key = work_items.find((k) => workKey.safeParse(k).success) ?? null;
  if (links.work_key === null && !work_items) {
    for (const call of t.rounds.flatMap((r) => r.tool_calls)) {
      if (!call.name.startsWith("work_")) continue;
      const m = WORK_KEY_IN_JSON.exec(call.output) ?? WORK_KEY_IN_JSON.exec(call.input);
      if (m && workKey.safeParse(m[1]).success) {
        links.work_key = m[1]!;
        break;
      }
    }
  }
  return links;
}

/** The tools a turn called, in order of first call, with calls and failures each. Pure. */
export function toolsCalled(t: Pick<TurnTranscript, "rounds">): TurnReceipt["tools"] {
  const out: TurnReceipt["tools"] = [];
  for (const call of t.rounds.flatMap((r) => r.tool_calls)) {
    const name = truncateToBytes(call.name, MAX_TOOL_NAME_BYTES, CUT);
    let row = out.find((x) => x.name === name);
    if (!row) {
      if (out.length >= MAX_RECEIPT_TOOLS) continue;
      row = { name, calls: 0, errors: 0 };
      out.push(row);
    }
    row.calls += 1;
    if (call.is_error) row.errors += 1;
  }
  return out;
}

/** The turn's final words: the last round's text that said anything. Pure. */
export function finalWords(t: Pick<TurnTranscript, "rounds">): string {
  for (let i = t.rounds.length - 1; i >= 0; i--) {
    const text = t.rounds[i]!.text.trim();
    if (text) return text;
  }
  return "";
}

const word = (s: string, fallback: string) => (/^[a-z][a-z0-9_]{0,63}$/.test(s) ? s : fallback);

/**
 * The receipt of a finished turn, from its transcript, what the engine knew of its end and
 * the company's time zone, decoded against the one schema (throws naming the field if it
 * would not be a record). The error is the engine's words when it gave them, else the
 * transcript's (the raw error stays in the transcript). Pure.
 */
export function buildReceipt(t: TurnTranscript, timezone: string, facts?: ReceiptFacts): TurnReceipt {
  const error = facts?.error_words ?? t.error;
  const parsed = turnReceipt.safeParse({
    op: "turn.receipt",
    seat: t.handle,
    turn_id: t.id,
    node: truncateToBytes(t.node, MAX_ACTOR_BYTES, CUT),
    day: dayIn(t.ended_at, timezone),
    started_at: t.started_at,
    ended_at: t.ended_at,
    duration_ms: t.duration_ms,
    trigger: {
      type: word(t.trigger.type, "unknown"),
      from: truncateToBytes(t.trigger.from || "unknown", MAX_ACTOR_BYTES, CUT),
      conversation: truncateToBytes(t.trigger.conversation || "unknown", 512, CUT),
      count: t.trigger.count,
    },
    summary: truncateToBytes(finalWords(t), MAX_RECEIPT_SUMMARY_BYTES, CUT),
    tools: toolsCalled(t),
    input_tokens: t.usage.input_tokens,
    output_tokens: t.usage.output_tokens,
    cost_micros: t.cost_micros,
    outcome: word(t.outcome, "unknown"),
    error: error === null ? null : truncateToBytes(error, MAX_RECEIPT_ERROR_BYTES, CUT),
    links: receiptLinks(t, facts?.work_items),
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`turn receipt invalid: ${issue?.path.join(".") || "(receipt)"}: ${issue?.message ?? "invalid"}`);
  }
  return parsed.data;
}

/**
 * Writes of one receipt before it is given up (each with the router's whole write budget,
 * the same op id every time): three ride out elections back to back, as a turn's reply does
 * (turn.ts REPLY_WRITE_ATTEMPTS). A receipt given up is logged; the transcript still has the turn.
 */
export const RECEIPT_WRITE_ATTEMPTS = 3;
/** The wait before another attempt after the estate could not be reached. */
export const RECEIPT_RETRY_MS = 2_000;

/** How long a stopping node waits for the receipts still being written: a write that is
 *  applied answers in milliseconds; one the store cannot take is logged as lost rather than
 *  holding the drain (the transcript on this node still has the turn). */
export const RECEIPT_STOP_WAIT_MS = 5_000;

/** Writes each finished turn's receipt through the estate router, off the turn's path. */
export class ReceiptWriter {
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly o: { estate: Pick<EstatePort, "write">; clock: Clock; log: Logger; timezone: () => string; attempts?: number; retry_ms?: number },
  ) {}

  /** Starts writing `t`'s receipt; never throws (a turn is never failed by its receipt). */
  keep(t: TurnTranscript, facts?: ReceiptFacts): void {
    let receipt: TurnReceipt;
    try {
      receipt = buildReceipt(t, this.o.timezone(), facts);
    } catch (err) {
      this.o.log.warn("turn_receipt_invalid", { seat: t.handle, turn_id: t.id, error: (err as Error).message });
      return;
    }
    const p = this.write(receipt).finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  /** Waits for the receipts being written (a stop, a test), at most `max_ms` when given. */
  async settled(clock?: Clock, max_ms?: number): Promise<void> {
    if (this.pending.size === 0) return;
    const all = Promise.all([...this.pending]).then(() => undefined);
    if (clock === undefined || max_ms === undefined) return all;
    const abort = new AbortController();
    await Promise.race([all, clock.sleep(max_ms, abort.signal).catch(() => undefined)]);
    abort.abort();
  }

  /** The write, tried up to `attempts` times under the turn id. */
  async write(receipt: TurnReceipt): Promise<void> {
    const attempts = this.o.attempts ?? RECEIPT_WRITE_ATTEMPTS;
    let last = "";
    for (let i = 1; i <= attempts; i++) {
      try {
        const out = await this.o.estate.write("tracker", receipt, { op_id: receipt.turn_id });
        if (out.status !== "unknown") return;
        last = out.error;
      } catch (err) {
        last = (err as Error).message;
        if ((err as Error).name === "EstateInvalid") break;
      }
      if (i < attempts) await this.o.clock.sleep(this.o.retry_ms ?? RECEIPT_RETRY_MS);
    }
    this.o.log.warn("turn_receipt_write_failed", { seat: receipt.seat, turn_id: receipt.turn_id, attempts, error: last });
  }
}
