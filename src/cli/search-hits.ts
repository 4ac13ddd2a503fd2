// How `crewlet work search` and `crewlet chat search` print an answer: one line a hit,
// best first, and "could not be searched" — never "no matches" — when no data node could
// search (Scaling Out: a search is best effort, and says so).

export function formatHits(what: string, answer: { searched: boolean; hits: unknown[] }, line: (hit: never) => string): string {
  if (!answer.searched) return `${what} could not be searched: no data node answered`;
  if (answer.hits.length === 0) return `no ${what} matched`;
  return answer.hits.map((h) => line(h as never)).join("\n");
}
