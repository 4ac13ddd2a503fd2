// The turn engine: one turn = rounds of model call → tool calls for one seat on one
// conversation, with the spec's guarantees around it (Seat Ownership § "Fencing", "The
// completion ledger", "A turn that broke halfway", "Keying a write on the work"):
//   - the completion ledger is read first; recorded triggers are skipped;
//   - the seat fence is checked at the top of every round and before every tool call,
//     and a fenced turn stops (its delivery is deferred unless it already wrote outside);
//   - a chat mention obliges a reply in its thread, an a2a_request an answer;
//   - how a broken turn settles is decided by classify.ts from the turn's own record;
//   - the ledger is written after the effects shipped, and after the seat's memory rows (its
//     episode keyed on the work) are published (memory.ts).
import { createHash, randomUUID } from "node:crypto";
import type { Clock } from "../clock.ts";
import { CasConflict, StoreUnavailable } from "../coord/contract.ts";
import { EstateInvalid, EstateUnavailable } from "../estate/router.ts";
import { parseMentions } from "../estate/mentions.ts";
import { automaticOpId } from "../estate/wakes.ts";
import { MAX_MESSAGE_BYTES, truncateToBytes } from "../estate/records.ts";
import type { Message } from "../estate/queries.ts";
import type { Logger } from "../log.ts";
import type { Org, Seat } from "../org/org.ts";
import { routeFor } from "../org/routing.ts";
import { causeFloor, CHAT_TOLD_TYPES, encodeTrigger, type Trigger } from "../org/trigger.ts";
import { DEFAULT_REDELIVERY, dispose, redeliveryDelayMs, type Disposition, type RedeliveryPolicy, type Settle, type TurnEndKind } from "./classify.ts";
import type { EventSink } from "./events.ts";
import { callModel } from "./model-call.ts";
import type { TurnMemoryFacts, TurnMemoryPort } from "./memory.ts";
import { workKeyOf, type CompletionLedger, type LedgerHit, type OwedReply } from "./ledger.ts";
import { causeOf, noticeText, Notifier, type TurnStop } from "./notice.ts";
import type { FailureClass } from "./providers/failure.ts";
import { systemPrompt, turnMessage, waitingMessages, type TurnContextData } from "./prompt.ts";
import { ProviderError, type ChatMessage, type Provider, type RetrySpend, type ToolCall, type TurnFacts, type Usage } from "./providers/contract.ts";
import { builtinTools, writeResult, type ChatPostedFact } from "./tools/builtins.ts";
import { reachesOutside, toolSpec, type Tool, type ToolContext, type ToolResult } from "./tools/contract.ts";
import type { EstatePort, PublishPort } from "./tools/estate-port.ts";
import { TranscriptRecorder, type TurnTranscript } from "./transcript.ts";
import type { ReceiptFacts } from "./receipt.ts";

/** Rounds per turn (model call → tool calls). Enough for a multi-step plan; a model still
 * calling tools after 24 rounds is looping, and every round is a bill. */
export const MAX_ROUNDS = 24;
/** Tool calls one model answer may ask for; more are answered with an error, not run. */
export const MAX_TOOL_CALLS_PER_ROUND = 16;
/** A tool result longer than this is cut: it is context the model pays for every round. */
export const MAX_TOOL_RESULT_CHARS = 16_000;
/** Thread messages a turn's context shows (newest), and how many it walks to find them. */
export const THREAD_CONTEXT_MESSAGES = 50;
export const THREAD_SCAN_MAX = 2_000;
/** Comments a work item's context shows (newest). */
export const WORK_CONTEXT_COMMENTS = 30;
const PAGE = 500;

/**
 * Live text of a streaming turn (turn_text events): the deltas are gathered and published
 * at most this often, so a fast model is a handful of events a second, not one per token.
 */
export const TEXT_EVENT_EVERY_MS = 250;
/** …and at most this many per turn; past it the live view waits for turn_completed. A
 * 24-round turn streaming for minutes stays a bounded burst on the events stream. */
export const TEXT_EVENTS_PER_TURN_MAX = 200;
/** Characters one turn_text event carries at most (the rest waits for the next). */
export const TEXT_EVENT_CHARS_MAX = 2_000;

/**
 * A reply whose write answered "unknown" is written again (the same op id, so never twice)
 * this many times in all before the turn settles with it uncertain. Each attempt has the
 * router's whole write budget; three ride out elections back to back on a loaded box.
 */
export const REPLY_WRITE_ATTEMPTS = 3;

export interface TurnEngineOptions {
  org: () => Org;
  node_id: string;
  clock: Clock;
  log: Logger;
  estate: EstatePort;
  queue: PublishPort;
  /** The seat's model provider (by its llm key), or undefined when none is configured. */
  providerFor: (seat: Seat) => Provider | undefined;
  /** The seat's MCP tools (its children's), offered beside the built-ins. */
  mcpTools?: (handle: string) => readonly Tool[];
  /** Tools the node adds for a seat (the integrations' outbound tools). */
  extraTools?: (handle: string) => readonly Tool[];
  /** Says a turn's final words where a wake from outside came from (src/integrations). */
  answerBack?: AnswerBack;
  /** Null: no ledger (a test, or coordination without the slot) — every trigger runs. */
  ledger: CompletionLedger | null;
  /** The seat's memory (src/memory): recall, memory tools, rows written at the turn's end. */
  memory?: TurnMemoryPort | null;
  events: EventSink;
  max_rounds?: number;
  /** How failed deliveries back off and when they are given up (classify.ts defaults). */
  redelivery?: RedeliveryPolicy;
  /** Spend control (src/spend): asked before every model call, told every round's usage. */
  spend?: SpendGate | null;
  /** Where each turn's transcript is kept (node.db, src/agent/transcripts.ts); null: not kept. */
  transcripts?: TranscriptSink | null;
  /** Replies that answer a parked coding run (src/sandbox/seat-runs.ts): each is handed to
   *  its run under this turn's grant and recorded in the ledger instead of running a turn. */
  runAnswers?: RunAnswers | null;
  /** Calls a rule says need a person's yes (src/approvals): parked instead of run, and
   *  resumed by a decision's trigger under this turn's grant. */
  approvals?: ApprovalPort | null;
}

