// Budget decisions, pure, by table (src/spend/budget.ts).
import { describe, expect, test } from "bun:test";
import { budgetsSchema } from "../../src/config/budgets.ts";
import { companySchema } from "../../src/config/company.ts";
import { add, capsFor, costMicros, crossesSoft, exhaustedWords, overCap, windowOf, ZERO } from "../../src/spend/budget.ts";

const iso = (s: string) => Date.parse(s);

describe("windowOf: the window's end on the company's clock and zone", () => {
  test.each([
    ["day", "2026-12-01T04:50:00Z", "UTC", "2026-12-02T00:00:00.000Z"],
    ["day", "2026-12-01T23:59:59Z", "UTC", "2026-12-02T00:00:00.000Z"],
    ["day", "2026-12-02T00:00:00Z", "UTC", "2026-12-03T00:00:00.000Z"],
    // Paris is UTC+1 in winter: its midnight is 23:00Z.
    ["day", "2026-12-01T22:59:00Z", "Europe/Paris", "2026-12-01T23:00:00.000Z"],
    ["day", "2026-12-01T23:00:00Z", "Europe/Paris", "2026-12-02T23:00:00.000Z"],
    // 2026-12-01 is a Tuesday: the week ends Monday 7 Dec.
    ["week", "2026-12-01T12:00:00Z", "UTC", "2026-12-07T00:00:00.000Z"],
    ["month", "2026-12-31T12:00:00Z", "UTC", "2027-01-01T00:00:00.000Z"],
    // DST: Paris goes to summer time on 29 March 2026; that day is 23 hours long.
    ["day", "2026-03-29T12:00:00Z", "Europe/Paris", "2026-03-29T22:00:00.000Z"],
    ["month", "2026-03-15T00:00:00Z", "America/New_York", "2026-04-01T04:00:00.000Z"],
  ] as const)("%s at %s in %s ends %s", (w, at, tz, end) => {
    expect(new Date(windowOf(w, iso(at), tz).reset_at).toISOString()).toBe(end);
  });
});

describe("capsFor: the org's caps and the seat's (override replaces default)", () => {
  const b = budgetsSchema.parse({
    org: { day: { tokens: 1000 }, month: { money: 50 } },
    seats: { default: { day: { tokens: 100 } }, overrides: { cto: { week: { money: 5 } } } },
  });
  test.each([
    ["dev", ["org day", "org month", "seat:dev day"]],
    ["cto", ["org day", "org month", "seat:cto week"]],
  ] as const)("%s", (h, want) => {
    expect(capsFor(b, h).map((c) => `${c.scope.kind === "org" ? "org" : `seat:${c.scope.handle}`} ${c.window}`)).toEqual([...want]);
  });
  test("no budgets → no caps", () => expect(capsFor(budgetsSchema.parse(undefined), "dev")).toEqual([]));
});

test.each([
  [{ input_tokens: 1_000_000, output_tokens: 0 }, { input_per_million: 3, output_per_million: 15 }, 3_000_000],
  [{ input_tokens: 1000, output_tokens: 500 }, { input_per_million: 3, output_per_million: 15 }, 10_500],
  [{ input_tokens: 1000, output_tokens: 500 }, undefined, 0],
] as const)("costMicros(%p, %p) = %p", (u, p, want) => expect(costMicros(u, p)).toBe(want));

describe("overCap: a call may not start at or over a cap", () => {
  const s = (tokens: number, micros = 0) => add(ZERO, { input_tokens: tokens, output_tokens: 0 }, micros);
  test.each([
    [s(99), { tokens: 100 }, null],
    [s(100), { tokens: 100 }, "tokens"],
    [s(150), { tokens: 100 }, "tokens"],
    [s(0, 4_999_999), { money: 5 }, null],
    [s(0, 5_000_000), { money: 5 }, "money"],
    [s(10, 5_000_000), { tokens: 100, money: 5 }, "money"],
    [s(0), { tokens: 0 }, "tokens"],
  ] as const)("%#", (spent, cap, want) => expect(overCap(spent, cap)).toBe(want));
});

test.each([
  [79, false],
  [80, true],
  [120, true],
] as const)("the soft alert at 0.8 of 100 tokens, spent %p → %p; never twice", (tokens, want) => {
  const after = add(ZERO, { input_tokens: tokens, output_tokens: 0 }, 0);
  expect(crossesSoft(after, { tokens: 100 }, 0.8)).toBe(want);
  expect(crossesSoft({ ...after, alerted: true }, { tokens: 100 }, 0.8)).toBe(false);
});

test("the words name the cap, the window and when it resets, in the company's zone", () => {
  const words = exhaustedWords(
    { scope: { kind: "seat", handle: "cto" }, window: "week", limit: "money", cap: { money: 5 }, spent: ZERO, reset_at: iso("2026-12-07T00:00:00Z") },
    "Europe/Paris",
  );
  expect(words).toBe("my (cto) weekly model budget of 5 in money is spent; it resets 7 Dec 2026, 01:00 (Europe/Paris) — or raise budgets.seats (cto, week)");
});

describe("config: company.budgets and pricing are checked with the field named", () => {
  const base = { name: "Acme", roles: [{ name: "CTO", handle: "cto" }, { name: "Founder", handle: "founder", kind: "human" }] };
  test.each([
    [{ budgets: { org: { day: {} } } }, "budgets.org.day"],
    [{ budgets: { org: { day: { tokens: -1 } } } }, "budgets.org.day.tokens"],
    [{ budgets: { soft_alert: 1.5 } }, "budgets.soft_alert"],
    [{ budgets: { seats: { overrides: { nobody: { day: { tokens: 1 } } } } } }, "budgets.seats.overrides.nobody"],
    [{ budgets: { seats: { overrides: { founder: { day: { tokens: 1 } } } } } }, "budgets.seats.overrides.founder"],
    [{ budgets: { org: { year: { tokens: 1 } } } }, "budgets.org"],
    [{ providers: { llm: { m: { type: "openai", model: "x", pricing: { input_per_million: -1, output_per_million: 1 } } } } }, "providers.llm.m.pricing.input_per_million"],
  ])("%# → %s", (extra, path) => {
    const r = companySchema.safeParse({ ...base, ...extra });
    expect(r.success).toBe(false);
    expect(r.error!.issues.map((i) => i.path.join("."))).toContain(path);
  });
  test("a valid one parses, soft_alert defaults to 0.8", () => {
    const r = companySchema.parse({ ...base, budgets: { org: { day: { tokens: 1000, money: 2.5 } }, seats: { overrides: { cto: { month: { tokens: 5 } } } } } });
    expect(r.budgets.soft_alert).toBe(0.8);
    expect(r.budgets.org.day).toEqual({ tokens: 1000, money: 2.5 });
  });
});
