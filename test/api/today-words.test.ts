// The Today view's words (src/api/dashboard/today-words.js), by table: what woke a turn,
// its tools, cost and duration, a day's tallies (priced and unpriced turns apart), and
// receipts grouped per seat, newest first.
import { expect, test } from "bun:test";
import { bySeat, costWords, durationWords, outcomeKind, tallies, tallyWords, toolsWords, triggerWords } from "../../src/api/dashboard/today-words.js";

const trig = (type: string, conversation: string, count = 1) => ({ type, from: "founder", conversation, count });

test.each([
  [trig("chat_mention", "chat:general:m1"), "founder mentioned it in #general"],
  [trig("chat_mention", "chat:general:m1", 3), "founder mentioned it in #general (and 2 more)"],
  [trig("chat_direct", "chat:dm.cto.founder:m1"), "founder wrote to it directly"],
  [trig("task_assigned", "work:ENG-3"), "ENG-3 assigned by founder"],
  [trig("task_comment", "work:ENG-3"), "founder commented on ENG-3"],
  [{ ...trig("a2a_request", "a2a:x"), from: "ceo" }, "@ceo asked it"],
  [trig("schedule", "schedule:standup"), "a schedule fired"],
  [trig("sandbox_run", "chat:general:m1"), "a coding run's result in #general"],
  [trig("approval_decided", "chat:general:m1"), "founder decided on a call it asked approval for"],
  [trig("something_new", "x:y"), "something new from founder"],
])("trigger %j reads %p", (t, want) => {
  expect(triggerWords(t)).toBe(want);
});

test("tools, cost, duration and outcome kinds", () => {
  expect(toolsWords([])).toBe("no tools");
  expect(toolsWords([{ name: "work_create", calls: 1, errors: 0 }, { name: "chat_post", calls: 2, errors: 1 }])).toBe("work_create, chat_post ×2 (1 failed)");
  expect(costWords(null)).toBe("unpriced");
  expect(costWords(12_345)).toBe("0.0123");
  expect(costWords(2_500_000)).toBe("2.50");
  expect([500, 42_000, 185_000, 7_440_000].map(durationWords)).toEqual(["<1 s", "42 s", "3 min 5 s", "2 h 4 min"]);
  expect(["completed", "round_limit", "retry", "deferred", "failed", "budget_exhausted", "stopped", "new_thing"].map(outcomeKind)).toEqual(["done", "done", "passing", "passing", "trouble", "trouble", "trouble", "trouble"]);
});

const r = (seat: string, ended_at: number, cost_micros: number | null, outcome = "completed") => ({ seat, ended_at, input_tokens: 100, output_tokens: 10, cost_micros, outcome });

test("tallies: priced cost summed, unpriced turns counted apart, troubled turns counted", () => {
  const t = tallies([r("cto", 1, 1_000), r("cto", 2, null), r("pm", 3, 2_000, "failed")]);
  expect(t).toEqual({ turns: 3, input_tokens: 300, output_tokens: 30, cost_micros: 3_000, unpriced: 1, trouble: 1 });
  expect(tallyWords(t)).toBe("3 turns · 300 tokens in / 30 out · cost 0.0030 (1 turn unpriced) · 1 did not finish");
  expect(tallyWords(tallies([r("cto", 1, null)]))).toBe("1 turn · 100 tokens in / 10 out · cost unpriced (no price configured for its model)");
  expect(tallyWords(tallies([]))).toBe("0 turns · 0 tokens in / 0 out · cost 0");
});

test("bySeat: every named seat (even idle), then others; each newest first", () => {
  const g = bySeat([r("cto", 1, null), r("gone", 5, null), r("cto", 9, null)], ["ceo", "cto"]);
  expect(g.map((x) => [x.seat, x.receipts.map((y) => y.ended_at)])).toEqual([["ceo", []], ["cto", [9, 1]], ["gone", [5]]]);
});
