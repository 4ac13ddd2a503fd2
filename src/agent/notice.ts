// A turn that ends without answering a person tells them so, in their thread, as the seat,
// in words an operator can act on — never the endpoint's raw body, never a secret
// (ARCHITECTURE.md § "failures that reach people": silence is a defect). One notice per
// message: the completion ledger keeps a `notice.` key, so a redelivery does not post it
// twice. Wording is pure (causeOf, noticeText, table-tested); Notifier does the I/O.
//
// This is THE path for "a turn ending with a reason told to the person": a refusal for
// spend, a pause or a stop (later issues) builds its own cause words and calls
// Notifier.tell the same way.
import { MAX_MESSAGE_BYTES, MAX_WORK_BODY_BYTES, truncateToBytes } from "../estate/records.ts";
import { automaticOpId } from "../estate/wakes.ts";
import { EstateInvalid, EstateUnavailable } from "../estate/router.ts";
import type { Logger } from "../log.ts";
import { CHAT_TOLD_TYPES, WORK_TOLD_TYPES, type Trigger } from "../org/trigger.ts";
import type { CompletionLedger } from "./ledger.ts";
import type { EventSink } from "./events.ts";
import { ProviderError } from "./providers/contract.ts";
import { writeResult } from "./tools/builtins.ts";
import type { EstatePort } from "./tools/estate-port.ts";

/**
 * The first characters of every notice. The dashboard marks a message whose thread holds a
 * reply starting with it as failed (src/api/dashboard), and a reader scanning a thread sees
 * at once that this reply is the engine speaking about a failure, not an answer.
 */
export const NOTICE_PREFIX = "⚠ ";
/** A notice is a chat line, not a report: the tool list it names is cut to this many. */
const DONE_LIST_MAX = 8;

/** Why the turn ended, as facts the words are built from (no raw bodies). */
export type TurnStop =
  | { kind: "error"; error: unknown }
  | { kind: "no_provider"; llm: string | null }
  | { kind: "fenced" }
  | { kind: "cancelled" }
  | { kind: "panicked" }
  /** A reason a later policy gives (spend cap, pause): already operator words. */
  | { kind: "refused"; words: string };

/** What broke, in words an operator can act on. Pure. */
export function causeOf(stop: TurnStop): string {
  switch (stop.kind) {
    case "no_provider":
      return `I have no model configured (llm ${stop.llm ?? "unset"}) — set llm on my role or default_llm in the company file`;
    case "fenced":
      return "my seat moved to another node while I was working";
    case "cancelled":
      return "this node was stopping and I could not finish in time";
    case "panicked":
      return "I hit an internal error (an engine defect, logged as turn_phase_panicked)";
    case "refused":
      return stop.words;
    case "error":
      break;
  }
  const err = stop.error;
  if (err instanceof EstateUnavailable) return "I could not reach the company's records (no data node answered) — check that the data nodes are up";
  if (err instanceof EstateInvalid) return "the company's records refused what I read or wrote (logged) — check the node's log";
  if (!(err instanceof ProviderError)) return "my turn failed (logged as turn_completed with its error)";
  const cfg = `providers.llm.${err.provider}`;
  if (err.failure === "context_too_long") return `this conversation no longer fits my model's context window — start a new thread, or point ${cfg}.model at a model with a larger context`;
  switch (err.kind) {
    case "config":
      return `my model provider is misconfigured — check ${cfg}`;
    case "bad_response":
      return `my model endpoint answered with something that is not the model API — check ${cfg}.base_url and ${cfg}.type`;
    case "timeout":
      return `my model endpoint did not answer in time (${err.attempts} ${err.attempts === 1 ? "try" : "tries"}) — check that ${cfg}.base_url is up and not overloaded`;
    case "network":
      return `I could not connect to my model endpoint — check ${cfg}.base_url and that the server is running`;
    case "aborted":
      return "my model call was cancelled";
    case "cooling":
      return `every API key of my model endpoint is resting after rate limits (429) — check the quota of ${cfg}.api_keys, or add a key or a fallback`;
    case "http":
      break;
  }
  const s = err.status ?? 0;
  if (s === 401) return `my model endpoint refused the API key (401) — check ${cfg}.api_keys`;
  if (s === 403) return `my model endpoint refused this key access (403) — check the key's permissions and ${cfg}.model`;
  if (s === 404) return `my model endpoint answered 404 Not Found — check ${cfg}.base_url and ${cfg}.model`;
  if (s === 400) return `my model endpoint rejected the request as invalid (400) — check that ${cfg}.model supports tool calls`;
  if (s === 429) return `my model endpoint kept rate-limiting me (429) — check the quota of ${cfg}.api_keys, or add a key or a fallback`;
  if (s >= 500) return `my model endpoint kept failing (HTTP ${s}) — check that ${cfg}.base_url is healthy, or configure a fallback`;
  return `my model endpoint refused the request (HTTP ${s}) — check ${cfg}`;
}

