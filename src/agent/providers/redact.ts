// Secrets out of provider words. An endpoint's error body can quote the key it refused
// ("Incorrect API key provided: sk-live-…"), and that body goes into the error message that
// reaches a log line, the event stream and GET /agents. Every configured key and token is
// replaced before the message is built. Pure.

/** Shorter strings are not treated as secrets: replacing "a" everywhere would shred text. */
const MIN_SECRET_CHARS = 6;
/** Providers quote a key's first and last few characters ("sk-ab***wxyz"); a quoted
 * fragment this long still identifies the key. */
const FRAGMENT_CHARS = 8;
export const REDACTED = "[redacted]";

export type Redact = (text: string) => string;

export function redactor(secrets: Iterable<string>): Redact {
  const whole = [...new Set([...secrets].filter((s) => s.length >= MIN_SECRET_CHARS))].sort((a, b) => b.length - a.length);
  // A key's leading fragment as providers echo it (only for keys long enough that the
  // fragment is still specific to them).
  const fragments = whole.filter((s) => s.length >= FRAGMENT_CHARS * 2).map((s) => s.slice(0, FRAGMENT_CHARS));
  return (text: string) => {
    let out = text;
    for (const s of whole) out = out.split(s).join(REDACTED);
    for (const f of fragments) out = out.split(f).join(REDACTED);
    // Anything that still looks like a bearer credential.
    return out.replace(/\b(Bearer\s+)[A-Za-z0-9._\-]{8,}/g, `$1${REDACTED}`);
  };
}

export const noRedaction: Redact = (s) => s;
