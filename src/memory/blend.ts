// Blending the lexical rank (FTS5 bm25) with vector similarity (cosine) into one order for
// memory_search. Pure: candidates in, an ordered list out; the table in
// test/memory/blend.test.ts holds every rule below.

/** Lexical 0.4, vector 0.6: the vector finds a note in other words ("vendor" for
 * "supplier"), which bm25 cannot score, so it leads; the lexical part lifts exact names and
 * keys, and a top lexical hit with a middling vector (0.7) still beats no lexical match (0.3). */
export const LEXICAL_WEIGHT = 0.4;
export const VECTOR_WEIGHT = 0.6;

export interface LexicalCandidate {
  key: string;
  /** bm25 as FTS5 gives it: negative, lower is better. */
  bm25: number;
}
export interface VectorCandidate {
  key: string;
  cosine: number;
}
export interface Blended {
  key: string;
  score: number;
  lexical: number;
  vector: number;
}

/** Cosine similarity of two vectors of one width; 0 when either is all zeros or widths differ. */
export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length || a.length === 0) return 0;
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}

/**
 * bm25 scores onto [0, 1] within one answer: the best 1, the worst of several 0 … but a
 * lone hit, or hits all equal, are each 1 — matching every query word is worth full marks.
 * bm25 has no fixed scale (it grows with the corpus), so only the order within one answer
 * means anything.
 */
export function normaliseBm25(ranks: readonly number[]): number[] {
  if (ranks.length === 0) return [];
  const best = Math.min(...ranks);
  const worst = Math.max(...ranks);
  if (best === worst) return ranks.map(() => 1);
  return ranks.map((r) => (worst - r) / (worst - best));
}

/**
 * One order from both lists: score = LEXICAL_WEIGHT × normalised bm25 + VECTOR_WEIGHT ×
 * cosine (clamped to [0, 1]: an opposite vector is no match, not a penalty). A candidate
 * missing from a list scores 0 there. Ties keep the lexical order, then the vector order.
 */
export function blend(lexical: readonly LexicalCandidate[], vectors: readonly VectorCandidate[], limit: number): Blended[] {
  const lex = normaliseBm25(lexical.map((c) => c.bm25));
  const byKey = new Map<string, Blended & { order: number }>();
  lexical.forEach((c, i) => byKey.set(c.key, { key: c.key, lexical: lex[i]!, vector: 0, score: 0, order: i }));
  vectors.forEach((c, i) => {
    const v = Math.max(0, Math.min(1, c.cosine));
    const had = byKey.get(c.key);
    if (had) had.vector = v;
    else byKey.set(c.key, { key: c.key, lexical: 0, vector: v, score: 0, order: lexical.length + i });
  });
  const all = [...byKey.values()];
  for (const b of all) b.score = LEXICAL_WEIGHT * b.lexical + VECTOR_WEIGHT * b.vector;
  all.sort((x, y) => y.score - x.score || x.order - y.order);
  return all.slice(0, Math.max(0, limit)).map(({ key, score, lexical: l, vector: v }) => ({ key, score, lexical: l, vector: v }));
}
