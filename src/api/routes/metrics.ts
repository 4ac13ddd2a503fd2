// GET /metrics: this node's metrics in the Prometheus text format, for a token with
// state:read (a scrape config sends it as a bearer token). Each node answers for itself;
// Prometheus scrapes every node.
import { Hono } from "hono";
import type { NodeMetrics } from "../../metrics/node-metrics.ts";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { parseNoQuery } from "../errors.ts";

export function metricsGroup(metrics: NodeMetrics): RouteGroup {
  return {
    prefix: "/metrics",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/", auth.require("state:read"), async (c) => {
        parseNoQuery(c);
        const { body, contentType } = await metrics.scrape();
        return c.body(body, 200, { "content-type": contentType, "cache-control": "no-store" });
      });
      return app;
    },
  };
}
