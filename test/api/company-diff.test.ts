// The config view's diff between two company revisions (src/api/dashboard/company-diff.js):
// a field changed, a role added among others, a list without names, a rewrite past the cap.
import { expect, test } from "bun:test";
import { DIFF_LINES_MAX, companyDiff } from "../../src/api/dashboard/company-diff.js";

const base = {
  name: "Acme",
  roles: [
    { name: "CEO", handle: "ceo", goal: "Run it" },
    { name: "CTO", handle: "cto", goal: "Build it", tools: ["web"] },
  ],
};

test("identical revisions differ in nothing", () => {
  expect(companyDiff(base, structuredClone(base))).toEqual({ lines: [], truncated: 0 });
});

test("a changed goal and a role inserted first: one change, one role added, nothing shifted", () => {
  const next = structuredClone(base);
  next.roles[1]!.goal = "Build it well";
  next.roles.unshift({ name: "PM", handle: "pm", goal: "Plan it" });
  expect(companyDiff(base, next).lines).toEqual([
    { path: "roles[cto].goal", kind: "changed", before: '"Build it"', after: '"Build it well"' },
    { path: "roles[pm].goal", kind: "added", after: '"Plan it"' },
    { path: "roles[pm].handle", kind: "added", after: '"pm"' },
    { path: "roles[pm].name", kind: "added", after: '"PM"' },
  ]);
});

test("lists without names go by position; removals and emptied lists show", () => {
  const next = structuredClone(base) as any;
  next.roles[1].tools = [];
  delete next.roles[0].goal;
  expect(companyDiff(base, next).lines).toEqual([
    { path: "roles[ceo].goal", kind: "removed", before: '"Run it"' },
    { path: "roles[cto].tools", kind: "added", after: "[]" },
    { path: "roles[cto].tools[0]", kind: "removed", before: '"web"' },
  ]);
});

test("a rewrite past the cap is cut and says by how many", () => {
  const many = (p: string) => Object.fromEntries(Array.from({ length: DIFF_LINES_MAX + 20 }, (_, i) => [`k${i}`, `${p}${i}`]));
  const d = companyDiff(many("a"), many("b"));
  expect(d.lines.length).toBe(DIFF_LINES_MAX);
  expect(d.truncated).toBe(20);
});
