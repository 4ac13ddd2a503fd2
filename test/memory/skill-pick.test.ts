// Which skills a prompt carries, by table: the fit rule, the ranking, the bound and the budget.
import { describe, expect, test } from "bun:test";
import { MAX_PROMPT_SKILLS, pickSkills, type PromptSkill } from "../../src/memory/skill-pick.ts";

const k = (id: string, terms: string[], o: Partial<PromptSkill> = {}): PromptSkill => ({ id, name: terms.join(", "), kind: "learned", terms, body: `About ${terms.join(" and ")}.`, state: "active", uses: 0, ...o });

describe("pickSkills", () => {
  test.each([
    ["half the terms fit (rounded up)", "please refund this", [k("a", ["invoice", "refund"])], ["a"]],
    ["none fit", "how is the motor order", [k("a", ["invoice", "refund"])], []],
    ["one of three is not half", "refund it", [k("a", ["invoice", "refund", "customer"])], []],
    ["more terms fitting ranks first", "refund the invoice", [k("a", ["refund", "payment"]), k("b", ["invoice", "refund"])], ["b", "a"]],
    ["active before stale on a tie", "refund", [k("a", ["refund"], { state: "stale", uses: 9 }), k("b", ["refund"])], ["b", "a"]],
    ["more used first on a tie", "refund", [k("a", ["refund"], { uses: 1 }), k("b", ["refund"], { uses: 4 })], ["b", "a"]],
    ["tool skills fit the same way", "deploy to staging", [k("t", ["deploy", "staging"], { kind: "tool" })], ["t"]],
  ] as const)("%s", (_, text, cands, want) => {
    expect(pickSkills(text, cands).picked.map((s) => s.id)).toEqual([...want]);
  });

  test(`at most ${MAX_PROMPT_SKILLS} are carried`, () => {
    const many = Array.from({ length: 6 }, (_, i) => k(`s${i}`, ["refund"]));
    expect(pickSkills("refund", many).picked).toHaveLength(MAX_PROMPT_SKILLS);
  });

  test("a body over the token budget is passed over, a smaller one still fits", () => {
    const big = k("big", ["refund"], { uses: 9, body: "x ".repeat(2_000) });
    const small = k("small", ["refund"]);
    const r = pickSkills("refund", [big, small], 100);
    expect(r.picked.map((s) => s.id)).toEqual(["small"]);
    expect(r.block).toContain("[skill: refund]");
  });

  test("nothing fits: no block", () => {
    expect(pickSkills("hello", [k("a", ["refund"])]).block).toBeNull();
  });
});
