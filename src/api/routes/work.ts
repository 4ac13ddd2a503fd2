// Work items: GET /work (a list, or with q= a ranked search with snippets), GET /work/{key}, POST /work, PATCH /work/{key},
// POST /work/{key}/comments. Every call goes through the estate router.
import { Hono } from "hono";
import { z } from "zod";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { ApiError, parseJsonBody, parseNoQuery, parseQuery } from "../errors.ts";
import { callerActor, estateCall, writeReply } from "../estate-http.ts";
import { actor, workComment, workFields, workKey, projectKey } from "../../estate/records.ts";
import type { EstateRouter } from "../../estate/router.ts";
import { DEFAULT_PROJECT_KEY } from "../../estate/seed.ts";
import { WORK_STATUSES } from "../../estate/schema.ts";
import { MAX_SEARCH_LIMIT, MAX_SEARCH_TEXT } from "../../estate/search.ts";

const listQuery = z.strictObject({
  project: projectKey.optional(),
  status: z.enum(WORK_STATUSES).optional(),
  assignee: actor.optional(),
  after: z.coerce.number().int().min(0).optional(),
  limit: z.coerce.number().int().min(1).max(500).optional(),
  /** Full-text search (title 5×, key 10×); the filters above narrow it. */
  q: z.string().min(1, "is empty").max(MAX_SEARCH_TEXT).optional(),
});
/** A list's page when the caller names none. */
const LIST_LIMIT_DEFAULT = 100;
/** A search's hits when the caller names none: a screenful. */
const SEARCH_LIMIT_DEFAULT = 20;

const createBody = z.strictObject({
  project: projectKey.default(DEFAULT_PROJECT_KEY),
  type: workFields.shape.type.default("task"),
  title: workFields.shape.title,
  body: workFields.shape.body.default(""),
  status: workFields.shape.status.default("todo"),
  priority: workFields.shape.priority.default("none"),
  assignee: workFields.shape.assignee.default(null),
  reporter: actor.optional(),
  parent: workFields.shape.parent.default(null),
  labels: workFields.shape.labels.default([]),
  due: workFields.shape.due.default(null),
});

const patchBody = workFields
  .partial()
  .extend({ actor: actor.optional() })
  .refine((p) => Object.keys(p).some((k) => k !== "actor"), "changes nothing: send at least one field");

const commentBody = z.strictObject({ body: workComment.shape.body, author: actor.optional() });

function keyParam(raw: string): string {
  const parsed = workKey.safeParse(raw);
  if (!parsed.success) throw new ApiError(400, "invalid_input", `params.key: ${parsed.error.issues[0]?.message}`, "key");
  return parsed.data;
}

export function workRoutes(router: EstateRouter): RouteGroup {
  const exists = async (key: string) => (await estateCall(() => router.read({ q: "work.get", key }))) !== null;
  return {
    prefix: "/work",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/", auth.require("state:read"), async (c) => {
        const { q: text, ...q } = parseQuery(c, listQuery);
        if (text === undefined) return c.json(await estateCall(() => router.read({ q: "work.list", ...q, limit: q.limit ?? LIST_LIMIT_DEFAULT })));
        if (q.after !== undefined) throw new ApiError(400, "invalid_input", "query.after: a search is ranked, not paged; raise limit instead", "after");
        if (q.limit !== undefined && q.limit > MAX_SEARCH_LIMIT) throw new ApiError(400, "invalid_input", `query.limit: a search answers at most ${MAX_SEARCH_LIMIT} hits`, "limit");
        const { after: _after, ...filters } = q;
        return c.json(await estateCall(() => router.read({ q: "work.search", text, ...filters, limit: q.limit ?? SEARCH_LIMIT_DEFAULT })));
      });
      app.get("/:key", auth.require("state:read"), async (c) => {
        const key = keyParam(c.req.param("key"));
        parseNoQuery(c);
        const got = await estateCall(() => router.read({ q: "work.get", key }));
        if (!got) throw new ApiError(404, "unknown_work_item", `no work item ${key}`, "key");
        return c.json(got);
      });
      app.post("/", auth.require("work:write"), async (c) => {
        parseNoQuery(c);
        const b = await parseJsonBody(c, createBody);
        const projects = await estateCall(() => router.read({ q: "projects.list" }));
        if (!projects.some((p) => p.key === b.project)) throw new ApiError(404, "unknown_project", `no project ${b.project}`, "project");
        if (b.parent !== null && !(await exists(b.parent))) throw new ApiError(404, "unknown_work_item", `no work item ${b.parent}`, "parent");
        const { reporter, ...fields } = b;
        const out = await estateCall(() => router.write("tracker", { op: "work.create", ...fields, reporter: reporter ?? callerActor(c) }, { op_id: c.get("op_id") }));
        return writeReply(c, out);
      });
      app.patch("/:key", auth.require("work:write"), async (c) => {
        const key = keyParam(c.req.param("key"));
        parseNoQuery(c);
        const { actor: who, ...patch } = await parseJsonBody(c, patchBody);
        if (!(await exists(key))) throw new ApiError(404, "unknown_work_item", `no work item ${key}`, "key");
        if (patch.parent && !(await exists(patch.parent))) throw new ApiError(404, "unknown_work_item", `no work item ${patch.parent}`, "parent");
        const out = await estateCall(() => router.write("tracker", { op: "work.update", key, actor: who ?? callerActor(c), patch }, { op_id: c.get("op_id") }));
        return writeReply(c, out);
      });
      app.post("/:key/comments", auth.require("work:write"), async (c) => {
        const key = keyParam(c.req.param("key"));
        parseNoQuery(c);
        const b = await parseJsonBody(c, commentBody);
        if (!(await exists(key))) throw new ApiError(404, "unknown_work_item", `no work item ${key}`, "key");
        const out = await estateCall(() => router.write("tracker", { op: "work.comment", key, author: b.author ?? callerActor(c), body: b.body }, { op_id: c.get("op_id") }));
        return writeReply(c, out);
      });
      return app;
    },
  };
}
