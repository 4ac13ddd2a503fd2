// The HTTP half of the model providers: one POST under three timeouts, a body read with a
// gap timeout (streamed or not), and a retry loop that retries only what failure.ts calls
// transient — exponential backoff with full jitter, Retry-After honoured — inside the
// turn's retry budget, rotating API keys. Delays are a pure function (retryDelayMs), so
// the table of cases is tested without a server.
import { connect as netConnect } from "node:net";
import type { Clock, Timer } from "../../clock.ts";
import type { z } from "zod";
import { ProviderError, type KeyCooldowns, type RetrySpend } from "./contract.ts";
import { noRedaction, type Redact } from "./redact.ts";
import { coolingReason } from "./failure.ts";

/**
 * Connect timeout. A TCP connection to a healthy endpoint opens in well under a second,
 * even across an ocean; 10 s rides out two SYN retransmits (1 s, 3 s) and still abandons a
 * black-holed address long before the first-byte timeout would.
 */
export const CONNECT_TIMEOUT_MS = 10_000;
/**
 * First-byte timeout, streaming: the first chunk comes once the prompt is read. A long
 * prompt on a slow local model takes ~10–20 s; past 30 s the endpoint is hung.
 */
export const FIRST_BYTE_TIMEOUT_STREAM_MS = 30_000;
/**
 * First-byte timeout, not streaming: the whole answer is generated before the status line
 * (OpenAI and Anthropic both answer that way). A 4k-token answer at a modest 70 tokens/s
 * is ~60 s; 90 s leaves room for the prompt, and is still a fraction of the old 8 minutes
 * a hung endpoint held a seat.
 */
export const FIRST_BYTE_TIMEOUT_MS = 90_000;
/**
 * The longest silence between two chunks of a body once it has started. A streaming
 * model emits a token every few tens of ms, and both wires send keep-alive pings; 30 s of
 * nothing is a stalled stream.
 */
export const IDLE_TIMEOUT_MS = 30_000;
/** Default per-call timeout (providers.llm.*.timeout_seconds): a long answer, streamed or not. */
export const TOTAL_TIMEOUT_MS = 120_000;
/** Default per-turn retry budget (providers.llm.*.retry_budget_seconds): the issue's two
 * minutes ride out a rolling restart or a minute-long rate-limit window; after it the
 * delivery comes back later (a delayed NAK) instead of holding the seat. */
export const RETRY_BUDGET_MS = 120_000;
/**
 * Attempts per call, whatever the budget says: a connection refused in 1 ms with a
 * jittered delay near 0 would otherwise spin. Eight tries over a two-minute budget.
 */
export const MAX_ATTEMPTS = 8;
/** First backoff ceiling; doubled per attempt (full jitter picks uniformly below it). */
export const BACKOFF_BASE_MS = 1_000;
/** Backoff ceiling: the wait never exceeds this, so a recovering endpoint is seen promptly. */
export const BACKOFF_MAX_MS = 30_000;
/** An endpoint that answered within this long is not probed before the next call: the
 * connect probe is for an endpoint whose reachability is unknown or in doubt. */
export const PROBE_FRESH_MS = 60_000;
/** How much of an error body goes into the error message: enough for the API's own words. */
const ERROR_BODY_CHARS = 300;

/**
 * Full jitter (uniform in [0, ceiling), ceiling doubling per attempt): many seats failing
 * together spread their retries instead of returning in lockstep. Retry-After (delta
 * seconds or an HTTP date) wins when the server sent one. `attempt` counts from 1.
 */
export function retryDelayMs(retry_after: string | null, attempt: number, now_ms: number, random: () => number): number {
  if (retry_after !== null && retry_after.trim() !== "") {
    const asked = parseRetryAfterMs(retry_after, now_ms);
    if (asked !== null) return asked;
  }
  const ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (attempt - 1));
  return Math.floor(random() * ceiling);
}

export function parseRetryAfterMs(value: string, now_ms: number): number | null {
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Math.round(Number(v) * 1000);
  const at = Date.parse(v);
  if (Number.isNaN(at)) return null;
  return Math.max(0, at - now_ms);
}

export interface Timeouts {
  connect_ms: number;
  first_byte_ms: number;
  idle_ms: number;
  total_ms: number;
}

export function defaultTimeouts(stream: boolean, total_ms = TOTAL_TIMEOUT_MS): Timeouts {
  const first = stream ? FIRST_BYTE_TIMEOUT_STREAM_MS : FIRST_BYTE_TIMEOUT_MS;
  return { connect_ms: CONNECT_TIMEOUT_MS, first_byte_ms: Math.min(first, total_ms), idle_ms: IDLE_TIMEOUT_MS, total_ms };
}

