// GET /budgets: every configured cap of the active company — the org's, and each agent
// seat's — with its current window's spend and reset time, read from crewlet_budgets, so
// any node answers for the fleet.
import { Hono } from "hono";
import { DEFAULT_SOFT_ALERT } from "../../config/budgets.ts";
import type { ScopeStatus } from "../../spend/counters.ts";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { parseNoQuery } from "../errors.ts";

export interface BudgetsSource {
  /** Every agent seat's handle (each seat's caps are listed). */
  seats(): string[];
  status(handles: readonly string[]): Promise<ScopeStatus[]>;
  /** The fraction of a cap at which the soft alert fires (company.budgets.soft_alert). */
  softAlert?(): number;
}

export function budgetsGroup(src: BudgetsSource): RouteGroup {
  return {
    prefix: "/budgets",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/", auth.require("state:read"), async (c) => {
        parseNoQuery(c);
        return c.json({ budgets: await src.status(src.seats()), soft_alert: src.softAlert?.() ?? DEFAULT_SOFT_ALERT });
      });
      return app;
    },
  };
}
