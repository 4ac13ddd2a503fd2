// The approval rules, by table: which calls need a person's yes (matchRule), who may
// propose company changes, and config problems named by their field.
import { describe, expect, test } from "bun:test";
import { approvalReferenceProblems, approvalsSchema, COMPANY_CHANGE_TOOL, matchRule, mayProposeChanges, type CallFacts } from "../../src/config/approvals.ts";

const rules = approvalsSchema.parse({
  rules: [
    { name: "github writes", tools: ["github_*"] },
    { name: "mcp writes", tools: ["mcp:*"], units: ["engineering"] },
    { name: "costly", spend_over: 2 },
    { name: "hires", company_changes: true, seats: ["ceo"] },
  ],
}).rules;

const call = (o: Partial<CallFacts>): CallFacts => ({ tool: "work_create", source: "builtin", readOnly: false, seat: "cto", units: [], spent: null, ...o });

describe("matchRule", () => {
  test.each([
    ["a read-only call never waits", call({ tool: "github_issue_create", readOnly: true }), null],
    ["a glob names the tool", call({ tool: "github_issue_create" }), "github writes"],
    ["a tool no rule names runs", call({ tool: "chat_post" }), null],
    ["an MCP write in the unit", call({ tool: "files_write", source: "mcp", units: ["engineering"] }), "mcp writes"],
    ["an MCP write outside the unit", call({ tool: "files_write", source: "mcp", units: ["ops"] }), null],
    ["a builtin is not mcp:*", call({ tool: "files_write", units: ["engineering"] }), null],
    ["spend at the amount does not match", call({ spent: 2 }), null],
    ["spend over the amount matches any write", call({ spent: 2.01 }), "costly"],
    ["unpriced spend never matches", call({ spent: null }), null],
    ["a company change by the ceo", call({ tool: COMPANY_CHANGE_TOOL, seat: "ceo" }), "hires"],
    ["a company change by another seat matches no rule", call({ tool: COMPANY_CHANGE_TOOL, seat: "cto", spent: 5 }), null],
  ] as const)("%s", (_n, facts, want) => {
    expect(matchRule(rules, facts)?.name ?? null).toBe(want);
  });

  test("the first covering rule names it; an unnamed rule is named by its place", () => {
    const r = approvalsSchema.parse({ rules: [{ tools: ["deploy"] }, { name: "all" }] }).rules;
    expect(matchRule(r, call({ tool: "deploy" }))).toEqual({ index: 0, name: "rules[0]" });
    expect(matchRule(r, call({ tool: "chat_post" }))).toEqual({ index: 1, name: "all" });
  });

  test("no rules: nothing waits, and nobody is offered company changes", () => {
    const none = approvalsSchema.parse(undefined);
    expect(none).toEqual({ expires_after_hours: 72, rules: [] });
    expect(matchRule(none.rules, call({ tool: "github_issue_create" }))).toBeNull();
    expect(mayProposeChanges(none.rules, "ceo", [])).toBe(false);
    expect(mayProposeChanges(rules, "ceo", [])).toBe(true);
    expect(mayProposeChanges(rules, "cto", [])).toBe(false);
  });
});

describe("config problems name their field", () => {
  test.each([
    [{ rules: [{ tools: ["bad name!"] }] }, "rules.0.tools.0"],
    [{ rules: [{ tools: [] }] }, "rules.0.tools"],
    [{ rules: [{ company_changes: true, tools: ["x"] }] }, "rules.0"],
    [{ expires_after_hours: 0 }, "expires_after_hours"],
    [{ rules: [{ frobnicate: 1 }] }, "rules.0"],
  ] as const)("%j", (input, path) => {
    const parsed = approvalsSchema.safeParse(input);
    expect(parsed.success).toBe(false);
    expect(parsed.error!.issues[0]!.path.join(".")).toBe(path);
  });

  test("unknown seats and units", () => {
    const a = approvalsSchema.parse({ rules: [{ seats: ["ceo", "ghost"], units: ["nowhere"] }] });
    expect(approvalReferenceProblems(a, new Set(["ceo"]), new Set(["engineering"]))).toEqual([
      { path: ["approvals", "rules", 0, "seats", 1], message: 'unknown handle "ghost"' },
      { path: ["approvals", "rules", 0, "units", 0], message: 'unknown unit id "nowhere"' },
    ]);
  });
});
