// Webhook signatures: the authentication of /hooks/{kind}/{id}. Pure: secret, headers, raw
// body and the time in; a verdict out. Every comparison is constant-time over equal-length
// digests, so how much of a forged signature matched is not observable.
//  - GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, raw body)>`.
//  - Slack (signing secret v0): `X-Slack-Signature: v0=<hex HMAC-SHA256(secret,
//    "v0:{X-Slack-Request-Timestamp}:{raw body}")>`, and the timestamp within five minutes.
//  - Generic: the hex HMAC-SHA256 of the raw body in a configured header (`sha256=` optional).
import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Slack's own rule: a request whose timestamp is more than five minutes from now is a
 * replay (a captured request resent) and is refused, whatever its signature.
 */
export const SLACK_REPLAY_WINDOW_MS = 5 * 60 * 1000;

export type Verdict = { ok: true } | { ok: false; reason: string };

export type HeaderGet = (name: string) => string | undefined;

function hmacHex(secret: string, ...parts: (string | Uint8Array)[]): string {
  const h = createHmac("sha256", secret);
  for (const p of parts) h.update(p);
  return h.digest("hex");
}

/** Constant-time equality of two hex digests; a malformed one is simply unequal. */
export function sameDigest(presented: string, expected: string): boolean {
  if (!/^[0-9a-f]+$/i.test(presented)) return false;
  const a = Buffer.from(presented.toLowerCase(), "hex");
  const b = Buffer.from(expected, "hex");
  // Lengths are public (a SHA-256 is always 32 bytes); the content comparison is not.
  return a.length === b.length && timingSafeEqual(a, b);
}

export function verifyGithub(secret: string, header: HeaderGet, body: Uint8Array): Verdict {
  const sig = header("x-hub-signature-256");
  if (sig === undefined) return { ok: false, reason: "missing X-Hub-Signature-256" };
  const m = /^sha256=(.+)$/.exec(sig.trim());
  if (!m) return { ok: false, reason: "X-Hub-Signature-256 is not sha256=<hex>" };
  return sameDigest(m[1]!, hmacHex(secret, body)) ? { ok: true } : { ok: false, reason: "X-Hub-Signature-256 does not match" };
}

export function verifySlack(secret: string, header: HeaderGet, body: Uint8Array, now_ms: number): Verdict {
  const sig = header("x-slack-signature");
  const ts = header("x-slack-request-timestamp");
  if (sig === undefined) return { ok: false, reason: "missing X-Slack-Signature" };
  if (ts === undefined || !/^\d{1,12}$/.test(ts.trim())) return { ok: false, reason: "missing or malformed X-Slack-Request-Timestamp" };
  const m = /^v0=(.+)$/.exec(sig.trim());
  if (!m) return { ok: false, reason: "X-Slack-Signature is not v0=<hex>" };
  // The signature covers the timestamp, so it is checked first: an unsigned stale request
  // and a signed stale one are both refused, but only a signed one is called a replay.
  if (!sameDigest(m[1]!, hmacHex(secret, `v0:${ts.trim()}:`, body))) return { ok: false, reason: "X-Slack-Signature does not match" };
  const age_ms = Math.abs(now_ms - Number(ts.trim()) * 1000);
  if (age_ms > SLACK_REPLAY_WINDOW_MS) return { ok: false, reason: `replay refused: the request timestamp is ${Math.round(age_ms / 1000)} s from now (limit ${SLACK_REPLAY_WINDOW_MS / 1000} s)` };
  return { ok: true };
}

export function verifyGeneric(secret: string, headerName: string, header: HeaderGet, body: Uint8Array): Verdict {
  const sig = header(headerName.toLowerCase());
  if (sig === undefined) return { ok: false, reason: `missing ${headerName}` };
  const hex = sig.trim().replace(/^sha256=/, "");
  return sameDigest(hex, hmacHex(secret, body)) ? { ok: true } : { ok: false, reason: `${headerName} does not match` };
}

/** What a provider would send: used by tests, benches and a person checking a setup. */
export function signGithub(secret: string, body: string | Uint8Array): string {
  return `sha256=${hmacHex(secret, body)}`;
}
export function signSlack(secret: string, timestamp_s: number, body: string | Uint8Array): string {
  return `v0=${hmacHex(secret, `v0:${timestamp_s}:`, body)}`;
}
export function signGeneric(secret: string, body: string | Uint8Array): string {
  return `sha256=${hmacHex(secret, body)}`;
}
