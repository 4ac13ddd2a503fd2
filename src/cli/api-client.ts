// Talking to a running node's API from the CLI: where (--url / CREWLET_URL), as whom
// (--token / CREWLET_TOKEN, or the token a node on this box minted), and one request that
// answers JSON or a clear failure.
import { readMintedToken } from "../api/auth.ts";
import { MAX_BODY_BYTES } from "../api/errors.ts";
import { DEFAULT_API_PORT, DEFAULT_STORE_DIR } from "../config/tier-a.ts";
import { UsageError } from "./args.ts";

export const DEFAULT_URL = `http://127.0.0.1:${DEFAULT_API_PORT}`;
/** A CLI call waits this long: longer than the router's 60 s write budget, so its answer arrives. */
const REQUEST_TIMEOUT_MS = 70_000;

export interface Target {
  url: string;
  token: string;
}

/** Hosts that are this box: only to these is a token read from the local store sent. */
const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "[::1]"]);

export function resolveTarget(values: { url?: string | boolean; token?: string | boolean }, env: Record<string, string | undefined> = process.env): Target {
  const url = (typeof values.url === "string" ? values.url : undefined) ?? env.CREWLET_URL ?? DEFAULT_URL;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(`--url ${JSON.stringify(url)} is not a URL`);
  }
  // On the box where `npm start` ran, the token it minted is in its store (crewlet.yaml's
  // store.dir: ${CREWLET_STORE:-.crewlet}): a person there should not have to copy it. It is
  // never sent beyond loopback — a token this user did not name does not leave the box.
  const stored = () => (LOOPBACK_HOSTS.has(parsed.hostname) ? readMintedToken(env.CREWLET_STORE ?? DEFAULT_STORE_DIR) : null);
  const token = (typeof values.token === "string" ? values.token : undefined) ?? env.CREWLET_TOKEN ?? stored();
  if (!token) throw new UsageError(`no API token: pass --token or set CREWLET_TOKEN (a node prints the token it minted at first boot; for a node on this box it is read from ${DEFAULT_STORE_DIR}/api-token, or $CREWLET_STORE/api-token)`);
  return { url: url.replace(/\/+$/, ""), token };
}

export type ApiAnswer = { ok: true; status: number; body: unknown } | { ok: false; status: number; message: string };

/**
 * Attempts of one write. A write is sent with an Idempotency-Key, so trying again after a
 * 503, a 504 (unknown: it may have run) or no answer at all is safe: the node answers the
 * first outcome and writes nothing new. Three attempts ride out a stream leader election
 * or a node's restart without leaving a person waiting minutes.
 */
const WRITE_ATTEMPTS = 3;
/** Between attempts; the wait grows by this each time. */
const RETRY_WAIT_MS = 1_000;
const WRITE_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"]);

export async function apiRequest(t: Target, method: string, path: string, body?: unknown): Promise<ApiAnswer> {
  if (!WRITE_METHODS.has(method.toUpperCase())) return apiRequestOnce(t, method, path, body, undefined);
  // One key for every attempt of this command's write: the attempts are one write.
  const key = crypto.randomUUID();
  let answer: ApiAnswer = { ok: false, status: 0, message: "not sent" };
  for (let attempt = 1; attempt <= WRITE_ATTEMPTS; attempt++) {
    answer = await apiRequestOnce(t, method, path, body, key);
    const retryable = !answer.ok && (answer.status === 0 || answer.status === 503 || answer.status === 504);
    if (!retryable || attempt === WRITE_ATTEMPTS) return answer;
    await Bun.sleep(RETRY_WAIT_MS * attempt);
  }
  return answer;
}

async function apiRequestOnce(t: Target, method: string, path: string, body: unknown, idempotencyKey: string | undefined): Promise<ApiAnswer> {
  const text = body === undefined ? undefined : JSON.stringify(body);
  // Past the node's limit the server answers a bare 413 before any route can say why.
  const bytes = text === undefined ? 0 : Buffer.byteLength(text);
  if (bytes > MAX_BODY_BYTES) return { ok: false, status: 413, message: `the request is ${bytes} bytes of JSON, over the API's ${MAX_BODY_BYTES}-byte limit; nothing was sent` };
  let res: Response;
  try {
    res = await fetch(t.url + path, {
      method,
      headers: {
        authorization: `Bearer ${t.token}`,
        ...(body !== undefined ? { "content-type": "application/json" } : {}),
        ...(idempotencyKey !== undefined ? { "idempotency-key": idempotencyKey } : {}),
      },
      body: text,
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
  } catch (err) {
    return { ok: false, status: 0, message: `cannot reach the node at ${t.url}: ${(err as Error).message}` };
  }
  let json: unknown = null;
  try {
    json = await res.json();
  } catch {
    return { ok: false, status: res.status, message: `the node answered ${res.status} with something that is not JSON` };
  }
  const err = (json as { error?: { message?: string } } | null)?.error;
  // 202 pending is an answer (on the log, not yet applied where it was asked); 504 unknown is not.
  if (res.status >= 400 || err) return { ok: false, status: res.status, message: err?.message ?? `the node answered ${res.status}: ${JSON.stringify(json)}` };
  return { ok: true, status: res.status, body: json };
}
