// Chat: GET /chat/channels, GET /chat/channels/{id}/messages?cursor=, GET /chat/messages?q=
// (a ranked search across the channels, a member's DMs included),
// POST /chat/channels/{id}/messages. A DM is addressed by its derived id (`dm.alice.bob`)
// and exists from its first message.
import { Hono } from "hono";
import { z } from "zod";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { ApiError, parseJsonBody, parseNoQuery, parseQuery } from "../errors.ts";
import type { Company } from "../../config/company.ts";
import { callerActor, estateCall, writeReply } from "../estate-http.ts";
import { dmMembers, parseMentions } from "../../estate/mentions.ts";
import { actor, channelId, chatPost, handle, opId } from "../../estate/records.ts";
import type { EstateRouter } from "../../estate/router.ts";
import { MAX_SEARCH_LIMIT, MAX_SEARCH_TEXT } from "../../estate/search.ts";

const channelsQuery = z.strictObject({ member: handle.optional() });
const messagesQuery = z.strictObject({
  /** Oldest first, after this position (the previous page's next). */
  cursor: z.coerce.number().int().min(0).optional(),
  /** Newest first in pages: the messages before this position (the previous page's next with order=newest). */
  before: z.coerce.number().int().min(1).optional(),
  order: z.enum(["oldest", "newest"]).default("oldest"),
  limit: z.coerce.number().int().min(1).max(500).default(100),
});
const searchQuery = z.strictObject({
  /** Required, but checked after the rest: a bad limit or an unknown parameter is named first. */
  q: z.string().min(1, "is empty").max(MAX_SEARCH_TEXT).optional(),
  channel: channelId.optional(),
  /** Include this participant's DMs, as GET /chat/channels?member= lists them. */
  member: handle.optional(),
  limit: z.coerce.number().int().min(1).max(MAX_SEARCH_LIMIT).default(20),
});
const postBody = z.strictObject({
  body: chatPost.shape.body,
  author: actor.optional(),
  thread_parent: opId.nullable().default(null),
});

function channelParam(raw: string): string {
  const parsed = channelId.safeParse(raw);
  if (!parsed.success) throw new ApiError(400, "invalid_input", `params.id: ${parsed.error.issues[0]?.message}`, "id");
  return parsed.data;
}

export function chatRoutes(router: EstateRouter, company: () => Company): RouteGroup {
  return {
    prefix: "/chat",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/channels", auth.require("state:read"), async (c) => {
        const q = parseQuery(c, channelsQuery);
        return c.json({ channels: await estateCall(() => router.read({ q: "chat.channels", member: q.member })) });
      });
      app.get("/messages", auth.require("state:read"), async (c) => {
        const { q: text, ...q } = parseQuery(c, searchQuery);
        if (text === undefined) throw new ApiError(400, "invalid_input", "query.q: is required (the text to search for)", "q");
        return c.json(await estateCall(() => router.read({ q: "chat.search", text, ...q })));
      });
      app.get("/channels/:id/messages", auth.require("state:read"), async (c) => {
        const id = channelParam(c.req.param("id"));
        const q = parseQuery(c, messagesQuery);
        const channel = await estateCall(() => router.read({ q: "chat.channel", id }));
        if (!channel) throw new ApiError(404, "unknown_channel", `no channel ${id}`, "id");
        return c.json(await estateCall(() => router.read({ q: "chat.messages", channel: id, cursor: q.cursor, before: q.before, order: q.order, limit: q.limit })));
      });
      app.post("/channels/:id/messages", auth.require("chat:write"), async (c) => {
        const id = channelParam(c.req.param("id"));
        parseNoQuery(c);
        const b = await parseJsonBody(c, postBody);
        const channel = await estateCall(() => router.read({ q: "chat.channel", id }));
        let dm: { members: string[] } | null = null;
        if (!channel) {
          // A DM that has not been written to yet: its id names its participants, who must
          // all be seats of the company.
          const members = dmMembers(id);
          const known = new Set(company().roles.map((r) => r.handle));
          if (!members || members.some((m) => !known.has(m))) throw new ApiError(404, "unknown_channel", `no channel ${id}`, "id");
          // The record's own rule for a DM (its member count), named against the address.
          const checked = chatPost.shape.dm.unwrap().safeParse({ members });
          if (!checked.success) throw new ApiError(400, "invalid_input", `params.id: ${checked.error.issues[0]?.message ?? "not a DM"}`, "id");
          dm = checked.data;
        }
        if (b.thread_parent !== null) {
          const parent = await estateCall(() => router.read({ q: "chat.message", id: b.thread_parent! }));
          if (!parent || parent.channel !== id) throw new ApiError(404, "unknown_message", `no message ${b.thread_parent} in ${id}`, "thread_parent");
        }
        const out = await estateCall(() =>
          router.write("chat", {
            op: "chat.post",
            channel: id,
            author: b.author ?? callerActor(c),
            body: b.body,
            thread_parent: b.thread_parent,
            mentions: parseMentions(b.body),
            dm,
          }, { op_id: c.get("op_id") }),
        );
        return writeReply(c, out);
      });
      return app;
    },
  };
}
