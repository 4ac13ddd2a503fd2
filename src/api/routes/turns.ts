// The turn ledger: GET /turns (receipts, newest first, by time, day, seat, outcome),
// GET /turns/week (turns and outcomes per agent per day) and GET /turns/stuck (work in
// progress no turn has moved for company.today.stuck_after_minutes). Every read goes
// through the estate router; the receipts are on the tracker log (records.ts turnReceipt).
import { Hono } from "hono";
import { z } from "zod";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { parseNoQuery, parseQuery } from "../errors.ts";
import { daysEnding, stuckWork, weekGrid, type WorkLike } from "../today.ts";
import type { Clock } from "../../clock.ts";
import { agentSeats, type Company } from "../../config/company.ts";
import { estateCall } from "../estate-http.ts";
import { dueDate, handle } from "../../estate/records.ts";
import type { EstateRouter } from "../../estate/router.ts";
import { MAX_LIST_LIMIT } from "../../estate/queries.ts";
import { dayIn } from "../../estate/turn-receipts.ts";

/** A moment: milliseconds since 1970, or an ISO 8601 date-time with its offset or Z. */
const instant = z.string().transform((v, ctx) => {
  if (/^\d{1,15}$/.test(v)) return Number(v);
  const t = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/.test(v) ? Date.parse(v) : Number.NaN;
  if (Number.isNaN(t)) {
    ctx.addIssue({ code: "custom", message: "is not a time: give milliseconds since 1970 or an ISO 8601 date-time such as 2026-12-06T08:00:00Z" });
    return z.NEVER;
  }
  return t;
});

/** GET /turns' query. Exported for the table tests. */
export const turnsQuery = z
  .strictObject({
    since: instant.optional(),
    until: instant.optional(),
    /** The company's calendar day (its time zone), YYYY-MM-DD. */
    day: dueDate.optional(),
    seat: handle.optional(),
    outcome: z.string().regex(/^[a-z][a-z0-9_]{0,63}$/, "is an outcome word such as completed, failed, retry").optional(),
    cursor: z.coerce.number().int().min(1).optional(),
    limit: z.coerce.number().int().min(1).max(MAX_LIST_LIMIT).default(100),
  })
  .refine((q) => q.since === undefined || q.until === undefined || q.since < q.until, { message: "is not before until", path: ["since"] });

/** A week by default; a month at most (receipts are kept 32 days). */
export const WEEK_DAYS_DEFAULT = 7;
export const WEEK_DAYS_MAX = 31;
export const weekQuery = z.strictObject({ days: z.coerce.number().int().min(1).max(WEEK_DAYS_MAX).default(WEEK_DAYS_DEFAULT) });

/** Work in progress read for the stuck rule at most: pages of the list's ceiling. */
const STUCK_PAGES_MAX = 10;

export function turnsRoutes(router: EstateRouter, company: () => Company, clock: Clock): RouteGroup {
  return {
    prefix: "/turns",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/", auth.require("state:read"), async (c) => {
        const q = parseQuery(c, turnsQuery);
        return c.json(await estateCall(() => router.read({ q: "turns.list", ...q })));
      });
      app.get("/week", auth.require("state:read"), async (c) => {
        const q = parseQuery(c, weekQuery);
        const timezone = company().timezone;
        const days = daysEnding(dayIn(clock.now(), timezone), q.days);
        const cells = await estateCall(() => router.read({ q: "turns.week", first_day: days[0]!, last_day: days[days.length - 1]! }));
        return c.json({ timezone, days, seats: weekGrid(agentSeats(company()).map((s) => s.handle), days, cells) });
      });
      app.get("/stuck", auth.require("state:read"), async (c) => {
        parseNoQuery(c);
        const after_minutes = company().today.stuck_after_minutes;
        const items: WorkLike[] = [];
        let after: number | undefined;
        for (let page = 0; page < STUCK_PAGES_MAX; page++) {
          const got = await estateCall(() => router.read({ q: "work.list", status: "in_progress", limit: MAX_LIST_LIMIT, ...(after !== undefined ? { after } : {}) }));
          items.push(...got.items);
          if (got.next === null) break;
          after = got.next;
        }
        const lastTurn: Record<string, number> = {};
        for (let i = 0; i < items.length; i += MAX_LIST_LIMIT) {
          const keys = items.slice(i, i + MAX_LIST_LIMIT).map((it) => it.key);
          Object.assign(lastTurn, await estateCall(() => router.read({ q: "turns.last_by_work", keys })));
        }
        const agents = new Set(agentSeats(company()).map((s) => s.handle));
        const work = stuckWork({ items, lastTurn, agents, now_ms: clock.now(), after_ms: after_minutes * 60_000 });
        return c.json({ stuck_after_minutes: after_minutes, work });
      });
      return app;
    },
  };
}
