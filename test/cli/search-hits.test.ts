// How the CLI prints a search answer: hits a line each, "no … matched" for an answer of
// none, and "could not be searched" when nobody could search — never read as "none".
import { expect, test } from "bun:test";
import { formatHits } from "../../src/cli/search-hits.ts";

const line = (h: { key: string }) => h.key;
test.each([
  ["hits, best first", { searched: true, hits: [{ key: "ENG-2" }, { key: "ENG-1" }] }, "ENG-2\nENG-1"],
  ["nothing matched", { searched: true, hits: [] }, "no work items matched"],
  ["nobody could search", { searched: false, hits: [] }, "work items could not be searched: no data node answered"],
] as const)("formatHits: %s", (_name, answer, want) => {
  expect(formatHits("work items", { searched: answer.searched, hits: [...answer.hits] }, line)).toBe(want);
});
