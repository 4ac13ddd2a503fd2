// The blending rule of memory_search (src/memory/blend.ts), by table: cosine, bm25
// normalised within one answer, and the weighted order of both lists.
import { expect, test } from "bun:test";
import { blend, cosine, LEXICAL_WEIGHT, normaliseBm25, VECTOR_WEIGHT, type LexicalCandidate, type VectorCandidate } from "../../src/memory/blend.ts";

test.each([
  ["same direction", [1, 2, 3], [2, 4, 6], 1],
  ["opposite", [1, 0], [-1, 0], -1],
  ["orthogonal", [1, 0], [0, 1], 0],
  ["a zero vector is no similarity", [0, 0], [1, 1], 0],
  ["widths differ", [1, 2], [1, 2, 3], 0],
  ["empty", [], [], 0],
] as const)("cosine: %s", (_name, a, b, want) => {
  expect(cosine(a, b)).toBeCloseTo(want, 9);
});

test.each([
  ["none", [], []],
  ["a lone hit is full marks", [-3.2], [1]],
  ["equal hits are all full marks", [-2, -2], [1, 1]],
  ["best 1, worst 0, between in proportion", [-4, -3, -2], [1, 0.5, 0]],
] as const)("normaliseBm25: %s", (_name, ranks, want) => {
  expect(normaliseBm25(ranks)).toEqual([...want]);
});

test("the weights sum to one, the vector leading", () => {
  expect(LEXICAL_WEIGHT + VECTOR_WEIGHT).toBeCloseTo(1, 12);
  expect(VECTOR_WEIGHT).toBeGreaterThan(LEXICAL_WEIGHT);
});

const L = (key: string, bm25: number): LexicalCandidate => ({ key, bm25 });
const V = (key: string, c: number): VectorCandidate => ({ key, cosine: c });
const cases: [string, LexicalCandidate[], VectorCandidate[], number, string[]][] = [
  ["nothing in, nothing out", [], [], 5, []],
  ["lexical only keeps the lexical order", [L("a", -5), L("b", -3), L("c", -1)], [], 5, ["a", "b", "c"]],
  ["vectors only order by cosine", [], [V("x", 0.2), V("y", 0.9)], 5, ["y", "x"]],
  ["a paraphrase (vector only, 0.9) beats a weak lexical hit with no vector", [L("a", -5), L("weak", -1)], [V("para", 0.9)], 2, ["para", "a"]],
  ["the top lexical hit with a middling vector beats a middling vector alone", [L("a", -5)], [V("a", 0.5), V("b", 0.5)], 5, ["a", "b"]],
  ["both halves agreeing lead", [L("a", -5), L("b", -4)], [V("b", 0.95), V("a", 0.1)], 5, ["b", "a"]],
  ["a negative cosine counts as none, not less", [L("a", -2), L("b", -2)], [V("a", -0.9)], 5, ["a", "b"]],
  ["ties keep the lexical order", [L("a", -2), L("b", -2)], [V("a", 0.5), V("b", 0.5)], 5, ["a", "b"]],
  ["the limit cuts after the order", [L("a", -3), L("b", -2), L("c", -1)], [V("c", 1)], 2, ["c", "a"]],
  ["a zero limit answers nothing", [L("a", -3)], [], 0, []],
];
test.each(cases)("blend: %s", (_name, lexical, vectors, limit, want) => {
  expect(blend(lexical, vectors, limit).map((b) => b.key)).toEqual(want);
});

test("blend: the score is the weighted sum of both halves", () => {
  const [top] = blend([L("a", -5), L("b", -1)], [V("a", 0.5)], 1);
  expect(top).toEqual({ key: "a", lexical: 1, vector: 0.5, score: LEXICAL_WEIGHT * 1 + VECTOR_WEIGHT * 0.5 });
});
