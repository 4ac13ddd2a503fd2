// GET /audit: the fleet's audit log (audit-stream.ts), newest first, paged
// (?before=<next>&limit=N). A stream that cannot be read is a 503, never an empty log.
import { Hono } from "hono";
import { z } from "zod";
import { AUDIT_PAGE_MAX } from "../audit.ts";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { ApiError, parseQuery } from "../errors.ts";
import { isUnavailableError } from "../app.ts";

const query = z.strictObject({
  before: z.coerce.number().int().min(1).optional(),
  limit: z.coerce.number().int().min(1).max(AUDIT_PAGE_MAX).default(100),
});

/** Where pages come from: the fleet's stream on a node (fleetAuditReader), or one node.db (AuditLog). */
export interface AuditSource {
  page(q: { before?: number; limit: number }): unknown;
}

export function auditGroup(src: AuditSource): RouteGroup {
  return {
    prefix: "/audit",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/", auth.require("state:read"), async (c) => {
        const q = parseQuery(c, query);
        try {
          return c.json((await src.page(q)) as object);
        } catch (err) {
          if (err instanceof ApiError || isUnavailableError(err)) throw err;
          throw new ApiError(503, "audit_unavailable", `the fleet's audit log cannot be read right now (${(err as Error).message}); retry shortly`);
        }
      });
      return app;
    },
  };
}
