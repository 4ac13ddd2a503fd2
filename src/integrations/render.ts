// The words a woken seat's model reads: a short rendering of the event (who, what, where,
// the body, the URL), bounded — never the provider's JSON. Pure.
import { cutBytes, cutChars, type NormalizedEvent } from "./event.ts";

/** One wake's text: the event's body is already ≤ 4 KiB; this bounds the rest with it. */
export const MAX_WAKE_TEXT_BYTES = 8 * 1024;
/** A coalesced wake lists this many notifications, one line each; more are counted. */
export const COALESCED_LIST_MAX = 60;
/** One listed line: enough to tell two comments apart. */
export const COALESCED_LINE_CHARS = 240;

function quote(body: string): string {
  return body
    .trim()
    .split("\n")
    .map((l) => `> ${l}`)
    .join("\n");
}

export function renderEvent(integration: string, ev: NormalizedEvent): string {
  const lines = [`[${ev.kind}:${integration}] ${ev.actor} ${ev.summary} in ${ev.where}`];
  if (ev.labels.length > 0) lines.push(`labels: ${ev.labels.join(", ")}`);
  if (ev.body.trim() !== "") lines.push(quote(ev.body));
  if (ev.url) lines.push(ev.url);
  return cutBytes(lines.join("\n"), MAX_WAKE_TEXT_BYTES);
}

/** One line of a coalesced wake. */
export function renderLine(integration: string, ev: NormalizedEvent): string {
  const body = ev.body.trim().replace(/\s+/g, " ");
  const head = `[${ev.kind}:${integration}] ${ev.actor} ${ev.summary} in ${ev.where}`;
  return cutChars(`${head}${body ? `: ${body}` : ""}${ev.url ? ` ${ev.url}` : ""}`, COALESCED_LINE_CHARS);
}

export function renderCoalesced(seat: string, limit: number, lines: readonly string[], more: number): string {
  const total = lines.length + more;
  const out = [`${total} more notification${total === 1 ? "" : "s"} for @${seat} in one minute, held back by the rate valve (${limit} a minute wake you one by one); oldest first:`];
  for (const l of lines) out.push(`- ${l}`);
  if (more > 0) out.push(`- …and ${more} more not listed here`);
  return cutBytes(out.join("\n"), 2 * MAX_WAKE_TEXT_BYTES);
}