export interface NoticeFacts {
  stop: TurnStop;
  /** Tool calls that reached outside before the stop (names, in order). */
  done: readonly string[];
  /** Deliveries spent on this message when it was given up (transient failures). */
  deliveries?: number;
}

/** The notice as the person reads it. Pure. */
export function noticeText(f: NoticeFacts): string {
  const cause = causeOf(f.stop);
  const tries = f.deliveries !== undefined && f.deliveries > 1 ? ` (I tried ${f.deliveries} times)` : "";
  if (f.done.length === 0) return `${NOTICE_PREFIX}I could not answer this: ${cause}${tries}.`;
  const counts = new Map<string, number>();
  for (const d of f.done) counts.set(d, (counts.get(d) ?? 0) + 1);
  const listed = [...counts.entries()].slice(0, DONE_LIST_MAX).map(([n, c]) => (c > 1 ? `${n} ×${c}` : n));
  const more = counts.size > DONE_LIST_MAX ? `, and ${counts.size - DONE_LIST_MAX} more` : "";
  return `${NOTICE_PREFIX}I stopped before finishing: ${cause}${tries}. Before stopping I had already run ${listed.join(", ")}${more}. I will not repeat that on my own — check it, then ask me again to continue.`;
}

/** Trigger types that come from a person and have a thread to answer in. */

export type TellOutcome = "posted" | "already_told" | "no_thread" | "failed";

export interface NotifierOptions {
  estate: EstatePort;
  ledger: CompletionLedger | null;
  log: Logger;
  events: EventSink;
  node_id: string;
}

export class Notifier {
  constructor(private readonly o: NotifierOptions) {}

  /**
   * Posts `text` once in the thread of the person the turn was answering (a chat mention
   * or DM: a reply in its thread; a task assignment or comment: a comment on the item),
   * as `seat`. Never throws: a notice that cannot be posted is logged (turn_notice_failed).
   */
  async tell(seat: string, turn_id: string, triggers: readonly Trigger[], text: string): Promise<TellOutcome> {
    const chat = [...triggers].reverse().find((t) => CHAT_TOLD_TYPES.has(t.type) && t.refs.channel !== undefined && (t.refs.message_id !== undefined || t.refs.thread_root !== undefined));
    const work = [...triggers].reverse().find((t) => WORK_TOLD_TYPES.has(t.type) && t.refs.work_key !== undefined);
    const target = chat ?? work;
    if (!target) {
      this.o.log.info("turn_notice_skipped", { seat, turn_id, reason: "no person's thread among the triggers", types: triggers.map((t) => t.type) });
      return "no_thread";
    }
    try {
      if (this.o.ledger && (await this.o.ledger.noticed(target.event_id))) {
        this.o.log.info("turn_notice_skipped", { seat, turn_id, event_id: target.event_id, reason: "already_told" });
        return "already_told";
      }
      // One notice per (seat, message answered), in a thread or on a task: a retry after a
      // lost answer is the same write (applied once), and it wakes no agent (wakes.ts).
      const op_id = automaticOpId("notice", `${seat}\n${target.event_id}`);
      let result;
      if (chat) {
        const m = chat.refs.message_id !== undefined ? await this.o.estate.read({ q: "chat.message", id: chat.refs.message_id }) : null;
        const root = chat.refs.thread_root ?? (m ? (m.thread_parent ?? m.id) : chat.refs.message_id!);
        result = await writeResult(
          () =>
            this.o.estate.write(
              "chat",
              { op: "chat.post", channel: chat.refs.channel!, author: seat, body: truncateToBytes(text, MAX_MESSAGE_BYTES), thread_parent: root, mentions: [], dm: null },
              { op_id },
            ),
          (o) => o,
        );
      } else {
        result = await writeResult(() => this.o.estate.write("tracker", { op: "work.comment", key: work!.refs.work_key!, author: seat, body: truncateToBytes(text, MAX_WORK_BODY_BYTES) }, { op_id }), (o) => o);
      }
      if (result.is_error && !result.reached) throw new Error(result.content);
      await this.o.ledger?.recordNotice({ seat, turn_id, node: this.o.node_id, event_id: target.event_id });
      this.o.events.emit("turn_failure_told", {
        seat,
        node: this.o.node_id,
        turn_id,
        event_id: target.event_id,
        channel: chat?.refs.channel ?? null,
        message_id: chat?.refs.message_id ?? null,
        work_key: work && !chat ? work.refs.work_key : null,
        text,
      });
      return "posted";
    } catch (err) {
      this.o.log.warn("turn_notice_failed", { seat, turn_id, event_id: target.event_id, error: (err as Error).message });
      return "failed";
    }
  }
}
