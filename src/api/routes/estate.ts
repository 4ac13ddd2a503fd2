// The estate as an operator sees it on this node: GET /estate (state:read) — each domain's
// copy: applied position, lag, state, in service or why not; POST /estate/{domain}/skip
// (fleet:operate) — append a skip marker for the record this node's copy is stuck on;
// POST /estate/{domain}/hold {reason?} and /release (fleet:operate) — an operator's hold on
// the state-log trim (kept in crewlet_estate with who and when); GET /estate also shows each
// domain's hold and the retention duty's last conclusion (`retention`).
import { Hono } from "hono";
import { z } from "zod";
import type { Estate, EstateHealth, RetentionAdmin } from "../../estate/estate.ts";
import { logSkip } from "../../estate/records.ts";
import { DOMAINS, type Domain } from "../../estate/schema.ts";
import type { SkipResult } from "../../estate/skip.ts";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { ApiError, parseJsonBody, parseNoQuery } from "../errors.ts";
import { callerActor } from "../estate-http.ts";
import { chatRoutes } from "./chat.ts";
import { pagesRoutes } from "./pages.ts";
import { workRoutes } from "./work.ts";
import { turnsRoutes } from "./turns.ts";
import type { Clock } from "../../clock.ts";
import { fileRoutes, type FileRoutesOptions } from "./files.ts";

/** The estate's route groups on an ingress node: files, work, pages, chat, the turn ledger and the
 *  operator's /estate. `clock` says what "today" is for the ledger's week and stuck work. */
export function estateRouteGroups(estate: Estate, clock: Clock, files: Omit<FileRoutesOptions, "router">): RouteGroup[] {
  return [
    fileRoutes({ router: estate.router, ...files }),
    workRoutes(estate.router),
    pagesRoutes(estate.router),
    chatRoutes(estate.router, () => estate.company()),
    turnsRoutes(estate.router, () => estate.company(), clock),
    estateAdminGroup({
      health: () => estate.health(),
      skip: (domain, position, reason, actor) => estate.skip(domain, position, reason, actor),
      ...(estate.retention ? { retention: estate.retention } : {}),
    }),
  ];
}

export interface EstateAdminSource {
  health(): EstateHealth;
  skip(domain: Domain, position: number, reason: string, actor: string): Promise<SkipResult>;
  retention?: RetentionAdmin;
}

const skipBody = z.strictObject({ position: logSkip.shape.position, reason: logSkip.shape.reason });
const holdBody = z.strictObject({ reason: z.string().min(1).max(500).optional() });
const releaseBody = z.strictObject({});

function domainParam(domain: string): Domain {
  if (!(DOMAINS as readonly string[]).includes(domain)) throw new ApiError(400, "invalid_input", `params.domain: one of ${DOMAINS.join(", ")}`, "domain");
  return domain as Domain;
}

export function estateAdminGroup(src: EstateAdminSource): RouteGroup {
  return {
    prefix: "/estate",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/", auth.require("state:read"), async (c) => {
        parseNoQuery(c);
        const retention = src.retention ? await src.retention.view().catch((err: Error) => ({ error: `the retention records could not be read: ${err.message}` })) : undefined;
        return c.json({ ...src.health(), ...(retention ? { retention } : {}) });
      });
      app.post("/:domain/hold", auth.require("fleet:operate"), async (c) => {
        const domain = domainParam(c.req.param("domain"));
        parseNoQuery(c);
        const b = await parseJsonBody(c, holdBody);
        if (!src.retention) throw new ApiError(503, "unavailable", "the retention records are not reachable from this node");
        const out = await src.retention.hold(domain, b.reason ?? null, callerActor(c));
        return c.json({ status: out.kind, domain, ...out }, out.kind === "held" && !out.already ? 201 : 200);
      });
      app.post("/:domain/release", auth.require("fleet:operate"), async (c) => {
        const domain = domainParam(c.req.param("domain"));
        parseNoQuery(c);
        await parseJsonBody(c, releaseBody);
        if (!src.retention) throw new ApiError(503, "unavailable", "the retention records are not reachable from this node");
        const out = await src.retention.release(domain);
        return c.json({ status: "released", domain, hold: out.hold }, 200);
      });
      app.post("/:domain/skip", auth.require("fleet:operate"), async (c) => {
        const domain = domainParam(c.req.param("domain"));
        parseNoQuery(c);
        const b = await parseJsonBody(c, skipBody);
        const out = await src.skip(domain, b.position, b.reason, callerActor(c));
        switch (out.kind) {
          case "not_data":
            throw new ApiError(409, "not_a_data_node", "this node holds no copy of the estate; ask a data node");
          case "not_stuck":
            throw new ApiError(409, "not_stuck", out.message, "position");
          case "invalid":
            throw new ApiError(400, "invalid_input", out.message, out.field);
          case "unknown":
            c.header("Retry-After", "5");
            return c.json({ status: "unknown", error: out.error }, 504);
          case "skipped":
            return c.json({ status: "skipped", ...withoutKind(out) }, 200);
          case "pending":
            return c.json({ status: "pending", ...withoutKind(out) }, 202);
        }
      });
      return app;
    },
  };
}

function withoutKind<T extends { kind: string }>(o: T): Omit<T, "kind"> {
  const { kind: _kind, ...rest } = o;
  return rest;
}
