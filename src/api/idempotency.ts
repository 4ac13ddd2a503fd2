// Idempotency-Key on every write route (issue 12, item 5): a retry with the same key —
// after a 504, a timeout, or sent to another node — returns the first outcome and writes
// nothing new. Two mechanisms, both fleet-wide:
//   - the key names the write: an estate write's operation id is derived from it, so the
//     state log's msg-id window and every copy's op-id ledger apply it once, whichever
//     node the retry reaches, even while the first attempt is still in flight;
//   - the first settled success (200/201/204) is remembered in the coordination store's `claims` slot (a day,
//     the slot's age), so a retry of a route with no estate write behind it (a dead-letter
//     replay) answers as the first did, and a key reused for a different request is refused.
// Pure derivation is separate from the middleware's I/O, so the rules are table-tested.
import { createHash } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import type { KvSlot } from "../coord/contract.ts";
import { CasConflict } from "../coord/contract.ts";
import type { Logger } from "../log.ts";
import type { AuthEnv, TokenAuth } from "./auth.ts";
import { ApiError, MAX_REQUEST_BODY_BYTES, readBodyBytes } from "./errors.ts";

export const IDEMPOTENCY_HEADER = "Idempotency-Key";
/** Set on an answer that was remembered rather than produced again. */
export const REPLAYED_HEADER = "Idempotent-Replayed";
/** A key is the client's token for one logical request: a UUID fits many times over. */
export const MAX_KEY_CHARS = 200;
/** Remembered answers above this are not kept (write answers are a few hundred bytes). */
const MAX_REMEMBERED_BYTES = 64 * 1024;
const WRITE_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"]);
/** Where the signed webhooks live (src/integrations/ingress.ts): not token routes. */
const UNTOKENED_PREFIX = "/hooks/";
/** Answers that are an outcome for good (see the middleware's end). */
const REMEMBERED_STATUSES = new Set([200, 201, 204]);
/** Printable ASCII without spaces: what survives every proxy's header handling unchanged. */
const KEY_RE = /^[\x21-\x7e]+$/;

export interface IdempotencyScope {
  /** The key's identity for this caller and route: sha256 hex of token, method, path, key. */
  scope: string;
  /** The estate operation id a write under this key uses. */
  op_id: string;
  /** The slot key its remembered answer lives under. */
  slot_key: string;
}

/** Checks a presented key; an error message naming the header when it is unusable. Pure. */
export function checkKey(key: string): string | null {
  if (key.length === 0) return `${IDEMPOTENCY_HEADER} is empty`;
  if (key.length > MAX_KEY_CHARS) return `${IDEMPOTENCY_HEADER} is longer than ${MAX_KEY_CHARS} characters`;
  if (!KEY_RE.test(key)) return `${IDEMPOTENCY_HEADER} holds characters other than printable ASCII`;
  return null;
}

/** A request's path as the router reads it (not strict): "/work/" is "/work". */
export function routePath(path: string): string {
  return path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
}

/**
 * The scope of a key. Pure. Scoped to the caller's token and the route, so two clients'
 * keys (or one client's key on two routes) never name the same write.
 */
export function scopeOf(tokenId: string, method: string, path: string, key: string): IdempotencyScope {
  const scope = createHash("sha256").update(`${tokenId}\n${method.toUpperCase()}\n${routePath(path)}\n${key}`).digest("hex");
  return { scope, op_id: `idem-${scope.slice(0, 40)}`, slot_key: `idem_${scope}` };
}

/** A fingerprint of the request body: the same key with another body is another request. */
export function fingerprint(body: string | Uint8Array): string {
  return createHash("sha256").update(body).digest("hex").slice(0, 32);
}

interface Remembered {
  status: number;
  body: string;
  fingerprint: string;
}

function parseRemembered(value: Uint8Array): Remembered | null {
  try {
    const r = JSON.parse(new TextDecoder().decode(value)) as Partial<Remembered>;
    if (typeof r.status === "number" && typeof r.body === "string" && typeof r.fingerprint === "string") return r as Remembered;
  } catch {
    // An unreadable record is no record: the request runs (its op id still dedupes).
  }
  return null;
}

/**
 * The middleware, mounted once for every route. Reads nothing and changes nothing for a
 * request without the header or a read; a request whose token does not identify is left
 * to the route's own auth (401).
 */
export function idempotency(o: { auth: TokenAuth; slot: KvSlot | null; log: Logger }): MiddlewareHandler<AuthEnv> {
  return async (c, next) => {
    const key = c.req.header(IDEMPOTENCY_HEADER);
    // Signed webhooks carry no token and dedupe by their delivery id; their route reads
    // the raw body itself, which a read here would have consumed.
    if (key === undefined || !WRITE_METHODS.has(c.req.method) || c.req.path.startsWith(UNTOKENED_PREFIX)) return next();
    const bad = checkKey(key);
    if (bad) throw new ApiError(400, "invalid_input", bad, IDEMPOTENCY_HEADER);
    const principal = o.auth.identify(c.req.header("authorization"));
    if (!principal) return next();
    const s = scopeOf(principal.tokenId, c.req.method, c.req.path, key);
    // The bytes, whatever the route's own limit (a file upload's is the largest): the route
    // refuses a body over its limit itself, after this.
    const print = fingerprint(await readBodyBytes(c, MAX_REQUEST_BODY_BYTES));
    c.set("op_id", s.op_id);
    if (o.slot) {
      let entry = null;
      try {
        entry = await o.slot.get(s.slot_key);
      } catch (err) {
        // The store not answering leaves the op id to dedupe an estate write.
        o.log.warn("api_idempotency_unreadable", { error: err as Error });
      }
      const seen = entry ? parseRemembered(entry.value) : null;
      if (seen) {
        if (seen.fingerprint !== print) {
          throw new ApiError(422, "idempotency_key_reused", `this ${IDEMPOTENCY_HEADER} was first used for a different request body`, IDEMPOTENCY_HEADER);
        }
        return new Response(seen.body, { status: seen.status, headers: { "content-type": "application/json", [REPLAYED_HEADER]: "true" } });
      }
    }
    await next();
    const res = c.res;
    // Only a settled success is remembered: a 4xx wrote nothing and is judged again; a 202
    // (on the log, not yet applied where asked) is run again under the same op id, which
    // then answers the applied outcome; a 5xx (503 unavailable, 504 unknown) is exactly
    // what a retry is for.
    if (!o.slot || !REMEMBERED_STATUSES.has(res.status)) return;
    const body = await res.clone().text();
    if (Buffer.byteLength(body) > MAX_REMEMBERED_BYTES) return;
    const value = new TextEncoder().encode(JSON.stringify({ status: res.status, body, fingerprint: print } satisfies Remembered));
    try {
      await o.slot.create(s.slot_key, value);
    } catch (err) {
      // A concurrent attempt remembered first: both answered the same write.
      if (!(err instanceof CasConflict)) o.log.warn("api_idempotency_unwritable", { error: err as Error });
    }
  };
}
