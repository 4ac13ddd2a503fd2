// company.budgets: caps on model spend per window (day, week, month on the company's clock
// and time zone), for the whole org and per seat (a default for every agent seat, overrides
// per handle), and the fraction of a cap at which the soft alert fires. Prices per model
// live beside each provider (providers.llm.<name>.pricing), so spend reads in money too.
// The counters and decisions: src/spend/.
import { z } from "zod";

export const WINDOWS = ["day", "week", "month"] as const;
export type BudgetWindow = (typeof WINDOWS)[number];

/** One window's cap: tokens (input + output) and/or money (in pricing's currency). */
export const capSchema = z
  .strictObject({
    tokens: z.number().int().min(0).optional().describe("Input + output tokens the window may spend"),
    money: z.number().min(0).optional().describe("Money the window may spend, in the currency of providers.llm.*.pricing"),
  })
  .refine((c) => c.tokens !== undefined || c.money !== undefined, "a cap names tokens, money or both");
export type Cap = z.infer<typeof capSchema>;

export const capsSchema = z.strictObject({
  day: capSchema.optional(),
  week: capSchema.optional(),
  month: capSchema.optional(),
});
export type Caps = z.infer<typeof capsSchema>;

/** The fraction of a cap the soft alert fires at when none is configured. */
export const DEFAULT_SOFT_ALERT = 0.8;

export const budgetsSchema = z
  .strictObject({
    soft_alert: z.number().gt(0).max(1).default(DEFAULT_SOFT_ALERT).describe("Fraction of a cap at which budget_alert fires (once per window and scope)"),
    org: capsSchema.default({}).describe("Caps on the whole company's spend"),
    seats: z
      .strictObject({
        default: capsSchema.default({}).describe("Caps every agent seat has unless overridden"),
        overrides: z.record(z.string(), capsSchema).default({}).describe("Caps per handle, replacing the default's windows they name"),
      })
      .default({ default: {}, overrides: {} }),
  })
  .default({ soft_alert: DEFAULT_SOFT_ALERT, org: {}, seats: { default: {}, overrides: {} } });
export type Budgets = z.infer<typeof budgetsSchema>;

/** Price of a model, per million tokens. */
export const pricingSchema = z.strictObject({
  input_per_million: z.number().min(0),
  output_per_million: z.number().min(0),
});
export type Pricing = z.infer<typeof pricingSchema>;

/** Overrides must name agent seats (a person's seat makes no model calls). */
export function checkBudgets(b: Budgets, seatKind: (h: string) => string | null, ctx: z.RefinementCtx): void {
  for (const h of Object.keys(b.seats.overrides)) {
    const kind = seatKind(h);
    if (kind === null) ctx.addIssue({ code: "custom", path: ["budgets", "seats", "overrides", h], message: `unknown handle "${h}"` });
    else if (kind !== "agent") ctx.addIssue({ code: "custom", path: ["budgets", "seats", "overrides", h], message: `"${h}" is a human seat; it makes no model calls` });
  }
}
