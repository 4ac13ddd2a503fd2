// Types of company-diff.js (plain JavaScript run in the browser) for its bun tests.
export const DIFF_LINES_MAX: number;
export interface DiffLine {
  path: string;
  kind: "added" | "removed" | "changed";
  before?: string;
  after?: string;
}
export function companyDiff(before: unknown, after: unknown): { lines: DiffLine[]; truncated: number };
/** Imported `with { type: "text" }` (src/api/dashboard/index.ts), the file's source. */
declare const source: string;
export default source;