/** A tool call as the approval rules judge it, and what its request records. */
export interface ParkRequest {
  seat: string;
  epoch: number;
  turn_id: string;
  /** The triggers the turn runs for: with the call, its request's identity. */
  trigger_ids: readonly string[];
  conversation: string;
  from: string;
  tool: string;
  source: "builtin" | "mcp";
  readOnly: boolean;
  args: Record<string, unknown>;
  /** The model's words in the round that made the call. */
  summary: string;
  /** What the turn has spent so far in pricing's currency (null: unpriced). */
  spent: number | null;
}

/** What the turn engine asks of approvals. */
export interface ApprovalPort {
  /** Null: run the call. Otherwise it parked, and this is what the model reads instead. */
  intercept(p: ParkRequest): Promise<ToolResult | null>;
  /** The batch with each decided request's words; an approved call is run (once) by `run`. */
  resume(seat: string, epoch: number, triggers: Trigger[], run: (tool: string, args: Record<string, unknown>) => Promise<ToolResult>): Promise<Trigger[]>;
}

/** What the turn engine asks of the seat's coding runs. */
export interface RunAnswers {
  takeAnswers(seat: string, epoch: number, triggers: readonly Trigger[]): Promise<{ event_id: string; run: string }[]>;
}

/** What the turn engine gives a turn's transcript to, and asks to price its rounds. */
export interface TranscriptSink {
  /** `facts`: what the turn knows beyond its transcript (its receipt's words and work items). */
  keep(t: TurnTranscript, facts?: ReceiptFacts): void;
  /** A round's cost in micros, null when the provider has no pricing. */
  costOf(provider: string, usage: Usage): number | null;
  modelOf(llm: string): string | null;
}

/** What the turn engine asks of spend control (src/spend/gate.ts implements it). */
export interface SpendGate {
  /** Before a model call: the words to refuse it with (a hard cap reached), `unknown` words
   *  when the spend cannot be read (the call is not made; the turn fails transiently), or null. */
  check(seat: string, provider: string): Promise<string | { unknown: string } | null>;
  /** After a model round: the provider's reported usage, charged to the seat's counters. */
  charge(seat: string, provider: string, usage: Usage): Promise<void>;
}

/** What answerBack is given and answers (src/integrations/tools.ts implements it). */
export type AnswerBack = (req: {
  seat: string;
  turn_id: string;
  triggers: readonly Trigger[];
  text: string;
  fence: () => boolean;
}) => Promise<{ fenced: true } | { fenced: false; reached: boolean; error: string | null; retryable: boolean } | null>;

export interface TurnRequest {
  seat: string;
  epoch: number;
  /** False once the seat's grant here is not `epoch` (seat.Host.Fence). */
  fence: () => boolean;
  /** The partition's triggers, one conversation, oldest first. */
  triggers: readonly Trigger[];
  /** The seat host stopped waiting (a drain): the turn is cancelled at its next await. */
  signal?: AbortSignal;
  /** The highest delivery count among the turn's deliveries (1: first delivery). */
  delivery_count?: number;
}

export interface TurnReport {
  turn_id: string | null;
  settle: Settle;
  outcome: Disposition["outcome"] | "skipped";
  rounds: number;
  tool_calls: number;
  usage: Usage;
  reached_outside: boolean;
  /** Event ids the ledger said were done (dropped). */
  skipped: string[];
  /** Event ids this turn ran on. */
  ran: string[];
  final_text: string;
  error: string | null;
  /** A nak's delay (a failed delivery backing off), when settle is nak. */
  delay_ms?: number;
  /** Why, when settle is reject (the dead letter's reason). */
  reason?: string;
}

export interface SeatTurnStatus {
  busy: boolean;
  turns: number;
  last_turn_at: number | null;
  last_outcome: string | null;
  /** The last failed turn's error, redacted of every configured secret. */
  last_error: string | null;
  /** When that error happened (ms). */
  last_error_at: number | null;
  input_tokens: number;
  output_tokens: number;
}

class Fenced extends Error {
  constructor() {
    super("the seat fence failed: the seat moved");
    this.name = "Fenced";
  }
}

/** An expected failure; `failure` says whether retrying it may succeed. */
class Broken extends Error {
  constructor(
    message: string,
    readonly failure: FailureClass | null = null,
    readonly stop: TurnStop | null = null,
  ) {
    super(message);
    this.name = "Broken";
  }
}

/** A turn ended by policy, not failure: a spend cap reached, or a person's stop. */
class Refused extends Error {
  constructor(
    readonly end: "budget_exhausted" | "stopped",
    readonly words: string,
  ) {
    super(words);
    this.name = "Refused";
  }
}

interface RunState {
  turn_id: string;
  seat: string;
  /** Who stopped this turn (POST /agents/{handle}/stop), seen at its next fence check. */
  stopped_by?: string;
  rounds: number;
  tool_calls: number;
  usage: Usage;
  reached_outside: boolean;
  posts: ChatPostedFact[];
  final_text: string;
  /** The model was still calling tools when the round cap ended the turn. */
  limit_hit: boolean;
  /** Work items the turn's tools named (its episode lists them). */
  work_items?: Set<string>;
  /** Tool calls that reached outside, by name, in order (what a notice says was done). */
  outside: string[];
  /** Failed model calls and their waits, against the provider's per-turn budget. */
  retry: RetrySpend;
  /** The turn's transcript as it runs (when transcripts are kept). */
  transcript?: TranscriptRecorder;
  /** The triggers it runs for (an approval request's identity). */
  trigger_ids?: readonly string[];
  /** Model spend so far in micro-units of pricing's currency; null: unpriced. */
  cost_micros?: number | null;
  /** The reply, when its write was not confirmed (keepObligations): recorded as owed. */
  owed_reply?: OwedReply;
}

