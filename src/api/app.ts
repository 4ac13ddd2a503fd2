// The Hono app: middleware composed in one visible place, one file per route group.
// /health and /ready are open; every other route declares the grant it needs.
import { Hono } from "hono";
import type { Logger } from "../log.ts";
import { TokenAuth, type AuthEnv } from "./auth.ts";
import { ApiError } from "./errors.ts";
import { healthRoutes, type HealthSource } from "./routes/health.ts";

export interface RouteGroup {
  /** Mount point, e.g. "/work". */
  prefix: string;
  routes: (auth: TokenAuth) => Hono<AuthEnv>;
}

export interface AppOptions {
  auth: TokenAuth;
  log: Logger;
  health: HealthSource;
  groups?: RouteGroup[];
}

export function createApp(opts: AppOptions): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.onError((err, c) => {
    if (err instanceof ApiError) return c.json(err.body(), err.status);
    opts.log.error("api_internal_error", { method: c.req.method, path: c.req.path, error: err });
    return c.json({ error: { code: "internal", message: "internal error; see the node log" } }, 500);
  });
  app.notFound((c) => c.json({ error: { code: "not_found", message: `no route ${c.req.method} ${c.req.path}` } }, 404));
  app.route("/", healthRoutes(opts.health));
  for (const g of opts.groups ?? []) app.route(g.prefix, g.routes(opts.auth));
  return app;
}