export interface PostSpec {
  url: string;
  headers: Record<string, string>;
  body: unknown;
  /** The API key this attempt uses (a 429 puts it in the shared cooldown). Never logged. */
  key?: string;
}

export interface CallOptions {
  provider: string;
  clock: Clock;
  timeouts: Timeouts;
  signal?: AbortSignal;
  redact?: Redact;
}

/** A started answer: status known, body still to read under the idle and total timers. */
export interface Answer {
  status: number;
  retry_after: string | null;
  /** The body as text chunks, each within the idle timeout of the last. */
  chunks(): AsyncIterable<string>;
  text(): Promise<string>;
}

/** When each origin last answered anything (reachability known), for the connect probe. */
const lastAnswered = new Map<string, number>();

/** Opens (and closes) a TCP connection to the URL's host within `timeout_ms`. */
export function probeConnect(url: string, timeout_ms: number, clock: Clock, signal?: AbortSignal): Promise<void> {
  const u = new URL(url);
  const port = Number(u.port || (u.protocol === "https:" ? 443 : 80));
  const host = u.hostname.replace(/^\[|\]$/g, "");
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host, port });
    let done = false;
    const finish = (err?: Error) => {
      if (done) return;
      done = true;
      timer.cancel();
      signal?.removeEventListener("abort", onAbort);
      socket.destroy();
      if (err) reject(err);
      else resolve();
    };
    const onAbort = () => finish(new Error("aborted"));
    const timer: Timer = clock.setTimeout(() => finish(new Error(`no connection to ${host}:${port} within ${timeout_ms} ms`)), timeout_ms);
    signal?.addEventListener("abort", onAbort, { once: true });
    socket.once("connect", () => finish());
    socket.once("error", (e) => finish(e));
  });
}

function viaProxy(url: string): boolean {
  const https = url.startsWith("https:");
  return Boolean(https ? (process.env.HTTPS_PROXY ?? process.env.https_proxy) : (process.env.HTTP_PROXY ?? process.env.http_proxy));
}

/**
 * One POST. The status line must come within first_byte_ms (a hung endpoint is abandoned
 * there); the body's chunks each within idle_ms; the whole call within total_ms. An
 * endpoint not heard from lately is first probed for a TCP connection within connect_ms
 * (skipped behind an HTTP proxy, where the proxy is what fetch connects to). Throws
 * ProviderError(timeout | network | aborted); any HTTP status is returned.
 */
export async function post(spec: PostSpec, opts: CallOptions): Promise<Answer> {
  const { provider, clock, timeouts } = opts;
  const aborted = () => new ProviderError(provider, "aborted", "cancelled by the caller");
  if (opts.signal?.aborted) throw aborted();
  const origin = new URL(spec.url).origin;
  const seen = lastAnswered.get(origin);
  if (!viaProxy(spec.url) && (seen === undefined || clock.now() - seen > PROBE_FRESH_MS)) {
    try {
      await probeConnect(spec.url, timeouts.connect_ms, clock, opts.signal);
    } catch (err) {
      if (opts.signal?.aborted) throw aborted();
      const msg = (err as Error).message;
      const kind = /within \d+ ms/.test(msg) ? "timeout" : "network";
      throw new ProviderError(provider, kind, `cannot connect to ${origin}: ${msg}`);
    }
  }
  const ctl = new AbortController();
  let why: "first_byte" | "idle" | "total" | null = null;
  const trip = (w: typeof why) => () => {
    why ??= w;
    ctl.abort(new Error(`timeout: ${w}`));
  };
  const total = clock.setTimeout(trip("total"), timeouts.total_ms);
  let gap: Timer = clock.setTimeout(trip("first_byte"), timeouts.first_byte_ms);
  const signal = opts.signal ? AbortSignal.any([ctl.signal, opts.signal]) : ctl.signal;
  const stop = () => {
    total.cancel();
    gap.cancel();
  };
  const fail = (err: unknown): ProviderError => {
    stop();
    if (opts.signal?.aborted) return aborted();
    if (why !== null) {
      const limit = why === "first_byte" ? timeouts.first_byte_ms : why === "idle" ? timeouts.idle_ms : timeouts.total_ms;
      const what = why === "first_byte" ? "no answer" : why === "idle" ? "the answer stalled" : "the answer did not finish";
      return new ProviderError(provider, "timeout", `${what} from ${spec.url} within ${limit} ms (${why.replace("_", "-")} timeout)`);
    }
    return new ProviderError(provider, "network", `POST ${spec.url} failed: ${(opts.redact ?? noRedaction)((err as Error).message)}`);
  };
  let res: Response;
  try {
    res = await fetch(spec.url, {
      method: "POST",
      headers: { "content-type": "application/json", ...spec.headers },
      body: JSON.stringify(spec.body),
      signal,
      redirect: "error",
    });
  } catch (err) {
    throw fail(err);
  }
  lastAnswered.set(origin, clock.now());
  gap.cancel();
  gap = clock.setTimeout(trip("idle"), timeouts.idle_ms);
  const decoder = new TextDecoder();
  let consumed = false;
  async function* chunks(): AsyncIterable<string> {
    if (consumed) throw new Error("an answer's body is read once");
    consumed = true;
    const reader = res.body?.getReader();
    if (!reader) {
      stop();
      return;
    }
    try {
      for (;;) {
        let r: Awaited<ReturnType<typeof reader.read>>;
        try {
          r = await reader.read();
        } catch (err) {
          throw fail(err);
        }
        if (r.done) break;
        gap.cancel();
        gap = clock.setTimeout(trip("idle"), timeouts.idle_ms);
        const s = decoder.decode(r.value, { stream: true });
        if (s !== "") yield s;
      }
      const tail = decoder.decode();
      if (tail !== "") yield tail;
    } finally {
      stop();
      reader.releaseLock();
      if (!ctl.signal.aborted) ctl.abort(new Error("done"));
    }
  }
  return {
    status: res.status,
    retry_after: res.headers.get("retry-after"),
    chunks,
    async text() {
      let out = "";
      for await (const c of chunks()) out += c;
      return out;
    },
  };
}