/** Failures of what a turn depends on, not of the engine: a store that lost a race it kept
 *  retrying (CasConflict) is one, and comes back as a retry rather than a recorded defect. */
function isExpected(err: unknown): boolean {
  return err instanceof ProviderError || err instanceof EstateUnavailable || err instanceof EstateInvalid || err instanceof StoreUnavailable || err instanceof CasConflict;
}

export class TurnEngine {
  private readonly builtins: Tool[];
  private readonly running = new Map<string, RunState>();
  private readonly stats = new Map<string, SeatTurnStatus>();
  private readonly notifier: Notifier;

  constructor(private readonly o: TurnEngineOptions) {
    this.notifier = new Notifier({ estate: o.estate, ledger: o.ledger, log: o.log, events: o.events, node_id: o.node_id });
    this.builtins = builtinTools({
      org: o.org,
      estate: o.estate,
      queue: o.queue,
      clock: o.clock,
      onChatPosted: (ctx, fact) => this.running.get(ctx.turn_id)?.posts.push(fact),
    });
  }

  /**
   * A person's stop: every turn of `seat` running here ends at its next fence check (the
   * top of a round, before a tool call). Returns how many turns were marked.
   */
  stopSeat(seat: string, by: string): string[] {
    const marked: string[] = [];
    for (const st of this.running.values()) {
      if (st.seat === seat && st.stopped_by === undefined) {
        st.stopped_by = by;
        marked.push(st.turn_id);
      }
    }
    return marked;
  }

  /** What GET /agents shows for a seat run here. */
  status(handle: string): SeatTurnStatus {
    return { ...(this.stats.get(handle) ?? blankStatus()) };
  }

  toolsFor(handle: string): Tool[] {
    const mcp = this.o.mcpTools?.(handle) ?? [];
    const extra = this.o.extraTools?.(handle) ?? [];
    const builtin = [...this.builtins, ...(this.o.memory?.tools() ?? [])];
    const names = new Set(builtin.map((t) => t.name));
    const own = [...builtin, ...extra.filter((t) => !names.has(t.name))];
    for (const t of own) names.add(t.name);
    return [...own, ...mcp.filter((t) => !names.has(t.name))];
  }

