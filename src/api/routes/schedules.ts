// GET /schedules: every schedule of the active company with its next fire and its last
// fire and outcome (read from the cursors in crewlet_schedules, so any node answers for the fleet).
import { Hono } from "hono";
import type { Clock } from "../../clock.ts";
import type { Company } from "../../config/company.ts";
import type { KvSlot } from "../../coord/contract.ts";
import { scheduleStatuses } from "../../duty/scheduler.ts";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { parseNoQuery } from "../errors.ts";

export interface SchedulesSource {
  company(): Company | null;
  cursors: Pick<KvSlot, "get">;
  clock: Clock;
}

export function schedulesGroup(src: SchedulesSource): RouteGroup {
  return {
    prefix: "/schedules",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/", auth.require("state:read"), async (c) => {
        parseNoQuery(c);
        const company = src.company();
        const schedules = company ? await scheduleStatuses(company, src.cursors, src.clock.now()) : [];
        return c.json({ schedules });
      });
      return app;
    },
  };
}