export interface RetryOptions extends CallOptions {
  /** The turn's spend; checked against budget_ms before each wait. */
  spend?: RetrySpend;
  budget_ms: number;
  /** API keys the call may rotate through: a 401/403 tries the next at once. */
  keys: number;
  random?: () => number;
  cooldowns?: KeyCooldowns;
  /** A fallback takes the call when this one gives up (CompletionRequest.has_fallback). */
  has_fallback?: boolean;
}

/** What both wires' providers share about how a call is made and retried. */
export interface WireSettings {
  name: string;
  clock: Clock;
  retry_budget_ms?: number;
  redact?: Redact;
  random?: () => number;
  /** The fleet's shared key cooldowns (src/spend/cooldowns.ts). */
  cooldowns?: KeyCooldowns;
}

/** One call's retry options from its provider's settings and the turn's request. */
export function retryOptions(w: WireSettings, timeouts: Timeouts, keys: number, req: { signal?: AbortSignal; retry?: RetrySpend; has_fallback?: boolean }): RetryOptions {
  return {
    provider: w.name,
    clock: w.clock,
    timeouts,
    signal: req.signal,
    redact: w.redact ?? noRedaction,
    spend: req.retry,
    budget_ms: w.retry_budget_ms ?? RETRY_BUDGET_MS,
    keys: Math.max(1, keys),
    random: w.random,
    cooldowns: w.cooldowns,
    has_fallback: req.has_fallback ?? false,
  };
}

/**
 * Calls until an answer `consume` accepts, a failure that is not transient, MAX_ATTEMPTS,
 * or the retry budget. `build(attempt)` makes each attempt's request (the key rotates).
 * `consume` reads a 2xx answer into the result; a ProviderError it throws (a stalled
 * stream, a bad body) is judged like any other.
 *
 * An attempt whose key is cooling fleet-wide (keyFor only picks one when every key is)
 * makes no request: it is a transient "cooling" failure, thrown at once when a fallback
 * takes the call (withFallback moves on), else waited out like a Retry-After — until the
 * key's end plus jitter, inside the budget, or the turn fails and comes back later.
 */
