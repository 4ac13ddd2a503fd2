// A proposed company change, applied by table: the next company, or the field that refuses it.
import { describe, expect, test } from "bun:test";
import { applyCompanyChange, companyChangeSchema } from "../../src/config/company-change.ts";
import { companySchema } from "../../src/config/company.ts";

const current = companySchema.parse({
  name: "Co",
  mission: "Ship",
  providers: { llm: { s: { type: "scripted" } } },
  default_llm: "s",
  roles: [
    { name: "CEO", handle: "ceo", manages: ["cto"] },
    { name: "CTO", handle: "cto" },
  ],
  units: [{ name: "Engineering", id: "engineering", roles: ["cto"], units: [{ name: "Platform", id: "platform" }] }],
});

const change = (c: unknown) => companyChangeSchema.parse(c);

describe("applyCompanyChange", () => {
  test("a hire joins its unit (however deep) and reports to its manager", () => {
    const out = applyCompanyChange(current, change({ kind: "hire", name: "Site Reliability", goal: "Keep it up", unit: "platform", manager: "cto" }));
    expect(out.ok).toBe(true);
    if (!out.ok) return;
    expect(out.company.roles.map((r) => r.handle)).toEqual(["ceo", "cto", "site-reliability"]);
    expect(out.company.roles.find((r) => r.handle === "cto")!.manages).toEqual(["site-reliability"]);
    expect(out.company.units[0]!.units![0]!.roles).toEqual(["site-reliability"]);
    expect(out.summary).toBe("hire Site Reliability in platform under @cto");
    // The active company is not touched.
    expect(current.roles).toHaveLength(2);
  });

  test.each([
    ["a handle taken", { kind: "hire", name: "Another", handle: "cto", goal: "x" }, /^roles\.2\.handle: duplicate handle "cto"/],
    ["an unknown unit", { kind: "hire", name: "Designer", goal: "x", unit: "design" }, /^unit: no unit "design"/],
    ["an unknown manager", { kind: "hire", name: "Designer", goal: "x", manager: "ghost" }, /^manager: no seat "ghost"/],
    ["an unknown provider", { kind: "hire", name: "Designer", goal: "x", llm: "gpt" }, /^roles\.2\.llm: unknown provider "gpt"/],
    ["a goal for nobody", { kind: "goal", target: "ghost", goal: "x" }, /^target: no seat "ghost"/],
  ] as const)("refused: %s", (_n, c, error) => {
    const out = applyCompanyChange(current, change(c));
    expect(out.ok).toBe(false);
    if (!out.ok) expect(out.error).toMatch(error);
  });

  test("a changed goal: the mission, or one seat's", () => {
    const mission = applyCompanyChange(current, change({ kind: "goal", target: "company", goal: "Ship safely" }));
    expect(mission.ok && mission.company.mission).toBe("Ship safely");
    const seat = applyCompanyChange(current, change({ kind: "goal", target: "cto", goal: "Pay down debt" }));
    expect(seat.ok && seat.company.roles.find((r) => r.handle === "cto")!.goal).toBe("Pay down debt");
  });

  test("a proposal itself is judged by its schema, naming the field", () => {
    const bad = companyChangeSchema.safeParse({ kind: "hire", name: "", goal: "x" });
    expect(bad.success).toBe(false);
    expect(bad.error!.issues[0]!.path).toEqual(["name"]);
    expect(companyChangeSchema.safeParse({ kind: "fire", who: "cto" }).success).toBe(false);
  });
});
