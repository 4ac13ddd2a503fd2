// The Provider contract (ARCHITECTURE.md § Contracts): complete({system, messages, tools})
// → {text, toolCalls, usage}. Three implementations: openai (any OpenAI-compatible
// endpoint), anthropic, and scripted (deterministic, offline). The turn engine only ever
// sees this file's types, so a provider is swapped by a line of config.
import { classifyFailure, type FailureClass, type ProviderErrorKind } from "./failure.ts";

export type { ProviderErrorKind };

export interface ToolCall {
  /** The provider's id for the call; a tool result names it back. */
  id: string;
  name: string;
  /** Parsed arguments, or null when the model sent text that is not a JSON object. */
  arguments: Record<string, unknown> | null;
  /** What the model sent, verbatim (for the error a null `arguments` earns). */
  raw_arguments: string;
}

export type ChatMessage =
  | { role: "user"; content: string }
  | { role: "assistant"; content: string; tool_calls: ToolCall[] }
  | { role: "tool"; tool_call_id: string; name: string; content: string; is_error: boolean };

export interface ToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  input_schema: Record<string, unknown>;
}

export interface Usage {
  input_tokens: number;
  output_tokens: number;
}

/**
 * What the turn is about, for providers that decide offline (scripted). Model-backed
 * providers ignore it: everything a model sees is in system and messages.
 */
export interface TurnFacts {
  seat: string;
  trigger_type: string;
  /** Template variables: text, seat, author, work_key, channel, thread, … */
  vars: Readonly<Record<string, string>>;
}

/**
 * Time a turn has spent on failed model calls and the waits between them. One per turn,
 * shared by its rounds (and a fallback's calls), so the per-turn retry budget
 * (providers.llm.*.retry_budget_seconds) bounds the whole turn, not each call.
 */
export interface RetrySpend {
  used_ms: number;
}

export interface CompletionRequest {
  system: string;
  messages: ChatMessage[];
  tools: ToolSpec[];
  facts?: TurnFacts;
  /** The caller's cancellation (a fenced or drained turn stops waiting on its model call). */
  signal?: AbortSignal;
  /** The turn's retry spend; absent: a fresh budget for this call alone. */
  retry?: RetrySpend;
  /** Text as it arrives, when the provider streams (a live view; never the answer itself). */
  onText?: (delta: string) => void;
  /**
   * A fallback provider takes this call when this one gives up (set by withFallback for
   * its primary): a provider whose keys are all cooling then gives up at once, before any
   * request, instead of waiting its keys out.
   */
  has_fallback?: boolean;
}

export interface Completion {
  text: string;
  toolCalls: ToolCall[];
  usage: Usage;
}

/** The fleet's shared key cooldowns: a 429 on one node rests that key on every node. */
export interface KeyCooldowns {
  /** True while `key` of `provider` is cooling (a local mirror: never waits on the store). */
  cooling(provider: string, key: string): boolean;
  /** When `key` of `provider` is ready again (clock ms; in the past or 0 when it is ready). */
  untilOf(provider: string, key: string): number;
  /** Rests `key` for `for_ms` fleet-wide; `reason` is what the events say. Never throws. */
  cool(provider: string, key: string, for_ms: number, reason: string): void;
}

export interface Provider {
  /** The provider key under providers.llm (for events and errors). */
  readonly name: string;
  complete(req: CompletionRequest): Promise<Completion>;
}

/**
 * An honest provider failure: which provider, what kind, the status and the body's words
 * (already redacted of every configured secret: the message reaches logs, events and
 * /agents). `failure` is classifyFailure's verdict on it.
 */
export class ProviderError extends Error {
  readonly failure: FailureClass;
  constructor(
    readonly provider: string,
    readonly kind: ProviderErrorKind,
    message: string,
    readonly status: number | null = null,
    /** Attempts made before giving up (1 when not retried). */
    readonly attempts = 1,
    /** The error body the class was judged on (defaults to the message). */
    body?: string,
  ) {
    super(`provider ${provider}: ${message}`);
    this.name = "ProviderError";
    this.failure = classifyFailure({ kind, status, body: body ?? message });
  }

  /** The same failure, counted over `attempts` tries. */
  withAttempts(attempts: number): ProviderError {
    return new ProviderError(this.provider, this.kind, this.message.replace(/^provider [^:]+: /, ""), this.status, attempts);
  }
}

/** Parses a tool call's JSON argument text; anything but an object is null. */
export function parseArguments(raw: string): Record<string, unknown> | null {
  if (raw.trim() === "") return {};
  try {
    const v: unknown = JSON.parse(raw);
    return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
