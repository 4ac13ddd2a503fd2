// GET /org: the company as the dashboard's org chart draws it — every seat (agents and
// humans) with its manager, reports and units, and the units with their leads. Only what
// the company file says: who holds a seat and how its turns go are /agents' to tell.
import { Hono } from "hono";
import type { Org } from "../../org/org.ts";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { parseNoQuery } from "../errors.ts";

export interface OrgSource {
  org(): Org;
}

export function orgView(org: Org) {
  return {
    company: { name: org.company_name, mission: org.mission, timezone: org.timezone },
    units: org.units.map((u) => ({ id: u.id, name: u.name, lead: u.lead, roles: [...u.roles], parent: u.parent, children: [...u.children], channel: u.channel, project: u.project })),
    seats: org.seats.map((s) => ({ handle: s.handle, name: s.name, kind: s.kind, goal: s.goal, manager: s.manager, reports: [...s.reports], units: [...s.units] })),
  };
}

export function orgGroup(src: OrgSource): RouteGroup {
  return {
    prefix: "/org",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/", auth.require("state:read"), (c) => {
        parseNoQuery(c);
        return c.json(orgView(src.org()));
      });
      return app;
    },
  };
}