  async run(req: TurnRequest): Promise<TurnReport> {
    const base = { rounds: 0, tool_calls: 0, usage: { input_tokens: 0, output_tokens: 0 }, reached_outside: false, final_text: "", error: null };
    const org = this.o.org();
    const seat = org.agentSeat(req.seat);
    const trigger_ids = req.triggers.map((t) => t.event_id);
    if (!seat) {
      // Routing is org-derived: a trigger for a seat the org does not have is nobody's.
      this.o.log.warn("turn_unknown_seat", { seat: req.seat, trigger_ids });
      return { ...base, turn_id: null, settle: "ack", outcome: "skipped", skipped: trigger_ids, ran: [] };
    }

    // The completion ledger, read before the turn. Fails open inside check().
    let toRun: Trigger[] = [...req.triggers];
    const skipped: string[] = [];
    if (this.o.ledger) {
      const check = await this.o.ledger.check(req.triggers);
      for (const s of check.skip) {
        skipped.push(s.trigger.event_id);
        this.o.events.emit("turn_trigger_skipped", {
          seat: req.seat,
          node: this.o.node_id,
          event_id: s.trigger.event_id,
          type: s.trigger.type,
          reason: s.hit.record?.as === "answered_in_thread" ? "answered_in_thread" : "already_completed",
          by_turn: s.hit.record?.turn_id ?? null,
          by_node: s.hit.record?.node ?? null,
        });
      }
      toRun = check.run;
      if (!(await this.tellOwed(req.seat, check.skip))) {
        const delay_ms = redeliveryDelayMs(req.delivery_count ?? 1, this.o.redelivery ?? DEFAULT_REDELIVERY);
        return { ...base, turn_id: null, settle: "nak", delay_ms, outcome: "skipped", skipped, ran: [] };
      }
    }
    if (toRun.length === 0) return { ...base, turn_id: null, settle: "ack", outcome: "skipped", skipped, ran: [] };
    toRun = await this.passAnswersOn(req, toRun, skipped);
    if (toRun.length === 0) return { ...base, turn_id: null, settle: "ack", outcome: "skipped", skipped, ran: [] };

    const provider = this.o.providerFor(seat);
    const state: RunState = {
      turn_id: randomUUID(),
      seat: seat.handle,
      ...base,
      usage: { input_tokens: 0, output_tokens: 0 },
      posts: [],
      limit_hit: false,
      outside: [],
      retry: { used_ms: 0 },
    };
    const work_key = workKeyOf(toRun);
    const ran = toRun.map((t) => t.event_id);
    state.trigger_ids = ran;
    const conversation = toRun[toRun.length - 1]!.conversation;
    if (this.o.transcripts) {
      const last = toRun[toRun.length - 1]!;
      state.transcript = new TranscriptRecorder({
        id: state.turn_id,
        handle: seat.handle,
        node: this.o.node_id,
        epoch: req.epoch,
        provider: provider?.name ?? null,
        model: seat.llm ? this.o.transcripts.modelOf(seat.llm) : null,
        trigger: { type: last.type, from: last.from, conversation, text: last.text, count: toRun.length },
        started_at: this.o.clock.now(),
      });
    }
    const stat = this.stats.get(seat.handle) ?? blankStatus();
    this.stats.set(seat.handle, stat);
    stat.busy = true;
    this.running.set(state.turn_id, state);
    this.o.events.emit("turn_started", {
      seat: seat.handle,
      node: this.o.node_id,
      epoch: req.epoch,
      turn_id: state.turn_id,
      trigger_ids: ran,
      conversation,
      // Who asked: the dashboard's sentences ("cto answered ana in #general").
      from: toRun[toRun.length - 1]!.from,
      work_key,
    });

    let end: TurnEndKind;
    let error: unknown = null;
    let failure: FailureClass | null = null;
    let stop: TurnStop | null = null;
    let answered: string[] = [];
    try {
      if (!provider) {
        throw new Broken(`seat ${seat.handle} has no model provider (llm ${seat.llm ?? "unset"})`, "permanent", { kind: "no_provider", llm: seat.llm ?? null });
      }
      answered = await this.converse(req, seat, provider, toRun, state);
      end = state.limit_hit ? "round_limit" : "completed";
    } catch (err) {
      error = err;
      if (req.signal?.aborted) {
        // Whatever the await threw on its way out, the host stopped waiting.
        end = "cancelled";
        failure = "cancelled";
        stop = { kind: "cancelled" };
      } else if (err instanceof Fenced) {
        end = "fenced";
        stop = { kind: "fenced" };
      } else if (err instanceof Refused) {
        end = err.end;
        stop = { kind: "refused", words: err.words };
      } else if (err instanceof Broken) {
        end = "broken";
        failure = err.failure;
        stop = err.stop ?? { kind: "error", error: err };
      } else if (isExpected(err)) {
        end = "broken";
        failure = err instanceof ProviderError ? err.failure : null;
        stop = { kind: "error", error: err };
      } else {
        end = "panicked";
        stop = { kind: "panicked" };
        this.o.log.error("turn_phase_panicked", { seat: seat.handle, turn_id: state.turn_id, error: err, stack: (err as Error)?.stack });
      }
    } finally {
      this.running.delete(state.turn_id);
    }

    const policy = this.o.redelivery ?? DEFAULT_REDELIVERY;
    const delivery_count = req.delivery_count ?? 1;
    const d = dispose({ end, reached_outside: state.reached_outside, failure, delivery_count, give_up_after: policy.give_up_after });
    const message = error === null ? null : error instanceof Error ? error.message : String(error);
    // The work item that woke the turn, then those its tools named.
    const named_work = [...new Set([...toRun.flatMap((t) => (t.refs.work_key !== undefined ? [t.refs.work_key] : [])), ...(state.work_items ?? [])])];
    const memoryFacts: TurnMemoryFacts | null =
      d.settle === "ack" && this.o.memory
        ? {
            seat: seat.handle,
            turn_id: state.turn_id,
            work_key,
            trigger_ids: ran,
            conversation,
            counterparty: toRun[toRun.length - 1]!.from !== seat.handle ? toRun[toRun.length - 1]!.from : null,
            outcome: d.outcome,
            summary: state.final_text || (message ?? ""),
            // The work item that woke the turn, then those its tools named: recall finds the
            // episode by any of them, whichever conversation the next wake comes through.
            work_items: named_work,
            asked: toRun.map((t) => t.text).join("\n"),
          }
        : null;
    if (memoryFacts) {
      // The turn's memory rows are written and published before its completion is
      // recorded: a crash after the record finds every row of this turn on the changelog.
      try {
        await this.o.memory!.turnEnded(memoryFacts);
      } catch (err) {
        this.o.log.warn("memory_turn_write_failed", { seat: seat.handle, turn_id: state.turn_id, error: (err as Error).message });
      }
    }
    const notice = d.tell && stop ? noticeText({ stop, done: state.outside, deliveries: stop.kind !== "refused" && (failure === "transient" || failure === null) ? delivery_count : undefined }) : null;
    if (d.record && this.o.ledger) {
      const owed = { ...(notice !== null ? { notice } : {}), ...(state.owed_reply ? { reply: state.owed_reply } : {}) };
      await this.o.ledger.record({ seat: seat.handle, turn_id: state.turn_id, node: this.o.node_id, outcome: d.outcome, triggers: toRun, answered_messages: answered, ...owed });
    }
    if (memoryFacts && d.outcome === "completed") await this.o.memory!.turnRecorded(memoryFacts);
    if (d.gave_up) {
      const reason = end === "panicked" ? "turn_panicked" : state.reached_outside ? "turn_failed_after_reaching_outside" : `turn_failed_${failure ?? "for_good"}`;
      for (const t of toRun) {
        this.o.events.emit("turn_trigger_skipped", { seat: seat.handle, node: this.o.node_id, event_id: t.event_id, type: t.type, reason, by_turn: state.turn_id });
      }
    }
    // A notice that could not be posted, or a reply recorded as owed, keeps the delivery: its
    // redelivery finds it owed in the ledger (or reruns an unrecorded turn) and posts it then.
    const untold = (notice !== null && (await this.tell(seat.handle, state.turn_id, toRun, notice)) === "failed") || (d.record && state.owed_reply !== undefined);
    const settle: Settle = untold ? "nak" : d.settle;
    const delayed = untold || (d.settle === "nak" && d.delayed);
    if (d.guard_breach) {
      this.o.events.emit("turn.guard_breach", { seat: seat.handle, node: this.o.node_id, turn_id: state.turn_id, kind: "unhandled_exception", error: message });
    }
    this.o.events.emit("turn_completed", {
      seat: seat.handle,
      node: this.o.node_id,
      epoch: req.epoch,
      turn_id: state.turn_id,
      trigger_ids: ran,
      conversation,
      from: toRun[toRun.length - 1]!.from,
      rounds: state.rounds,
      tool_calls: state.tool_calls,
      tokens: { input: state.usage.input_tokens, output: state.usage.output_tokens },
      outcome: d.outcome,
      settle,
      reached_outside: state.reached_outside,
      error: message,
      failure,
      delivery_count,
    });

    if (state.transcript) {
      try {
        const t = state.transcript.finish({ ended_at: this.o.clock.now(), outcome: d.outcome, end, error: message, usage: state.usage });
        this.o.transcripts!.keep(t, { error_words: stop ? causeOf(stop) : null, work_items: named_work });
      } catch (err) {
        // node.db is this node's record; failing to keep a transcript must not fail a turn.
        this.o.log.warn("turn_transcript_write_failed", { seat: seat.handle, turn_id: state.turn_id, error: (err as Error).message });
      }
    }

    stat.busy = false;
    stat.turns += 1;
    stat.last_turn_at = this.o.clock.now();
    stat.last_outcome = d.outcome;
    stat.input_tokens += state.usage.input_tokens;
    stat.output_tokens += state.usage.output_tokens;
    if (d.outcome === "failed" || d.outcome === "retry") {
      stat.last_error = message;
      stat.last_error_at = this.o.clock.now();
    }

    return {
      turn_id: state.turn_id,
      settle,
      outcome: d.outcome,
      rounds: state.rounds,
      tool_calls: state.tool_calls,
      usage: state.usage,
      reached_outside: state.reached_outside,
      skipped,
      ran,
      final_text: state.final_text,
      error: message,
      ...(delayed ? { delay_ms: redeliveryDelayMs(delivery_count, policy) } : {}),
      ...(settle === "reject" ? { reason: `turn failed${failure ? ` (${failure})` : ""}: ${notice ?? message ?? "unknown"}` } : {}),
    };
  }

