// Budget decisions, PURE (table-tested in test/spend/budget.test.ts): which caps apply to a
// seat, the window a moment falls in on the company's clock and time zone, what a round
// costs, whether a call may start, when the soft alert fires. The counters' I/O is
// counters.ts; the words a person reads are here too, so they are tested with the rest.
import { Cron } from "croner";
import type { Budgets, BudgetWindow, Cap, Pricing } from "../config/budgets.ts";
import { WINDOWS } from "../config/budgets.ts";

/** Money is counted in millionths of pricing's unit, so sums over any number of rounds are
 *  exact integers (a float sum across nodes would drift and never compare equal). */
export const MICROS = 1_000_000;

/** Windows start at local midnight: a day at 00:00, a week on Monday 00:00 (ISO weeks),
 *  a month on the 1st at 00:00, all in the company's time zone. */
const WINDOW_CRON: Record<BudgetWindow, string> = { day: "0 0 0 * * *", week: "0 0 0 * * 1", month: "0 0 0 1 * *" };

export interface WindowSpan {
  window: BudgetWindow;
  /** When this window ends and the next starts (ms). Also the window's identity. */
  reset_at: number;
}

/** The window `now` falls in: [previous boundary, reset_at). DST-safe (croner works in the zone). */
export function windowOf(window: BudgetWindow, now_ms: number, timezone: string): WindowSpan {
  const next = new Cron(WINDOW_CRON[window], { paused: true, timezone }).nextRun(new Date(now_ms));
  if (!next) throw new Error(`no next ${window} boundary after ${new Date(now_ms).toISOString()} in ${timezone}`);
  return { window, reset_at: next.getTime() };
}

export type Scope = { kind: "org" } | { kind: "seat"; handle: string };

export function scopeName(s: Scope): string {
  return s.kind === "org" ? "org" : `seat:${s.handle}`;
}

export interface AppliedCap {
  scope: Scope;
  window: BudgetWindow;
  cap: Cap;
}

/** Every cap a seat's model call is held to: the org's, and the seat's (override, else default). */
export function capsFor(b: Budgets, handle: string): AppliedCap[] {
  const out: AppliedCap[] = [];
  const seatCaps = b.seats.overrides[handle] ?? b.seats.default;
  for (const w of WINDOWS) {
    const org = b.org[w];
    if (org) out.push({ scope: { kind: "org" }, window: w, cap: org });
  }
  for (const w of WINDOWS) {
    const mine = seatCaps[w];
    if (mine) out.push({ scope: { kind: "seat", handle }, window: w, cap: mine });
  }
  return out;
}

export interface Usage {
  input_tokens: number;
  output_tokens: number;
}

/** A round's cost in micros; a model without pricing costs nothing in money (tokens still count). */
export function costMicros(u: Usage, pricing: Pricing | undefined): number {
  if (!pricing) return 0;
  // input_per_million × tokens / 1e6 in units = input_per_million × tokens in micros.
  return Math.round(u.input_tokens * pricing.input_per_million + u.output_tokens * pricing.output_per_million);
}

/** One (scope, window)'s counter as stored. */
export interface Spent {
  input_tokens: number;
  output_tokens: number;
  cost_micros: number;
  /** Rounds charged (for the "no lost charge" check and the bench). */
  charges: number;
  /** The soft alert fired for this window (set by the one write that crossed it). */
  alerted: boolean;
}

export const ZERO: Spent = { input_tokens: 0, output_tokens: 0, cost_micros: 0, charges: 0, alerted: false };

export function add(s: Spent, u: Usage, cost: number): Spent {
  return {
    input_tokens: s.input_tokens + u.input_tokens,
    output_tokens: s.output_tokens + u.output_tokens,
    cost_micros: s.cost_micros + cost,
    charges: s.charges + 1,
    alerted: s.alerted,
  };
}

/** The highest fraction of its cap a counter has used (tokens or money, whichever is nearer). */
export function fractionUsed(s: Spent, cap: Cap): number {
  let f = 0;
  if (cap.tokens !== undefined) f = Math.max(f, cap.tokens === 0 ? Infinity : (s.input_tokens + s.output_tokens) / cap.tokens);
  if (cap.money !== undefined) f = Math.max(f, cap.money === 0 ? Infinity : s.cost_micros / (cap.money * MICROS));
  return f;
}

/** Which limit a spent counter has reached (a call may not START at or over a cap), or null. */
export function overCap(s: Spent, cap: Cap): "tokens" | "money" | null {
  if (cap.tokens !== undefined && s.input_tokens + s.output_tokens >= cap.tokens) return "tokens";
  if (cap.money !== undefined && s.cost_micros >= Math.round(cap.money * MICROS)) return "money";
  return null;
}

/** The soft alert fires on the write that takes the counter to `fraction` of a cap, once. */
export function crossesSoft(after: Spent, cap: Cap, fraction: number): boolean {
  return !after.alerted && fractionUsed(after, cap) >= fraction;
}

export interface Exhausted {
  scope: Scope;
  window: BudgetWindow;
  limit: "tokens" | "money";
  cap: Cap;
  spent: Spent;
  reset_at: number;
}

const WINDOW_WORD: Record<BudgetWindow, string> = { day: "daily", week: "weekly", month: "monthly" };

/** What the person reads when a call is refused for spend: which cap, and when it resets. */
export function exhaustedWords(e: Exhausted, timezone: string): string {
  const whose = e.scope.kind === "org" ? "the company's" : `my (${e.scope.handle})`;
  const amount =
    e.limit === "tokens"
      ? `${e.cap.tokens!.toLocaleString("en-US")} tokens`
      : `${e.cap.money!.toLocaleString("en-US", { maximumFractionDigits: 2 })} in money`;
  const at = new Date(e.reset_at).toLocaleString("en-GB", { timeZone: timezone, dateStyle: "medium", timeStyle: "short" });
  const cfg = e.scope.kind === "org" ? `budgets.org.${e.window}` : `budgets.seats (${e.scope.handle}, ${e.window})`;
  return `${whose} ${WINDOW_WORD[e.window]} model budget of ${amount} is spent; it resets ${at} (${timezone}) — or raise ${cfg}`;
}
