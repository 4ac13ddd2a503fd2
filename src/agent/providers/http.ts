// The HTTP half of the model providers: one POST with a timeout, and a bounded retry loop
// that honours Retry-After and rotates API keys. The retry decision is a pure function
// (retryDelayMs) so the table of statuses is tested without a server.
import type { Clock } from "../../clock.ts";
import type { z } from "zod";
import { ProviderError } from "./contract.ts";

/** Attempts per model call. Four spans ~3.5 s of backoff (0.5 + 1 + 2): enough to ride out a
 * rate-limit window or a replica restart, short enough that a dead endpoint fails the turn
 * (which NAKs and comes back) rather than holding the seat for minutes. */
export const MAX_ATTEMPTS = 4;
/** First backoff; doubled per attempt. Deterministic (no jitter) so a fake clock drives it;
 * one node runs a few dozen seats, too few to stampede an endpoint in lockstep. */
export const BACKOFF_BASE_MS = 500;
export const BACKOFF_MAX_MS = 8_000;
/** The longest Retry-After we wait out inside one turn. A server asking for more is saying
 * "not now"; the turn fails honestly and its delivery comes back later instead. */
export const RETRY_AFTER_MAX_MS = 30_000;
/** How much of an error body goes into the error message: enough for the API's own words. */
const ERROR_BODY_CHARS = 500;

/** 408 timeout, 409 conflict (OpenAI's "try again"), 425, 429 rate limit, 5xx and 529 overloaded. */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 425 || status === 429 || status >= 500;
}

/**
 * How long to wait before attempt `attempt + 1`, or null to stop. `attempt` counts from 1.
 * Retry-After (delta seconds or an HTTP date) wins over the backoff when the server sent it.
 */
export function retryDelayMs(status: number | null, retry_after: string | null, attempt: number, now_ms: number): number | null {
  if (attempt >= MAX_ATTEMPTS) return null;
  // status null: a network failure or a timeout, worth one more try like a 5xx.
  if (status !== null && !isRetryableStatus(status)) return null;
  const backoff_ms = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (attempt - 1));
  if (retry_after === null || retry_after.trim() === "") return backoff_ms;
  const asked_ms = parseRetryAfterMs(retry_after, now_ms);
  if (asked_ms === null) return backoff_ms;
  if (asked_ms > RETRY_AFTER_MAX_MS) return null;
  return asked_ms;
}

export function parseRetryAfterMs(value: string, now_ms: number): number | null {
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Math.round(Number(v) * 1000);
  const at = Date.parse(v);
  if (Number.isNaN(at)) return null;
  return Math.max(0, at - now_ms);
}

export interface PostSpec {
  url: string;
  headers: Record<string, string>;
  body: unknown;
}

export interface HttpAnswer {
  status: number;
  retry_after: string | null;
  text: string;
}

export interface PostOptions {
  provider: string;
  clock: Clock;
  timeout_ms: number;
  signal?: AbortSignal;
}

/** One POST. Throws ProviderError(timeout | network | aborted); any HTTP status is returned. */
export async function postOnce(spec: PostSpec, opts: PostOptions): Promise<HttpAnswer> {
  if (opts.signal?.aborted) throw new ProviderError(opts.provider, "aborted", "cancelled by the caller");
  const timeout = new AbortController();
  const timer = opts.clock.setTimeout(() => timeout.abort(new Error("timeout")), opts.timeout_ms);
  const signal = opts.signal ? AbortSignal.any([timeout.signal, opts.signal]) : timeout.signal;
  try {
    const res = await fetch(spec.url, {
      method: "POST",
      headers: { "content-type": "application/json", ...spec.headers },
      body: JSON.stringify(spec.body),
      signal,
      redirect: "error",
    });
    const text = await res.text();
    return { status: res.status, retry_after: res.headers.get("retry-after"), text };
  } catch (err) {
    if (opts.signal?.aborted) throw new ProviderError(opts.provider, "aborted", "cancelled by the caller");
    if (timeout.signal.aborted) throw new ProviderError(opts.provider, "timeout", `no answer from ${spec.url} within ${opts.timeout_ms} ms`);
    throw new ProviderError(opts.provider, "network", `POST ${spec.url} failed: ${(err as Error).message}`);
  } finally {
    timer.cancel();
  }
}

/**
 * POSTs until a 2xx, a non-retryable status, or MAX_ATTEMPTS. `build(attempt)` makes each
 * attempt's request, so a caller can rotate API keys across attempts. Returns the 2xx body.
 */
export async function postWithRetries(build: (attempt: number) => PostSpec, opts: PostOptions): Promise<string> {
  let last: ProviderError | null = null;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const spec = build(attempt);
    let status: number | null = null;
    let retry_after: string | null = null;
    try {
      const answer = await postOnce(spec, opts);
      if (answer.status >= 200 && answer.status < 300) return answer.text;
      status = answer.status;
      retry_after = answer.retry_after;
      last = new ProviderError(opts.provider, "http", `HTTP ${answer.status} from ${spec.url}: ${answer.text.slice(0, ERROR_BODY_CHARS)}`, answer.status, attempt);
    } catch (err) {
      if (!(err instanceof ProviderError) || err.kind === "aborted") throw err;
      last = new ProviderError(opts.provider, err.kind, err.message.replace(/^provider [^:]+: /, ""), null, attempt);
    }
    // A rejected key is not the endpoint's fault: the next key gets a try at once.
    const keyRejected = status === 401 || status === 403;
    const delay_ms = keyRejected && attempt < MAX_ATTEMPTS ? 0 : retryDelayMs(status, retry_after, attempt, opts.clock.now());
    if (delay_ms === null) break;
    if (delay_ms > 0) {
      try {
        await opts.clock.sleep(delay_ms, opts.signal);
      } catch {
        throw new ProviderError(opts.provider, "aborted", "cancelled by the caller");
      }
    }
  }
  throw last ?? new ProviderError(opts.provider, "network", "no attempt was made");
}

/** The key for an attempt: rotate through the list so a rate-limited key rests. */
export function keyFor(keys: readonly string[], start: number, attempt: number): string | undefined {
  if (keys.length === 0) return undefined;
  return keys[(start + attempt - 1) % keys.length];
}

/** A provider's answer body, zod-parsed; a bad one names the field it got wrong. */
export function parseProviderJson<S extends z.ZodType>(provider: string, text: string, schema: S): z.output<S> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ProviderError(provider, "bad_response", `response is not JSON: ${text.slice(0, 200)}`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ProviderError(provider, "bad_response", `response field ${issue?.path.join(".") || "(root)"}: ${issue?.message}`);
  }
  return parsed.data;
}
