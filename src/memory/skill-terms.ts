// The one normalisation of text into terms that skills are keyed and matched on: the
// learning duty's clustering (which episodes are "the same kind of work") and the prompt's
// pick (which skills fit this trigger) read text the same way, so a skill learned from
// "Refund the invoices" fits a later "refund this invoice". Pure and deterministic: the
// same episodes give the same terms on any node, with or without a model provider.

/**
 * Shorter words are mostly function words and fragments of ids ("the", "for", "ENG"); four
 * letters keeps "bill", "sync", "docs" and drops them.
 */
export const MIN_TERM_CHARS = 4;
/** Longer tokens are hashes, URLs and ids, never the kind of work. The row schema's bound. */
export const MAX_TERM_CHARS = 64;

/**
 * Words that occur in almost every summary a turn writes and say nothing about the kind of
 * work. Kept short on purpose: the clustering also sets aside a seat's own everyday words
 * (learning-plan.ts MAX_TERM_SHARE); this list keeps the language's out of a skill's name.
 */
const STOPWORDS: ReadonlySet<string> = new Set(
  (
    "about above after again also answer answered asked back been before being below between both came come could does done down each even from have having here into just like made make many more most much must only other over please replied reply said same should since some such than that their them then there these they this those through under until very want were what when where which while will with would your yours"
  ).split(" "),
);

/** One word's normal form: lower case, a plural "s" dropped ("invoices" → "invoice"). */
export function normaliseWord(raw: string): string | null {
  const w = raw.toLowerCase();
  if (w.length < MIN_TERM_CHARS || w.length > MAX_TERM_CHARS) return null;
  if (/^\p{N}+$/u.test(w)) return null; // a bare number is an id or a count, not a kind of work
  const stem = w.length > MIN_TERM_CHARS && w.endsWith("s") && !w.endsWith("ss") ? w.slice(0, -1) : w;
  return STOPWORDS.has(stem) || STOPWORDS.has(w) ? null : stem;
}

/** The distinct terms of a text, in first-seen order. */
export function normaliseTerms(text: string): string[] {
  const out = new Set<string>();
  for (const raw of text.match(/[\p{L}\p{N}_]+/gu) ?? []) {
    const w = normaliseWord(raw);
    if (w !== null) out.add(w);
  }
  return [...out];
}
