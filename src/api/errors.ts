// One shape for every API error: {error: {code, message, field?}}. Bad input is a 4xx that
// names the field; nothing a client sends may become a 500.
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { z } from "zod";
import { formatPath } from "../config/load.ts";
import { MAX_FILE_BYTES } from "../objects/store.ts";

export interface ApiErrorBody {
  error: { code: string; message: string; field?: string };
}

export class ApiError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: string,
    message: string,
    readonly field?: string,
  ) {
    super(message);
    this.name = "ApiError";
  }
  body(): ApiErrorBody {
    return { error: { code: this.code, message: this.message, ...(this.field !== undefined ? { field: this.field } : {}) } };
  }
}

export function fromZod(err: z.ZodError, where: "body" | "query" | "params"): ApiError {
  // An unknown field is named before anything else: it is the likeliest typo, and the field
  // it was meant to be is then "missing" too.
  const first = err.issues.find((i) => i.code === "unrecognized_keys") ?? err.issues[0];
  // An unknown field is named by its own key, not its parent's path.
  const field = first ? formatPath(first.code === "unrecognized_keys" && first.keys.length > 0 ? [...first.path, first.keys[0]!] : first.path) : "";
  const message = first
    ? first.code === "unrecognized_keys"
      ? `unknown field${first.keys.length > 1 ? "s" : ""} ${first.keys.join(", ")}`
      : first.message
    : "invalid input";
  return new ApiError(400, "invalid_input", `${where}${field ? "." + field : ""}: ${message}`, field || undefined);
}

/** Largest JSON body any route accepts; a chat message is ≤ 32 KiB, a page is larger. */
export const MAX_BODY_BYTES = 1024 * 1024;
/**
 * The HTTP server's own cap on a request body (Bun answers 413 past it without calling a
 * route; its default is 128 MiB). The largest body any route takes is a file upload
 * (MAX_FILE_BYTES); every other route takes at most MAX_BODY_BYTES and stops reading past
 * it (readBodyBytes), so no other route buffers more. The slack lets a body just over a
 * route's limit get that route's JSON 413 naming the limit.
 */
export const MAX_REQUEST_BODY_BYTES = Math.max(MAX_BODY_BYTES, MAX_FILE_BYTES) + 64 * 1024;

function tooLarge(): ApiError {
  return new ApiError(413, "too_large", `body is over ${MAX_BODY_BYTES} bytes`, "body");
}

type BodyCache = Record<string, Promise<unknown>>;

export class BodyTooLarge extends Error {}

/** Reads a body, refusing (BodyTooLarge) past `max` bytes without reading on: a declared
 *  length over it before anything is read, a streamed body the moment it passes. */
export async function readBounded(req: Request, max: number): Promise<Uint8Array> {
  const declared = Number(req.headers.get("content-length") ?? "NaN");
  if (Number.isFinite(declared) && declared > max) throw new BodyTooLarge();
  if (!req.body) return new Uint8Array(0);
  const reader = req.body.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel().catch(() => undefined);
      throw new BodyTooLarge();
    }
    parts.push(value);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/**
 * A request body's bytes, refused with `over` past max_bytes: a declared length over it
 * before anything is read, a streamed body the moment it passes the bound (never buffered
 * whole). The bytes are cached on the request, so a later read (the route's, after the
 * Idempotency-Key middleware's) reads the same body.
 */
export async function readBodyBytes(c: Context, max_bytes: number, over: () => ApiError = tooLarge): Promise<Uint8Array> {
  const cache = c.req.bodyCache as BodyCache;
  if (Object.keys(cache).length > 0) {
    const whole = new Uint8Array(await c.req.arrayBuffer());
    if (whole.byteLength > max_bytes) throw over();
    return whole;
  }
  let bytes: Uint8Array;
  try {
    bytes = await readBounded(c.req.raw, max_bytes);
  } catch (err) {
    if (err instanceof BodyTooLarge) throw over();
    throw err;
  }
  // readBounded hands back a fresh array of exactly the body: its buffer is the body.
  cache.arrayBuffer = Promise.resolve(bytes.buffer);
  return bytes;
}

/**
 * A request body as text, refused with 413 past MAX_BODY_BYTES (readBodyBytes: a declared
 * length before anything is read, a streamed body as soon as it passes).
 */
export async function readBodyText(c: Context): Promise<string> {
  return new TextDecoder().decode(await readBodyBytes(c, MAX_BODY_BYTES));
}

function decodeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError(400, "invalid_json", "body is not valid JSON", "body");
  }
}

/** Reads and validates a JSON body; throws ApiError (400/413/415) naming what is wrong. */
export async function parseJsonBody<S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>> {
  const type = c.req.header("content-type") ?? "";
  if (!type.toLowerCase().startsWith("application/json")) {
    throw new ApiError(415, "unsupported_media_type", "send the body as application/json", "content-type");
  }
  const parsed = schema.safeParse(decodeJson(await readBodyText(c)));
  if (!parsed.success) throw fromZod(parsed.error, "body");
  return parsed.data;
}

/** As parseJsonBody, for a route whose every body field is optional: no body at all is {}. */
export async function parseOptionalJsonBody<S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>> {
  if ((await readBodyText(c)).trim() === "") {
    const parsed = schema.safeParse({});
    if (!parsed.success) throw fromZod(parsed.error, "body");
    return parsed.data;
  }
  return parseJsonBody(c, schema);
}

const emptyObject = z.strictObject({});

/**
 * For a write route that takes no body (pause, drain, activate, replay …): nothing, or `{}`
 * as JSON (what the CLI sends). Anything else is refused before the action runs — a
 * malformed or misdirected body must not pause a seat or drain a node.
 */
export async function parseNoBody(c: Context): Promise<void> {
  const text = await readBodyText(c);
  if (text.trim() === "") return;
  const type = c.req.header("content-type") ?? "";
  if (!type.toLowerCase().startsWith("application/json")) {
    throw new ApiError(415, "unsupported_media_type", "this route takes no body (or {} as application/json)", "content-type");
  }
  const parsed = emptyObject.safeParse(decodeJson(text));
  if (!parsed.success) throw fromZod(parsed.error, "body");
}

export function parseQuery<S extends z.ZodType>(c: Context, schema: S): z.output<S> {
  // A parameter given twice is ambiguous (which limit?): refused, not the first one taken.
  for (const [name, values] of Object.entries(c.req.queries())) {
    if (values.length > 1) throw new ApiError(400, "invalid_input", `query.${name}: given ${values.length} times; give it once`, name);
  }
  const parsed = schema.safeParse(c.req.query());
  if (!parsed.success) throw fromZod(parsed.error, "query");
  return parsed.data;
}

/** One path parameter judged by its schema: a 400 naming it, never a throw past the route. */
export function parseParam<T>(schema: z.ZodType<T>, raw: string, name: string): T {
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw new ApiError(400, "invalid_input", `params.${name}: ${parsed.error.issues[0]?.message}`, name);
  return parsed.data;
}

/** For a route that takes no query parameters: any one sent is refused, named. */
export function parseNoQuery(c: Context): void {
  parseQuery(c, emptyObject);
}

/**
 * A read or write on the fleet's coordination store from a route: a store that does not
 * answer (a member's election, a broker restart) is a 503 the client retries, never a 500.
 * Errors the route raised itself (ApiError) pass through.
 */
export async function coordCall<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw new ApiError(503, `${what}_unavailable`, `the fleet's ${what} store did not answer (${(err as Error).message}); retry shortly`);
  }
}
