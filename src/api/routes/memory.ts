// GET /agents/memory (every seat's memory summary, one request per holding node) and
// GET /agents/{handle}/memory (one seat's memory), both answered by the seat's holder
// (src/agent/holder-reads.ts). A holder that is silent or still hydrating is a 503 naming it,
// never an empty memory; a seat nobody holds is empty and says so. A seat's turn
// transcripts are read the same way: GET /agents/{handle}/turns (a page of summaries,
// newest first, `before` the previous page's `next`) and GET /agents/{handle}/turns/{id}.
import { Hono } from "hono";
import { z } from "zod";
import { TRANSCRIPT_PAGE_DEFAULT, TRANSCRIPT_PAGE_MAX } from "../../agent/transcripts.ts";
import { MEMORY_READ_DEFAULT_LIMIT, MEMORY_READ_MAX_LIMIT, type MemoryReads } from "../../agent/holder-reads.ts";
import type { Org } from "../../org/org.ts";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { ApiError, parseNoQuery, parseQuery } from "../errors.ts";

export interface MemorySource {
  org(): Org;
  reads: MemoryReads;
}

const Query = z.strictObject({
  limit: z.coerce.number().int().min(1).max(MEMORY_READ_MAX_LIMIT).default(MEMORY_READ_DEFAULT_LIMIT),
});

const TurnsQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(TRANSCRIPT_PAGE_MAX).default(TRANSCRIPT_PAGE_DEFAULT),
  before: z.coerce.number().int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
});
const TurnId = z.string().min(1).max(200).regex(/^[A-Za-z0-9_-]+$/, "may hold only letters, digits, '-' and '_'");

/** Mounted before agentsGroup: `/agents/memory` must not read as a seat called "memory". */
export function memoryGroup(src: MemorySource): RouteGroup {
  return {
    prefix: "/agents",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/memory", auth.require("state:read"), async (c) => {
        parseNoQuery(c);
        const handles = src.org().agentSeats().map((s) => s.handle);
        return c.json(await src.reads.overview(handles));
      });
      app.get("/:handle/memory", auth.require("state:read"), async (c) => {
        const handle = c.req.param("handle");
        if (!src.org().agentSeat(handle)) throw new ApiError(404, "unknown_seat", `no agent seat "${handle}" in this company`, "handle");
        const q = parseQuery(c, Query);
        const answer = await src.reads.seat(handle, q.limit);
        return c.json(answer, answer.state === "unavailable" ? 503 : 200);
      });
      app.get("/:handle/turns", auth.require("state:read"), async (c) => {
        const handle = c.req.param("handle");
        if (!src.org().agentSeat(handle)) throw new ApiError(404, "unknown_seat", `no agent seat "${handle}" in this company`, "handle");
        const q = parseQuery(c, TurnsQuery);
        const answer = await src.reads.turns(handle, q.limit, q.before ?? null);
        return c.json(answer, answer.state === "unavailable" ? 503 : 200);
      });
      app.get("/:handle/turns/:id", auth.require("state:read"), async (c) => {
        const handle = c.req.param("handle");
        if (!src.org().agentSeat(handle)) throw new ApiError(404, "unknown_seat", `no agent seat "${handle}" in this company`, "handle");
        parseNoQuery(c);
        const id = z.strictObject({ id: TurnId }).safeParse({ id: c.req.param("id") });
        if (!id.success) throw new ApiError(400, "invalid_input", `params.id: ${id.error.issues[0]?.message ?? "invalid"}`, "id");
        const answer = await src.reads.turn(handle, id.data.id);
        if (answer.state === "no_holder") throw new ApiError(404, "unknown_turn", `nobody holds @${handle}, so no transcript can be read`, "id");
        if (answer.state === "ok" && answer.turn === null) throw new ApiError(404, "unknown_turn", `the holder of @${handle} keeps no transcript of turn ${id.data.id}`, "id");
        return c.json(answer, answer.state === "unavailable" ? 503 : 200);
      });
      return app;
    },
  };
}
