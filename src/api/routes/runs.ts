// GET /runs (?seat=, ?state=): the seats' coding runs, from the fleet's run records, so any
// node answers; GET /runs/{id}: one run with its diff and output; POST /runs/{id}/cancel: a
// person ends a run (its supervisor stops it, and the seat is told its result as usual).
import { Hono } from "hono";
import { z } from "zod";
import { RUN_STATES, runIdSchema, type RunRecord, type RunStore } from "../../sandbox/runs.ts";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { ApiError, coordCall, parseNoQuery, parseOptionalJsonBody, parseQuery } from "../errors.ts";

/** Runs one listing returns: newest first; a fleet's history beyond it is on each run. */
export const RUNS_LIST_MAX = 500;

export interface RunsSource {
  store: Pick<RunStore, "list" | "find" | "requestCancel">;
}

const listQuery = z.strictObject({
  seat: z.string().regex(/^[a-z0-9][a-z0-9_\-]{0,47}$/, "a seat handle").optional(),
  state: z.enum(RUN_STATES).optional(),
});
const cancelBody = z.strictObject({ reason: z.string().min(1).max(1024).optional() });

/** A run as the list shows it: everything but the diff and the output tail. */
function summary(r: RunRecord) {
  const { result, ...rest } = r;
  return { ...rest, result: result ? { outcome: result.outcome, exit_code: result.exit_code, reason: result.reason, summary: result.summary, commits: result.commits.length, output_bytes: result.output_bytes } : null };
}

export function runsGroup(src: RunsSource): RouteGroup {
  return {
    prefix: "/runs",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/", auth.require("state:read"), async (c) => {
        const q = parseQuery(c, listQuery);
        const { runs, invalid } = await coordCall("runs", () => src.store.list(q.seat));
        const picked = runs.filter((r) => q.state === undefined || r.state === q.state).reverse();
        return c.json({ runs: picked.slice(0, RUNS_LIST_MAX).map(summary), truncated: picked.length > RUNS_LIST_MAX, invalid });
      });
      const runParam = (id: string) => {
        const parsed = runIdSchema.safeParse(id);
        if (!parsed.success) throw new ApiError(400, "invalid_input", `params.id: ${parsed.error.issues[0]?.message ?? "invalid"}`, "id");
        return parsed.data;
      };
      app.get("/:id", auth.require("state:read"), async (c) => {
        const id = runParam(c.req.param("id"));
        parseNoQuery(c);
        const run = await coordCall("runs", () => src.store.find(id));
        if (!run) throw new ApiError(404, "unknown_run", `no run "${id}"`, "id");
        return c.json(run);
      });
      app.post("/:id/cancel", auth.require("agents:operate"), async (c) => {
        const id = runParam(c.req.param("id"));
        parseNoQuery(c);
        const body = await parseOptionalJsonBody(c, cancelBody);
        const run = await coordCall("runs", () => src.store.find(id));
        if (!run) throw new ApiError(404, "unknown_run", `no run "${id}"`, "id");
        const by = c.get("principal").tokenId;
        const after = await coordCall("runs", () => src.store.requestCancel(run.seat, id, `token:${by}`, body.reason ?? `cancelled by token:${by}`));
        if (!after) throw new ApiError(409, "run_done", `run "${id}" has already finished`, "id");
        return c.json({ id, seat: run.seat, cancel: after.cancel }, 202);
      });
      return app;
    },
  };
}
