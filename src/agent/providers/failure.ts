// What a model provider's failure IS, decided from what the call proved (status, error kind,
// the body's words) — a PURE function, table-tested in test/agent/failure.test.ts. The HTTP
// loop (http.ts) retries only what this calls transient; the turn engine settles a failed
// turn's deliveries by it; the notice a person reads (notice.ts) is worded from it.
/** How a provider call failed, as the HTTP loop saw it (ProviderError.kind). */
export type ProviderErrorKind =
  /** The endpoint answered with an HTTP error status. */
  | "http"
  /** No answer within the configured timeout. */
  | "timeout"
  /** The connection failed (refused, reset, DNS). */
  | "network"
  /** The endpoint answered 2xx with a body that is not what the API promises. */
  | "bad_response"
  /** The caller cancelled. */
  | "aborted"
  /** Configuration cannot work (no api key, unknown fallback). */
  | "config"
  /** Every API key of the provider is cooling fleet-wide (src/spend/cooldowns.ts): no call made. */
  | "cooling";

export type FailureClass =
  /** Asking again cannot help until an operator changes something (key, URL, model, request). */
  | "permanent"
  /** The endpoint is down, slow, overloaded or rate-limited: the same call may succeed later. */
  | "transient"
  /** The request does not fit the model's context window: a retry sends the same tokens. */
  | "context_too_long"
  /** The caller stopped waiting (a drain, a fence): not the endpoint's fault at all. */
  | "cancelled";

export interface FailureFacts {
  kind: ProviderErrorKind;
  status: number | null;
  /** The error body (or message) as the endpoint sent it; only searched, never shown. */
  body: string;
}

/**
 * The words OpenAI-compatible servers (OpenAI, vLLM, llama.cpp, Ollama) and Anthropic use when
 * a prompt is over the model's context: `context_length_exceeded`, "maximum context length",
 * "prompt is too long", "exceeds the context window", "too many tokens".
 */
const CONTEXT_WORDS = /context[_ ]length|maximum context|context window|prompt is too long|too many (input )?tokens|reduce the length of the messages/i;

export function classifyFailure(f: FailureFacts): FailureClass {
  switch (f.kind) {
    case "aborted":
      return "cancelled";
    case "config":
    case "bad_response":
      // A body that is not the wire format: a wrong base_url or wire type answers every
      // call the same way (an HTML login page, a proxy's JSON).
      return "permanent";
    case "timeout":
    case "network":
    // Every key resting after a rate limit: the same call succeeds once one is ready.
    case "cooling":
      return "transient";
    case "http":
      break;
  }
  const status = f.status ?? 0;
  if (status === 413) return "context_too_long";
  if (status === 400) return CONTEXT_WORDS.test(f.body) ? "context_too_long" : "permanent";
  // 408 request timeout, 409 conflict ("try again"), 425 too early, 429 rate limit.
  if (status === 408 || status === 409 || status === 425 || status === 429) return "transient";
  // 5xx incl. Anthropic's 529 overloaded. A 5xx whose words say the prompt is too long (some
  // local servers answer 500 for it) would fail the same way every time.
  if (status >= 500) return CONTEXT_WORDS.test(f.body) ? "context_too_long" : "transient";
  // 401, 403, 404 and every other 4xx: the request or its credentials are wrong.
  return "permanent";
}

/** Anthropic's "overloaded" status: the API is over capacity, asking callers to back off. */
export const STATUS_OVERLOADED = 529;

/**
 * Whether an answer asks the fleet to rest the key that got it (src/spend/cooldowns.ts),
 * and why; null when not. Only a failure classifyFailure calls transient is considered —
 * the provider pushing back, not a broken request: 429 (rate limit, or a quota error),
 * 529 overloaded, or any transient answer carrying Retry-After (the server named its
 * pause, e.g. a 503 during a provider's incident). A transient answer without those (a
 * 500, a 502 from a proxy, a timeout) says nothing about the key and cools nothing.
 */
export function coolingReason(f: FailureFacts & { retry_after: string | null }): string | null {
  if (classifyFailure(f) !== "transient" || f.kind !== "http") return null;
  const after = f.retry_after !== null && f.retry_after.trim() !== "" ? `, Retry-After ${f.retry_after.trim()}` : "";
  if (f.status === 429) return `429 rate limited${after}`;
  if (f.status === STATUS_OVERLOADED) return `529 overloaded${after}`;
  if (after !== "") return `${f.status}${after}`;
  return null;
}

/** Whether a failure is worth trying on the NEXT key or provider (a fallback). */
export function worthFallback(cls: FailureClass, status: number | null): boolean {
  if (cls === "transient") return true;
  // Another key may be accepted, another endpoint may have the model.
  if (cls === "permanent") return status === 401 || status === 403 || status === 404;
  return false;
}
