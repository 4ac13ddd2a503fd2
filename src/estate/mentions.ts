// Who a chat message names, and what a DM channel is called. Pure, so the writer parses
// mentions once into the record and no node's build can parse them differently later.
import { MAX_MENTIONS } from "./records.ts";

/**
 * `@handle` where the @ starts a word: not inside an e-mail address (`a@b.com`) or a
 * longer token. The handle grammar is the org's (lower-case letters, digits, _ and -).
 */
const MENTION_RE = /(?<![A-Za-z0-9_@.\-])@([a-z0-9][a-z0-9_\-]{0,47})(?![A-Za-z0-9_\-]|\.[A-Za-z0-9])/g;

/** Distinct handles mentioned in `body`, sorted, at most MAX_MENTIONS. */
export function parseMentions(body: string): string[] {
  const found = new Set<string>();
  for (const m of body.matchAll(MENTION_RE)) {
    found.add(m[1]!);
    if (found.size >= MAX_MENTIONS) break;
  }
  return [...found].sort();
}

/** A DM's id is derived from its participants: `dm.alice.bob` (handles hold no '.'). */
export function dmChannelId(members: readonly string[]): string {
  return "dm." + [...new Set(members)].sort().join(".");
}

/** The participants a DM id names, or null when `id` is not a DM id. */
export function dmMembers(id: string): string[] | null {
  if (!id.startsWith("dm.")) return null;
  const members = id.slice(3).split(".");
  if (members.length < 2 || members.some((m) => !/^[a-z0-9][a-z0-9_\-]{0,47}$/.test(m))) return null;
  const canonical = [...new Set(members)].sort();
  return canonical.join(".") === members.join(".") ? canonical : null;
}