  /**
   * Ends a turn told: posts `text` once in the thread of the person the triggers came from
   * (notice.ts). The reusable path for any turn that stops with a reason the person must
   * hear — a provider failure here, a refusal for spend or a pause elsewhere.
   */
  tell(seat: string, turn_id: string, triggers: readonly Trigger[], text: string): ReturnType<Notifier["tell"]> {
    return this.notifier.tell(seat, turn_id, triggers, text);
  }

  /** Posts what a recorded turn still owes: a reply not confirmed, a failed turn's notice. False: one is still owed. */
  private async tellOwed(seat: string, skipped: readonly { trigger: Trigger; hit: LedgerHit }[]): Promise<boolean> {
    // Grouped by the turn that owes them: the notifier picks the same one target it did.
    const owed = new Map<string, { notice?: string; reply?: OwedReply; triggers: Trigger[] }>();
    for (const { trigger, hit } of skipped) {
      const r = hit.record;
      if ((r?.notice === undefined && r?.reply === undefined) || r.as !== "trigger") continue;
      const o = owed.get(r.turn_id) ?? { notice: r.notice, reply: r.reply, triggers: [] };
      o.triggers.push(trigger);
      owed.set(r.turn_id, o);
    }
    let told = true;
    for (const [turn_id, o] of owed) {
      let notice = o.notice;
      const posted = o.reply ? await this.postReply(seat, o.reply) : null;
      if (posted?.is_error && posted.refused) {
        // Refused, not unknown (its thread is gone, say): posting again can never land it,
        // so the person is told it was lost rather than the delivery being handed back
        // until it dead-letters hours later, with nobody told.
        this.o.log.warn("turn_reply_refused", { seat, turn_id, op_id: o.reply!.op_id, error: posted.content });
        notice = [notice, `My reply could not be posted: ${posted.content}`].filter((x) => x !== undefined).join("\n");
      } else if (posted?.is_error) {
        this.o.log.warn("turn_reply_owed", { seat, turn_id, op_id: o.reply!.op_id });
        told = false;
      }
      if (notice !== undefined && (await this.tell(seat, turn_id, o.triggers, notice)) === "failed") told = false;
    }
    return told;
  }

  /** The rounds. Returns the waiting chat messages the thread showed (ledger's second key). */
  private async converse(req: TurnRequest, seat: Seat, provider: Provider, batch: Trigger[], state: RunState): Promise<string[]> {
    const abort = new AbortController();
    const cancel = () => abort.abort(req.signal?.reason ?? new Error("cancelled"));
    if (req.signal?.aborted) cancel();
    req.signal?.addEventListener("abort", cancel, { once: true });
    const live = this.liveText(seat.handle, state.turn_id);
    try {
      const triggers = await this.resumeApprovals(req, seat, batch, state, abort.signal);
      const { ctx, woke, thread } = await this.readContext(triggers);
      const answered = thread ? waitingMessages(seat.handle, thread, woke) : [];
      return await this.rounds(req, seat, provider, triggers, state, { ctx, thread, answered, abort, live });
    } finally {
      req.signal?.removeEventListener("abort", cancel);
      live.flush();
    }
  }

  /**
   * turn_text events: a streaming model's text as it arrives, gathered for
   * TEXT_EVENT_EVERY_MS and bounded per turn (TEXT_EVENTS_PER_TURN_MAX, TEXT_EVENT_CHARS_MAX).
   * Published, not logged: it is the live view's, and the final text is in turn_completed.
   */
  private liveText(seat: string, turn_id: string): { onText: (d: string) => void; flush: () => void; round: (n: number) => void } {
    let buf = "";
    let sent = 0;
    let last = 0;
    let round = 0;
    const flush = () => {
      if (buf === "" || sent >= TEXT_EVENTS_PER_TURN_MAX) return;
      const text = buf.slice(0, TEXT_EVENT_CHARS_MAX);
      buf = buf.slice(text.length);
      sent += 1;
      last = this.o.clock.now();
      this.o.events.emit("turn_text", { seat, node: this.o.node_id, turn_id, round, seq: sent, text }, { log: false });
    };
    return {
      onText: (d) => {
        if (sent >= TEXT_EVENTS_PER_TURN_MAX) return;
        buf += d;
        if (this.o.clock.now() - last >= TEXT_EVENT_EVERY_MS || buf.length >= TEXT_EVENT_CHARS_MAX) flush();
      },
      flush,
      round: (n) => {
        flush();
        round = n;
      },
    };
  }

