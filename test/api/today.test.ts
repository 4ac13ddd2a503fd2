// The Today view's pure rules and GET /turns' query, as tables: which work in progress is
// stuck, the days a week covers, a week laid out per seat, and each bad query naming its field.
import { describe, expect, test } from "bun:test";
import { daysEnding, stuckWork, weekGrid, type WorkLike } from "../../src/api/today.ts";
import { turnsQuery, weekQuery } from "../../src/api/routes/turns.ts";
import { fromZod } from "../../src/api/errors.ts";
import { companySchema } from "../../src/config/company.ts";
import { DEFAULT_STUCK_AFTER_MINUTES } from "../../src/config/today.ts";

const HOUR = 3_600_000;
const NOW = Date.UTC(2026, 11, 6, 12, 0);
const item = (key: string, o: Partial<WorkLike> = {}): WorkLike => ({ key, title: `t ${key}`, status: "in_progress", assignee: "cto", updated_at: NOW - 5 * HOUR, ...o });

describe("stuckWork", () => {
  const agents = new Set(["cto", "engineer"]);
  const cases: { name: string; items: WorkLike[]; lastTurn?: Record<string, number>; want: string[] }[] = [
    { name: "in progress, quiet past the limit, an agent's: stuck", items: [item("ENG-1")], want: ["ENG-1"] },
    { name: "a turn on it within the limit: not stuck", items: [item("ENG-1")], lastTurn: { "ENG-1": NOW - HOUR }, want: [] },
    { name: "an old turn and an old change: stuck", items: [item("ENG-1")], lastTurn: { "ENG-1": NOW - 3 * HOUR }, want: ["ENG-1"] },
    { name: "changed recently (a person moved it): not stuck", items: [item("ENG-1", { updated_at: NOW - 10 * 60_000 })], want: [] },
    { name: "exactly at the limit: stuck (the limit is 'for this long')", items: [item("ENG-1", { updated_at: NOW - 2 * HOUR })], want: ["ENG-1"] },
    { name: "a person's work: not the agents' to move", items: [item("ENG-1", { assignee: "founder" })], want: [] },
    { name: "unassigned: nobody's", items: [item("ENG-1", { assignee: null })], want: [] },
    { name: "todo or in review: not in progress", items: [item("ENG-1", { status: "todo" }), item("ENG-2", { status: "in_review" })], want: [] },
    { name: "quietest first", items: [item("ENG-1"), item("ENG-2", { updated_at: NOW - 9 * HOUR })], want: ["ENG-2", "ENG-1"] },
  ];
  for (const c of cases) {
    test(c.name, () => {
      expect(stuckWork({ items: c.items, lastTurn: c.lastTurn ?? {}, agents, now_ms: NOW, after_ms: 2 * HOUR }).map((s) => s.key)).toEqual(c.want);
    });
  }
  test("says when it last moved and how long it has been quiet", () => {
    const [s] = stuckWork({ items: [item("ENG-1")], lastTurn: { "ENG-1": NOW - 3 * HOUR }, agents, now_ms: NOW, after_ms: HOUR });
    expect(s).toEqual({ key: "ENG-1", title: "t ENG-1", assignee: "cto", last_moved_at: NOW - 3 * HOUR, last_turn_at: NOW - 3 * HOUR, quiet_ms: 3 * HOUR });
  });
});

test("daysEnding: n calendar days, oldest first, across a month's end", () => {
  expect(daysEnding("2026-03-02", 4)).toEqual(["2026-02-27", "2026-02-28", "2026-03-01", "2026-03-02"]);
  expect(daysEnding("2026-12-06", 1)).toEqual(["2026-12-06"]);
});

test("weekGrid: every seat, every day, zeros where nothing ran; a removed seat's receipts still shown", () => {
  const days = ["2026-12-05", "2026-12-06"];
  const grid = weekGrid(["cto", "engineer"], days, [
    { seat: "cto", day: "2026-12-06", turns: 3, outcomes: { completed: 2, failed: 1 } },
    { seat: "gone", day: "2026-12-05", turns: 1, outcomes: { completed: 1 } },
    { seat: "cto", day: "2026-11-01", turns: 9, outcomes: { completed: 9 } },
  ]);
  expect(grid.map((r) => [r.seat, r.turns])).toEqual([["cto", 3], ["engineer", 0], ["gone", 1]]);
  expect(grid[0]!.days).toEqual([{ day: "2026-12-05", turns: 0, outcomes: {} }, { day: "2026-12-06", turns: 3, outcomes: { completed: 2, failed: 1 } }]);
});

describe("GET /turns query", () => {
  const parse = (q: Record<string, string>) => {
    const r = turnsQuery.safeParse(q);
    return r.success ? { ok: true as const, data: r.data } : { ok: false as const, message: fromZod(r.error, "query").message, field: fromZod(r.error, "query").field };
  };
  test("times as ms or ISO date-times; defaults", () => {
    expect(parse({})).toEqual({ ok: true, data: { limit: 100 } });
    expect(parse({ since: "2026-12-06T08:00:00Z", until: "1796630400000", seat: "cto", outcome: "failed", cursor: "42", limit: "5", day: "2026-12-06" })).toEqual({
      ok: true,
      data: { since: Date.UTC(2026, 11, 6, 8), until: 1796630400000, seat: "cto", outcome: "failed", cursor: 42, limit: 5, day: "2026-12-06" },
    });
    expect(parse({ since: "2026-12-06T09:00:00+01:00" })).toEqual({ ok: true, data: { since: Date.UTC(2026, 11, 6, 8), limit: 100 } });
  });
  const bad: [Record<string, string>, string][] = [
    [{ since: "yesterday" }, "since"],
    [{ since: "2026-12-06" }, "since"],
    [{ until: "2026-13-40T00:00:00Z" }, "until"],
    [{ since: "2000", until: "1000" }, "since"],
    [{ seat: "Not A Seat" }, "seat"],
    [{ outcome: "DROP TABLE" }, "outcome"],
    [{ cursor: "0" }, "cursor"],
    [{ limit: "501" }, "limit"],
    [{ limit: "ten" }, "limit"],
    [{ day: "2026-02-30" }, "day"],
    [{ sort: "asc" }, "sort"],
  ];
  for (const [q, field] of bad) {
    test(`${JSON.stringify(q)} is refused naming ${field}`, () => {
      const r = parse(q);
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.field).toBe(field);
        expect(r.message.startsWith(`query.${field}: `)).toBe(true);
      }
    });
  }
  test("week: 7 days by default, a month at most", () => {
    expect(weekQuery.parse({})).toEqual({ days: 7 });
    expect(weekQuery.safeParse({ days: "32" }).success).toBe(false);
  });
});

test("company.today: the stuck limit defaults, and a bad one names its path", () => {
  const base = { name: "Co", roles: [{ name: "CTO", handle: "cto" }] };
  expect(companySchema.parse(base).today.stuck_after_minutes).toBe(DEFAULT_STUCK_AFTER_MINUTES);
  expect(companySchema.parse({ ...base, today: { stuck_after_minutes: 30 } }).today.stuck_after_minutes).toBe(30);
  const bad = companySchema.safeParse({ ...base, today: { stuck_after_minutes: 0 } });
  expect(bad.success ? null : bad.error.issues[0]!.path).toEqual(["today", "stuck_after_minutes"]);
});
