// A scope's spend per day (GET /budgets/history): the day counters read back newest first,
// one per calendar day in the company's time zone (DST days included). Every round is
// charged to its seat's and the org's day records whatever the caps (dayTallyKeys).
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { systemClock, type Clock } from "../../src/clock.ts";
import { budgetsSchema } from "../../src/config/budgets.ts";
import { MemoryCoordination } from "../../src/coord/index.ts";
import { memoryLogger } from "../../src/log.ts";
import { windowOf } from "../../src/spend/budget.ts";
import { BudgetCounters, counterKey } from "../../src/spend/counters.ts";

const { log } = memoryLogger("warn");
const budgets = budgetsSchema.parse({ org: { week: { tokens: 1_000_000 } }, seats: { default: { day: { tokens: 1_000_000 } } } });

function counters(clock: Clock, timezone = "UTC", caps = budgets) {
  const slot = new MemoryCoordination({ clock, log }).node({}).slot("budgets");
  const c = new BudgetCounters({ db: new Database(":memory:", { strict: true }), slot, clock, log, budgets: () => caps, timezone: () => timezone, pricing: () => ({ input_per_million: 2, output_per_million: 10 }) });
  return { c, slot };
}

test("a seat's days, newest first: today's charge, yesterday's record, an empty day; the org's days are tallied without a day cap", async () => {
  const { c, slot } = counters(systemClock);
  await c.charge("cto", "llm", { input_tokens: 100, output_tokens: 20 });
  const today = windowOf("day", Date.now(), "UTC").reset_at;
  // Yesterday's record as another day's charges left it.
  const todayRecord = (await slot.get(counterKey({ kind: "seat", handle: "cto" }, "day", today)))!.value;
  await slot.put(counterKey({ kind: "seat", handle: "cto" }, "day", today - 86_400_000), todayRecord);
  const h = await c.history({ kind: "seat", handle: "cto" }, 3);
  expect(h.counted).toBe(true);
  expect(h.days.map((d) => [d.reset_at, d.input_tokens + d.output_tokens, d.cost_micros])).toEqual([
    [today, 120, 400],
    [today - 86_400_000, 120, 400],
    [today - 2 * 86_400_000, 0, 0],
  ]);
  const org = await c.history({ kind: "org" }, 2);
  expect(org.counted).toBe(true);
  expect(org.days.map((d) => [d.input_tokens, d.cost_micros])).toEqual([[100, 400], [0, 0]]);
  // The seat's day cap and its tally are one record: charged once, not twice.
  expect((await c.history({ kind: "seat", handle: "cto" }, 1)).days[0]!.input_tokens).toBe(100);
});

test("with no cap at all, every round still lands on its seat's and the org's day; turns of two seats add up on the org", async () => {
  const { c, slot } = counters(systemClock, "UTC", budgetsSchema.parse({}));
  await c.charge("eng", "llm", { input_tokens: 1_000, output_tokens: 100 });
  await c.charge("eng", "llm", { input_tokens: 10, output_tokens: 0 });
  await c.charge("pm", "llm", { input_tokens: 5, output_tokens: 5 });
  expect(c.pendingCount()).toBe(0);
  const eng = await c.history({ kind: "seat", handle: "eng" }, 30);
  expect(eng.days).toHaveLength(30);
  expect([eng.days[0]!.input_tokens, eng.days[0]!.output_tokens, eng.days[0]!.cost_micros]).toEqual([1_010, 100, 3_020]);
  expect(eng.days.slice(1).every((d) => d.input_tokens === 0)).toBe(true);
  const org = await c.history({ kind: "org" }, 30);
  expect([org.days[0]!.input_tokens, org.days[0]!.output_tokens]).toEqual([1_015, 105]);
  // Only day records were written: a tally is no cap (no week/month record, no alert mark).
  expect((await slot.keys()).sort()).toEqual([
    counterKey({ kind: "org" }, "day", eng.days[0]!.reset_at),
    counterKey({ kind: "seat", handle: "eng" }, "day", eng.days[0]!.reset_at),
    counterKey({ kind: "seat", handle: "pm" }, "day", eng.days[0]!.reset_at),
  ].sort());
  // And a seat with no cap is never refused by its tally.
  expect(await c.check("eng")).toBeNull();
});

test("one window per calendar day across a DST change (Europe/Paris, 23 h and 25 h days)", async () => {
  // 2026-03-30 12:00 UTC: back over the spring change (29 March, 23 h) and beyond.
  const at = Date.UTC(2026, 2, 30, 12);
  const clock = { ...systemClock, now: () => at } as Clock;
  const { c } = counters(clock, "Europe/Paris");
  const h = await c.history({ kind: "seat", handle: "cto" }, 4);
  const resets = h.days.map((d) => new Date(d.reset_at).toISOString());
  // Each reset is a local midnight: 22:00 UTC in summer time, 23:00 UTC in winter time.
  expect(resets).toEqual(["2026-03-30T22:00:00.000Z", "2026-03-29T22:00:00.000Z", "2026-03-28T23:00:00.000Z", "2026-03-27T23:00:00.000Z"]);
});
