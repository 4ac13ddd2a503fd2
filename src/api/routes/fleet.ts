// GET /fleet (and /query/fleet): every live node and seat lease, what cannot be placed and
// which roles nobody runs. POST /fleet/drain: this node gives its seats back and stops.
import { Hono } from "hono";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { ApiError, parseNoBody, parseNoQuery } from "../errors.ts";

export interface FleetSource {
  /** null when this node places no seats (no seats role). */
  fleet(): Promise<unknown> | null;
  drain(): void;
}

function fleetRoutes(src: FleetSource) {
  return (auth: Parameters<RouteGroup["routes"]>[0]) => {
    const app = new Hono<AuthEnv>();
    app.get("/", auth.require("state:read"), async (c) => {
      parseNoQuery(c);
      const view = src.fleet();
      if (view === null) throw new ApiError(404, "no_seat_host", "this node runs no seats role and keeps no fleet view");
      return c.json(await view);
    });
    app.post("/drain", auth.require("fleet:operate"), async (c) => {
      parseNoQuery(c);
      await parseNoBody(c);
      src.drain();
      return c.json({ draining: true }, 202);
    });
    return app;
  };
}

export function fleetGroups(src: FleetSource): RouteGroup[] {
  const routes = fleetRoutes(src);
  return [
    { prefix: "/fleet", routes },
    { prefix: "/query/fleet", routes },
  ];
}
