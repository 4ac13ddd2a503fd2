// GET /audit: this node's audit log, newest first, paged (?before=<next>&limit=N).
import { Hono } from "hono";
import { z } from "zod";
import { AUDIT_PAGE_MAX, type AuditLog } from "../audit.ts";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { parseQuery } from "../errors.ts";

const query = z.strictObject({
  before: z.coerce.number().int().min(1).optional(),
  limit: z.coerce.number().int().min(1).max(AUDIT_PAGE_MAX).default(100),
});

export function auditGroup(log: AuditLog): RouteGroup {
  return {
    prefix: "/audit",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/", auth.require("state:read"), (c) => c.json(log.page(parseQuery(c, query))));
      return app;
    },
  };
}
