// GET /budgets: every configured cap of the active company — the org's, and each agent
// seat's — with its current window's spend and reset time, read from crewlet_budgets, so
// any node answers for the fleet.
import { Hono } from "hono";
import { DEFAULT_SOFT_ALERT } from "../../config/budgets.ts";
import type { ScopeStatus } from "../../spend/counters.ts";
import type { Scope } from "../../spend/budget.ts";
import { z } from "zod";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { ApiError, parseNoQuery, parseQuery } from "../errors.ts";

export interface BudgetsSource {
  /** Every agent seat's handle (each seat's caps are listed). */
  seats(): string[];
  status(handles: readonly string[]): Promise<ScopeStatus[]>;
  /** The fraction of a cap at which the soft alert fires (company.budgets.soft_alert). */
  softAlert?(): number;
  /** One scope's day counters for the last `days` days (src/spend/counters.ts history). */
  history?(scope: Scope, days: number): Promise<{ counted: boolean; days: { reset_at: number; input_tokens: number; output_tokens: number; cost_micros: number }[] }>;
}

/** Days one history read covers at most: crewlet_budgets keeps a record 32 days. */
export const HISTORY_DAYS_MAX = 31;

const HistoryQuery = z.strictObject({
  /** The whole company unless a seat is named. */
  scope: z.union([z.literal("org"), z.string().regex(/^seat:.{1,128}$/, "is org or seat:<handle>")]).default("org"),
  days: z.coerce.number().int().min(1).max(HISTORY_DAYS_MAX).default(30),
});

export function budgetsGroup(src: BudgetsSource): RouteGroup {
  return {
    prefix: "/budgets",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/", auth.require("state:read"), async (c) => {
        parseNoQuery(c);
        return c.json({ budgets: await src.status(src.seats()), soft_alert: src.softAlert?.() ?? DEFAULT_SOFT_ALERT });
      });
      // One scope's spend per day, newest first: the Spend view's 30-day chart.
      app.get("/history", auth.require("state:read"), async (c) => {
        const q = parseQuery(c, HistoryQuery);
        if (!src.history) throw new ApiError(404, "not_found", "this node keeps no spend history");
        const handle = q.scope === "org" ? null : q.scope.slice("seat:".length);
        if (handle !== null && !src.seats().includes(handle)) throw new ApiError(404, "unknown_seat", `no agent seat "${handle}" in this company`, "scope");
        const scope: Scope = handle === null ? { kind: "org" } : { kind: "seat", handle };
        const h = await src.history(scope, q.days);
        return c.json({
          scope: q.scope,
          window: "day",
          counted: h.counted,
          days: h.days.map((d) => ({ reset_at: new Date(d.reset_at).toISOString(), tokens: d.input_tokens + d.output_tokens, input_tokens: d.input_tokens, output_tokens: d.output_tokens, money: d.cost_micros / 1_000_000 })),
        });
      });
      return app;
    },
  };
}