  private async rounds(
    req: TurnRequest,
    seat: Seat,
    provider: Provider,
    triggers: Trigger[],
    state: RunState,
    r: { ctx: TurnContextData; thread: Message[] | null; answered: string[]; abort: AbortController; live: { onText: (d: string) => void; round: (n: number) => void } },
  ): Promise<string[]> {
    const org = this.o.org();
    const primary = triggers[triggers.length - 1]!;
    const { ctx, thread, answered, abort } = r;
    const tools = this.toolsFor(seat.handle);
    const byName = new Map(tools.map((t) => [t.name, t]));
    const specs = tools.map(toolSpec);
    const system = systemPrompt(org, seat);
    const recalled = await this.recall(seat, triggers);
    const opening = turnMessage(triggers, ctx);
    const messages: ChatMessage[] = [{ role: "user", content: recalled?.block ? `${opening}\n\n${recalled.block}` : opening }];
    const base = this.factsFor(seat, primary, ctx);
    const facts = recalled ? { ...base, vars: { ...base.vars, ...recalled.vars } } : base;
    const toolCtx: ToolContext = { seat: seat.handle, epoch: req.epoch, turn_id: state.turn_id, signal: abort.signal, conversation: primary.conversation, from: primary.from, cause: primary.event_id };
    const max_rounds = this.o.max_rounds ?? MAX_ROUNDS;
    state.transcript?.opened(system, messages[0]!.content);
    if (recalled && recalled.skills.length > 0) state.transcript?.skillsUsed(recalled.skills);

    state.limit_hit = true;
    for (let round = 1; round <= max_rounds; round++) {
      this.fenceCheck(req, state);
      // A call that would start over a hard cap is not made (src/spend).
      const refused = (await this.o.spend?.check(seat.handle, provider.name)) ?? null;
      if (typeof refused === "string") throw new Refused("budget_exhausted", refused);
      if (refused !== null) throw new Broken(refused.unknown, "transient", { kind: "refused", words: refused.unknown });
      state.rounds = round;
      r.live.round(round);
      const round_at = this.o.clock.now();
      const answer = await callModel(provider, { system, messages, tools: specs, facts, signal: abort.signal, retry: state.retry, onText: r.live.onText }, { clock: this.o.clock, log: this.o.log, seat: seat.handle, round });
      state.usage.input_tokens += answer.usage.input_tokens;
      state.usage.output_tokens += answer.usage.output_tokens;
      const cost_micros = this.o.transcripts?.costOf(provider.name, answer.usage) ?? null;
      state.cost_micros = cost_micros === null ? null : (state.cost_micros ?? 0) + cost_micros;
      state.transcript?.round({ n: round, started_at: round_at, model_ms: this.o.clock.now() - round_at, sent: messages, text: answer.text, usage: answer.usage, cost_micros });
      await this.o.spend?.charge(seat.handle, provider.name, answer.usage);
      if (answer.toolCalls.length === 0) {
        state.transcript?.roundEnded(this.o.clock.now());
        state.final_text = answer.text.trim();
        state.limit_hit = false;
        break;
      }
      messages.push({ role: "assistant", content: answer.text, tool_calls: answer.toolCalls });
      for (const [i, call] of answer.toolCalls.entries()) {
        this.fenceCheck(req, state);
        const call_at = this.o.clock.now();
        const result: ToolResult = i < MAX_TOOL_CALLS_PER_ROUND ? await this.callTool(byName, call, toolCtx, state, round, answer.text) : { content: `not run: at most ${MAX_TOOL_CALLS_PER_ROUND} tool calls per answer`, is_error: true };
        messages.push({ role: "tool", tool_call_id: call.id, name: call.name, content: cut(result.content), is_error: result.is_error });
        state.transcript?.toolCalled(call, cut(result.content), result.is_error, result.reached ?? false, this.o.clock.now() - call_at);
      }
      state.transcript?.roundEnded(this.o.clock.now());
    }

    await this.keepObligations(req, seat, triggers, state, thread);
    return answered;
  }

  /**
   * Hands replies that answer a parked run to it, records them in the ledger (so a copy is
   * never passed on twice, nor run as a turn), and returns the triggers left to run. Fails
   * open: runs it cannot read leave every trigger to the turn.
   */
  private async passAnswersOn(req: TurnRequest, toRun: Trigger[], skipped: string[]): Promise<Trigger[]> {
    if (!this.o.runAnswers || !req.fence()) return toRun;
    let taken: { event_id: string; run: string }[];
    try {
      taken = await this.o.runAnswers.takeAnswers(req.seat, req.epoch, toRun);
    } catch (err) {
      this.o.log.warn("sandbox_answers_unread", { seat: req.seat, error: (err as Error).message });
      return toRun;
    }
    if (taken.length === 0) return toRun;
    const ids = new Set(taken.map((t) => t.event_id));
    const answers = toRun.filter((t) => ids.has(t.event_id));
    await this.o.ledger?.record({ seat: req.seat, turn_id: `run-answer:${taken[0]!.run}`, node: this.o.node_id, outcome: "run_answered", triggers: answers, answered_messages: [] });
    skipped.push(...ids);
    return toRun.filter((t) => !ids.has(t.event_id));
  }

  /**
   * Decisions on calls this seat parked: each is taken under this turn's grant, an approved
   * call runs here (once, through the same tool path as any call, past the gate), and the
   * turn reads the decision and the result as its trigger's words.
   */
  private async resumeApprovals(req: TurnRequest, seat: Seat, triggers: Trigger[], state: RunState, signal: AbortSignal): Promise<Trigger[]> {
    if (!this.o.approvals || !triggers.some((t) => t.type === "approval_decided")) return triggers;
    const byName = new Map(this.toolsFor(seat.handle).map((t) => [t.name, t]));
    const last = triggers[triggers.length - 1]!;
    const ctx: ToolContext = { seat: seat.handle, epoch: req.epoch, turn_id: state.turn_id, signal, conversation: last.conversation, from: last.from };
    return this.o.approvals.resume(seat.handle, req.epoch, triggers, async (tool, args) => {
      this.fenceCheck(req, state);
      // Round 0: before the model's first; the transcript shows it in the turn's opening
      // words (the decision and the result), and tool_called names it.
      const call: ToolCall = { id: `approved-${state.turn_id}`, name: tool, arguments: args, raw_arguments: JSON.stringify(args) };
      return this.callTool(byName, call, ctx, state, 0, null);
    });
  }

  /** The fence check: the seat moved (Fenced), or a person stopped the turn (Refused). */
  private fenceCheck(req: TurnRequest, state: RunState): void {
    if (!req.fence()) throw new Fenced();
    if (state.stopped_by !== undefined) throw new Refused("stopped", `stopped by ${state.stopped_by}`);
  }

