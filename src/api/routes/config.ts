// The fleet's company revisions (Scaling Out: Control Plane). GET /config/revisions and
// GET /config/revisions/{digest} (config:read); POST /config/revisions validates, stores
// and activates a company, POST /config/revisions/{digest}/activate makes a stored one
// active again, a rollback (config:write). A company that fails validation is refused
// with the field named and nothing stored. Every node serves these: they read and write
// crewlet_config, not the estate.
import { Hono } from "hono";
import { z } from "zod";
import { companySchema } from "../../config/company.ts";
import {
  DIGEST_RE,
  RevisionNotFound,
  RevisionTooLarge,
  RevisionUnreadable,
  type CompanyRevisions,
  type ActiveRevision,
} from "../../config/company-revisions.ts";
import { agentSeats } from "../../config/company.ts";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { ApiError, parseJsonBody, parseNoBody, parseNoQuery } from "../errors.ts";

export interface ConfigSource {
  revisions: CompanyRevisions;
  /** Tells every node at once that the pointer moved (they also poll). */
  nudge(): void;
}

const applyBody = z.strictObject({ company: companySchema });

function digestParam(raw: string): string {
  if (!DIGEST_RE.test(raw)) throw new ApiError(400, "invalid_input", "params.digest: a revision digest is 64 lower-case hex characters", "digest");
  return raw;
}

function activation(a: { active: ActiveRevision; changed: boolean }) {
  return { digest: a.active.digest, epoch: a.active.epoch, changed: a.changed, seats: agentSeats(a.active.company).length };
}

function mapError(err: unknown): never {
  if (err instanceof RevisionNotFound) throw new ApiError(404, "unknown_revision", err.message, "digest");
  if (err instanceof RevisionUnreadable) throw new ApiError(409, "unreadable_revision", err.message, "digest");
  if (err instanceof RevisionTooLarge) throw new ApiError(413, "too_large", err.message, "company");
  throw err;
}

export function configGroup(src: ConfigSource): RouteGroup {
  return {
    prefix: "/config",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/revisions", auth.require("config:read"), async (c) => {
        parseNoQuery(c);
        const active = await src.revisions.active().catch(() => null);
        return c.json({ active: active ? { digest: active.digest, epoch: active.epoch } : null, revisions: await src.revisions.list() });
      });
      app.get("/revisions/:digest", auth.require("config:read"), async (c) => {
        const digest = digestParam(c.req.param("digest"));
        parseNoQuery(c);
        const found = await src.revisions.read(digest).catch(mapError);
        if (!found) throw new ApiError(404, "unknown_revision", `no company revision ${digest}`, "digest");
        const active = await src.revisions.active().catch(() => null);
        return c.json({ digest, active: active?.digest === digest, stored_at: found.stored_at, stored_by: found.stored_by, company: found.company });
      });
      app.post("/revisions", auth.require("config:write"), async (c) => {
        // Validated in full before anything is written: a refused company stores nothing.
        parseNoQuery(c);
        const { company } = await parseJsonBody(c, applyBody);
        const result = await src.revisions.activate(company).catch(mapError);
        if (result.changed) src.nudge();
        return c.json(activation(result), result.changed ? 201 : 200);
      });
      app.post("/revisions/:digest/activate", auth.require("config:write"), async (c) => {
        const digest = digestParam(c.req.param("digest"));
        parseNoQuery(c);
        await parseNoBody(c);
        const result = await src.revisions.activateDigest(digest).catch(mapError);
        if (result.changed) src.nudge();
        return c.json(activation(result));
      });
      return app;
    },
  };
}
