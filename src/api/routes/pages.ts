// The knowledge base: GET /pages?container=&q= (a list, or a ranked search with snippets),
// GET /pages/containers (its spaces), GET /pages/{container}/{title}, PUT /pages/{container}/{title}.
import { Hono } from "hono";
import { z } from "zod";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { ApiError, parseJsonBody, parseNoQuery, parseQuery, parseParam } from "../errors.ts";
import { callerActor, estateCall, writeReply } from "../estate-http.ts";
import { actor, containerKey, labels, pagePut, pageTitle } from "../../estate/records.ts";
import type { EstateRouter } from "../../estate/router.ts";
import { MAX_LIST_LIMIT } from "../../estate/queries.ts";

const listQuery = z.strictObject({
  container: containerKey.optional(),
  q: z.string().min(1, "is empty").max(500).optional(),
  limit: z.coerce.number().int().min(1).max(MAX_LIST_LIMIT).optional(),
  /** The `next` of the previous page (a list, not a search). */
  cursor: z.string().max(2048).optional(),
});

/** A list cursor on the wire: the last (container, title) seen, as base64url JSON. */
const cursorValue = z.tuple([containerKey, pageTitle]);
export function encodePagesCursor(next: [string, string]): string {
  return Buffer.from(JSON.stringify(next)).toString("base64url");
}
function decodePagesCursor(raw: string): [string, string] {
  try {
    const parsed = cursorValue.safeParse(JSON.parse(Buffer.from(raw, "base64url").toString("utf8")));
    if (parsed.success) return parsed.data;
  } catch {
    // falls through to the 400
  }
  throw new ApiError(400, "invalid_input", "query.cursor: not a cursor this API gave (pass the previous page's next)", "cursor");
}

const putBody = z.strictObject({
  body: pagePut.shape.body,
  labels: labels.default([]),
  author: actor.optional(),
  /** Apply only over this revision (0: only if new); omitted: last writer wins, in log order. */
  base_revision: z.number().int().min(0).nullable().default(null),
});

const param = parseParam;

export function pagesRoutes(router: EstateRouter): RouteGroup {
  return {
    prefix: "/pages",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/", auth.require("state:read"), async (c) => {
        const q = parseQuery(c, listQuery);
        if (q.q !== undefined) {
          const found = await estateCall(() => router.read({ q: "pages.search", text: q.q!, container: q.container, limit: q.limit ?? 20 }));
          return c.json(found);
        }
        const after = q.cursor !== undefined ? decodePagesCursor(q.cursor) : undefined;
        const limit = q.limit ?? 100;
        const listed = await estateCall(() => router.read({ q: "pages.list", container: q.container, after, limit }));
        const last = listed.length === limit ? listed[listed.length - 1] : undefined;
        return c.json({ pages: listed, next: last ? encodePagesCursor([last.container, last.title]) : null });
      });
      app.get("/containers", auth.require("state:read"), async (c) => {
        parseNoQuery(c);
        return c.json({ containers: await estateCall(() => router.read({ q: "pages.containers" })) });
      });
      app.get("/:container/:title", auth.require("state:read"), async (c) => {
        const container = param(containerKey, c.req.param("container"), "container");
        const title = param(pageTitle, c.req.param("title"), "title");
        parseNoQuery(c);
        const page = await estateCall(() => router.read({ q: "pages.get", container, title }));
        if (!page) {
          // Name what is missing: the container, or the page in a container that exists.
          const known = await estateCall(() => router.read({ q: "pages.containers" }));
          if (!known.some((k) => k.key === container)) throw new ApiError(404, "unknown_container", `no container ${container}`, "container");
          throw new ApiError(404, "unknown_page", `no page "${title}" in ${container}`, "title");
        }
        return c.json(page);
      });
      app.put("/:container/:title", auth.require("knowledge:write"), async (c) => {
        const container = param(containerKey, c.req.param("container"), "container");
        const title = param(pageTitle, c.req.param("title"), "title");
        parseNoQuery(c);
        const b = await parseJsonBody(c, putBody);
        const known = await estateCall(() => router.read({ q: "pages.containers" }));
        if (!known.some((k) => k.key === container)) throw new ApiError(404, "unknown_container", `no container ${container}`, "container");
        const out = await estateCall(() =>
          router.write("pages", { op: "page.put", container, title, body: b.body, labels: b.labels, author: b.author ?? callerActor(c), base_revision: b.base_revision }, { op_id: c.get("op_id") }),
        );
        return writeReply(c, out);
      });
      return app;
    },
  };
}