  /** Runs one call; `said` (the model's words that round) is given when the call may need
   *  a person's yes first — null for a call a decision already approved. */
  private async callTool(byName: Map<string, Tool>, call: ToolCall, ctx: ToolContext, state: RunState, round: number, said: string | null): Promise<ToolResult> {
    const tool = byName.get(call.name);
    let result: ToolResult;
    if (!tool) result = { content: `unknown tool ${call.name}`, is_error: true, reached: false };
    else if (call.arguments === null) result = { content: `arguments are not a JSON object: ${call.raw_arguments.slice(0, 200)}`, is_error: true, reached: false };
    else {
      const parked = said === null ? null : await this.gate(tool, call.arguments, ctx, state, said);
      if (parked) this.o.events.emit("tool_parked", { seat: state.seat, node: this.o.node_id, turn_id: state.turn_id, round, tool: call.name });
      result = parked ?? (await this.runTool(tool, call.name, call.arguments, ctx, state));
    }
    this.o.events.emit("tool_called", { seat: state.seat, node: this.o.node_id, turn_id: state.turn_id, round, tool: call.name, ok: !result.is_error, reached: result.reached ?? false });
    return result;
  }

  private async runTool(tool: Tool, name: string, args: Record<string, unknown>, ctx: ToolContext, state: RunState): Promise<ToolResult> {
    state.tool_calls += 1;
    let result: ToolResult;
    try {
      result = await tool.call(args, ctx);
    } catch (err) {
      if (!isExpected(err)) throw err;
      // A read the estate could not answer: the model hears it; nothing was written.
      result = { content: (err as Error).message, is_error: true, reached: false };
    }
    const reached = result.reached ?? reachesOutside(tool.annotations);
    if (reached) {
      state.reached_outside = true;
      state.outside.push(name);
    }
    if (!result.is_error && name.startsWith("work_")) noteWorkItem(state, args, result.content);
    return { ...result, reached };
  }

  /**
   * Whether a person must say yes first (src/approvals): null runs the call; otherwise it
   * parked and the model reads why. A gate that cannot be asked runs nothing: the turn
   * fails as transient and its trigger comes back.
   */
  private async gate(tool: Tool, args: Record<string, unknown>, ctx: ToolContext, state: RunState, said: string): Promise<ToolResult | null> {
    if (!this.o.approvals) return null;
    try {
      return await this.o.approvals.intercept({
        seat: state.seat,
        epoch: ctx.epoch,
        turn_id: state.turn_id,
        trigger_ids: state.trigger_ids ?? [],
        conversation: ctx.conversation ?? `turn:${state.turn_id}`,
        from: ctx.from ?? state.seat,
        tool: tool.name,
        source: tool.annotations.source,
        readOnly: tool.annotations.readOnly,
        args,
        summary: said,
        spent: state.cost_micros === undefined || state.cost_micros === null ? null : state.cost_micros / 1_000_000,
      });
    } catch (err) {
      throw new Broken(`could not ask whether ${tool.name} needs approval: ${(err as Error).message}`, "transient");
    }
  }

  /** A chat mention obliges a reply in its thread; an a2a_request obliges an answer. */
  private async keepObligations(req: TurnRequest, seat: Seat, triggers: Trigger[], state: RunState, thread: Message[] | null): Promise<void> {
    const text = state.final_text;
    if (this.o.answerBack) {
      // A wake from GitHub or Slack is answered where it came from (a turn that already
      // posted there, or ended without words, answers nothing).
      const back = await this.o.answerBack({ seat: seat.handle, turn_id: state.turn_id, triggers, text, fence: req.fence });
      if (back?.fenced) throw new Fenced();
      if (back && !back.fenced) {
        if (back.reached) state.reached_outside = true;
        if (back.error !== null) {
          if (back.retryable && !back.reached) throw new Broken(`could not answer back: ${back.error}`);
          this.o.log.warn("turn_answer_back_failed", { seat: seat.handle, turn_id: state.turn_id, reached: back.reached, error: back.error });
        }
      }
    }
    if (text === "") return;
    const org = this.o.org();
    const chat = [...triggers].reverse().find((t) => CHAT_TOLD_TYPES.has(t.type) && t.refs.channel !== undefined);
    if (chat) {
      const root = thread?.find((m) => m.id === chat.refs.message_id);
      const root_id = root ? (root.thread_parent ?? root.id) : (chat.refs.message_id ?? chat.refs.thread_root ?? null);
      const replied = state.posts.some((p) => p.channel === chat.refs.channel && (p.thread_root === root_id || p.message_id === root_id));
      if (!replied) {
        if (!req.fence()) throw new Fenced();
        // Mentions of agent seats in an automatic reply wake nobody: agents answering each
        // other's automatic replies would never stop. A person named is still notified.
        const mentions = parseMentions(text).filter((h) => org.seat(h)?.kind !== "agent");
        // The reply's op id is derived from the message it answers: a write whose outcome
        // is unknown (the chat log's election outlasted the append budget) is tried again
        // as the same write, and so is a re-run after a redelivery — the log and every
        // copy apply one op id once, so the answer lands once. Acking on an unknown reply
        // without trying again lost answers in the chaos runs.
        const op_id = automaticOpId("reply", `${seat.handle}\n${chat.event_id}`);
        // The engine's own post is bounded by the record's rule too: cut with a marker, so
        // an over-long answer still reaches the person rather than being refused.
        const reply: OwedReply = { channel: chat.refs.channel!, thread_parent: root_id, body: truncateToBytes(text, MAX_MESSAGE_BYTES), mentions, op_id };
        let result = await this.postReply(seat.handle, reply);
        for (let attempt = 1; attempt < REPLY_WRITE_ATTEMPTS && result.is_error && result.reached && req.fence(); attempt++) {
          this.o.log.info("turn_reply_retried", { seat: seat.handle, turn_id: state.turn_id, attempt, op_id });
          result = await this.postReply(seat.handle, reply);
        }
        if (result.reached) state.reached_outside = true;
        if (result.is_error) {
          // Nothing of this turn reached outside: it runs again whole.
          if (!state.reached_outside) throw new Broken(`could not post the reply: ${result.content}`);
          // Owed, not said: the delivery comes back and the reply is posted again under its
          // op id until one post is confirmed; the turn itself cannot run again.
          state.owed_reply = reply;
          this.o.log.warn("turn_reply_uncertain", { seat: seat.handle, turn_id: state.turn_id, op_id, landed: result.reached ? "unknown" : "no", error: result.content });
        }
      }
    }
    const ask = [...triggers].reverse().find((t) => t.type === "a2a_request");
    if (ask) {
      const route = routeFor(org, ask.from);
      if (route.ok) {
        if (!req.fence()) throw new Fenced();
        const answer: Trigger = {
          type: "a2a_message",
          // Derived from the request, so a re-run's answer is the same message id.
          event_id: `a2a-ans-${createHash("sha256").update(ask.event_id).digest("hex").slice(0, 32)}`,
          seat: route.route.handle,
          conversation: ask.conversation,
          from: seat.handle,
          text: text.slice(0, 16 * 1024),
          refs: {},
          created_at: this.o.clock.now(),
        };
        state.reached_outside = true;
        await this.o.queue.publish(route.route.subject, encodeTrigger(answer), { msgId: answer.event_id });
      }
    }
  }