export async function callWithRetries<T>(build: (attempt: number) => PostSpec, consume: (a: Answer) => Promise<T>, opts: RetryOptions): Promise<T> {
  const spend = opts.spend ?? { used_ms: 0 };
  const redact = opts.redact ?? noRedaction;
  const random = opts.random ?? Math.random;
  let keysRefused = 0;
  let last: ProviderError | null = null;
  const restingUntil = (spec: PostSpec): number => (spec.key !== undefined && opts.cooldowns ? opts.cooldowns.untilOf(opts.provider, spec.key) : 0);
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const spec = build(attempt);
    const started = opts.clock.now();
    let retry_after: string | null = null;
    const resting = restingUntil(spec);
    if (resting > started) {
      // keyFor picks a cooling key only when every key is cooling: no request is made with it.
      last = new ProviderError(opts.provider, "cooling", `all keys cooling after a rate limit, until ${new Date(resting).toISOString()}; no request made`, null, attempt);
      if (opts.has_fallback) throw last;
    } else {
      try {
        const answer = await post(spec, opts);
        if (answer.status >= 200 && answer.status < 300) return await consume(answer);
        retry_after = answer.retry_after;
        const body = redact(await answer.text().catch(() => ""));
        const cooling = spec.key !== undefined && opts.cooldowns ? coolingReason({ kind: "http", status: answer.status, body, retry_after }) : null;
        if (cooling !== null) {
          // The key rests fleet-wide until the server's Retry-After, else the backoff's ceiling.
          const for_ms = retryDelayMs(retry_after, attempt, opts.clock.now(), () => 1);
          opts.cooldowns!.cool(opts.provider, spec.key!, for_ms, retry_after !== null ? cooling : `${cooling}, backoff ${for_ms} ms`);
        }
        last = new ProviderError(opts.provider, "http", redact(`HTTP ${answer.status} from ${spec.url}: ${body.slice(0, ERROR_BODY_CHARS)}`), answer.status, attempt, body);
      } catch (err) {
        if (!(err instanceof ProviderError)) throw err;
        if (err.failure === "cancelled") throw err;
        // Its words may quote the URL (which can carry a key in its query) or a socket error.
        const clean = new ProviderError(err.provider, err.kind, redact(err.message.replace(/^provider [^:]+: /, "")), err.status, attempt);
        last = clean;
      }
      spend.used_ms += opts.clock.now() - started;
      if (last.status === 401 || last.status === 403) {
        // A rejected key is not the endpoint's fault: the next key gets a try at once.
        keysRefused += 1;
        if (keysRefused < opts.keys) continue;
      }
    }
    if (last.failure !== "transient") throw last;
    if (attempt >= MAX_ATTEMPTS) break;
    const now = opts.clock.now();
    let delay_ms = retryDelayMs(retry_after, attempt, now, random);
    // The next attempt's key is cooling (this answer cooled it, or the fleet did): a
    // fallback takes the call now; else its end is waited out, jittered past it so the
    // seats that all found it cooling spread out instead of returning together.
    const next_resting = restingUntil(build(attempt + 1));
    if (next_resting > now) {
      if (opts.has_fallback) throw last;
      delay_ms = Math.max(delay_ms, next_resting - now + Math.floor(random() * BACKOFF_BASE_MS));
    }
    // A server asking for longer than the budget has left is saying "not now": the turn
    // fails honestly and its delivery comes back later instead.
    // A budget of 0 is "never retry", even when the attempt and the delay round to 0 ms.
    if (opts.budget_ms <= 0 || spend.used_ms + delay_ms > opts.budget_ms) break;
    try {
      await opts.clock.sleep(delay_ms, opts.signal);
    } catch {
      throw new ProviderError(opts.provider, "aborted", "cancelled by the caller");
    }
    spend.used_ms += delay_ms;
  }
  throw last ?? new ProviderError(opts.provider, "network", "no attempt was made");
}

/** The key for an attempt: rotate through the list so a rate-limited key rests, and pass
 * over a key the fleet has cooling (`skip`) while another is ready; all cooling: the
 * rotation's own pick, with which callWithRetries makes no request (it waits or gives up). */
export function keyFor(keys: readonly string[], start: number, attempt: number, skip?: (key: string) => boolean): string | undefined {
  if (keys.length === 0) return undefined;
  const first = (start + attempt - 1) % keys.length;
  if (skip) {
    for (let i = 0; i < keys.length; i++) {
      const k = keys[(first + i) % keys.length]!;
      if (!skip(k)) return k;
    }
  }
  return keys[first];
}

/** A provider's answer body, zod-parsed; a bad one names the field it got wrong. */
export function parseProviderJson<S extends z.ZodType>(provider: string, text: string, schema: S, redact: Redact = noRedaction): z.output<S> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ProviderError(provider, "bad_response", `response is not JSON: ${redact(text.slice(0, 200))}`);
  }
  return parseProviderValue(provider, json, schema);
}

export function parseProviderValue<S extends z.ZodType>(provider: string, json: unknown, schema: S): z.output<S> {
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ProviderError(provider, "bad_response", `response field ${issue?.path.join(".") || "(root)"}: ${issue?.message}`);
  }
  return parsed.data;
}

/** A wire's endpoint from a configured base_url, with or without the version segment. */
export function endpointUrl(wire: "openai" | "anthropic", base_url: string): string {
  let base = base_url.trim().replace(/\/+$/, "");
  if (wire === "openai") {
    base = base.replace(/\/chat\/completions$/, "");
    // OpenAI-compatible servers mount the API under a version segment (/v1, Groq's
    // /openai/v1, OpenRouter's /api/v1); a bare host means the standard /v1.
    if (!/\/v\d+[a-z]*$/.test(base)) base = `${base}/v1`;
    return `${base}/chat/completions`;
  }
  base = base.replace(/\/messages$/, "").replace(/\/v1$/, "");
  return `${base}/v1/messages`;
}
