// GET /health is always 200 (a liveness fact plus what this node holds); GET /ready is
// 503 with a reason until the node is ready. Both are open: probes carry no token.
import { Hono } from "hono";
import type { AuthEnv } from "../auth.ts";

export interface HealthSource {
  health(): Record<string, unknown>;
  /** null when ready, else why not. */
  notReadyReason(): string | null;
}

export function healthRoutes(src: HealthSource): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.get("/health", (c) => c.json(src.health()));
  app.get("/ready", (c) => {
    const reason = src.notReadyReason();
    return reason === null ? c.json({ ready: true }) : c.json({ ready: false, reason }, 503);
  });
  return app;
}