  /** The seat's reply in a thread, under its op id: sent again, it lands once. */
  private postReply(seat: string, r: OwedReply): Promise<ToolResult> {
    const body = { op: "chat.post" as const, channel: r.channel, author: seat, body: r.body, thread_parent: r.thread_parent, mentions: r.mentions, dm: null };
    return writeResult(() => this.o.estate.write("chat", body, { op_id: r.op_id }), (o) => o);
  }

  /** The seat's memory for this turn; a memory that cannot be read costs the turn nothing. */
  private async recall(seat: Seat, triggers: Trigger[]) {
    if (!this.o.memory) return null;
    try {
      return await this.o.memory.recall({ seat, org: this.o.org(), triggers });
    } catch (err) {
      this.o.log.warn("memory_recall_failed", { seat: seat.handle, error: (err as Error).message });
      return null;
    }
  }

  private factsFor(seat: Seat, t: Trigger, ctx: TurnContextData): TurnFacts {
    const woke = ctx.thread?.messages.find((m) => m.id === t.refs.message_id);
    return {
      seat: seat.handle,
      trigger_type: t.type,
      vars: {
        text: woke?.body ?? t.text,
        seat: seat.handle,
        author: t.from,
        work_key: t.refs.work_key ?? "",
        title: ctx.work?.item.title ?? "",
        channel: t.refs.channel ?? "",
        message_id: t.refs.message_id ?? "",
        conversation: t.conversation,
        trigger: t.type,
        company: this.o.org().company_name,
      },
    };
  }

  /** The trigger's context from the estate: its chat thread, its work item. */
  private async readContext(triggers: Trigger[]): Promise<{ ctx: TurnContextData; woke: Set<string>; thread: Message[] | null }> {
    const primary = triggers[triggers.length - 1]!;
    const woke = new Set(triggers.map((t) => t.refs.message_id).filter((m): m is string => m !== undefined));
    const ctx: TurnContextData = { thread: null, work: null };
    let thread: Message[] | null = null;
    const work_key = [...triggers].reverse().find((t) => t.refs.work_key !== undefined)?.refs.work_key;
    const atLeast = causeFloor(...triggers);
    if (work_key !== undefined) {
      const got = await this.o.estate.read({ q: "work.get", key: work_key }, { atLeast });
      if (got) {
        const comments = got.comments.slice(-WORK_CONTEXT_COMMENTS);
        ctx.work = { item: got.item, comments, truncated: comments.length < got.comments.length };
      }
    }
    const msg_id = primary.refs.message_id ?? [...triggers].reverse().find((t) => t.refs.message_id !== undefined)?.refs.message_id;
    if (msg_id !== undefined) {
      const m = await this.o.estate.read({ q: "chat.message", id: msg_id }, { atLeast });
      if (m) {
        const root_id = m.thread_parent ?? m.id;
        const root = root_id === m.id ? m : await this.o.estate.read({ q: "chat.message", id: root_id });
        const all: Message[] = [];
        let cursor = Math.max(0, (root?.position ?? m.position) - 1);
        for (let scanned = 0; scanned < THREAD_SCAN_MAX; scanned += PAGE) {
          const page = await this.o.estate.read({ q: "chat.messages", channel: m.channel, cursor, limit: PAGE });
          for (const x of page.messages) if (x.id === root_id || x.thread_parent === root_id) all.push(x);
          if (page.next === null) break;
          cursor = page.next;
        }
        thread = all.slice(-THREAD_CONTEXT_MESSAGES);
        ctx.thread = { channel: m.channel, root_id, messages: thread, truncated: thread.length < all.length };
      }
    }
    return { ctx, woke, thread };
  }
}

/** Work items a tool call named: its `key` argument, or the key its answer reports. */
function noteWorkItem(state: RunState, args: Record<string, unknown>, content: string): void {
  const items = (state.work_items ??= new Set());
  if (items.size >= 32) return;
  if (typeof args.key === "string") items.add(args.key);
  else {
    const m = /"key"\s*:\s*"([^"]{1,200})"/.exec(content);
    if (m) items.add(m[1]!);
  }
}

function cut(s: string): string {
  return s.length <= MAX_TOOL_RESULT_CHARS ? s : `${s.slice(0, MAX_TOOL_RESULT_CHARS)}\n…(cut at ${MAX_TOOL_RESULT_CHARS} characters)`;
}

function blankStatus(): SeatTurnStatus {
  return { busy: false, turns: 0, last_turn_at: null, last_outcome: null, last_error: null, last_error_at: null, input_tokens: 0, output_tokens: 0 };
}
