// The engine's built-in tools: work items, pages, chat and colleagues, every one over the
// estate port (the one router) or the queue. Names are the ones the company file's
// scripted rules use (work_create, work_comment, work_update …). Estate writes carry the
// seat as their actor; what a write proves about reaching outside is decided from the
// router's answer, not assumed (see writeResult).
import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { Clock } from "../../clock.ts";
import { EstateInvalid, EstateUnavailable } from "../../estate/router.ts";
import { parseMentions } from "../../estate/mentions.ts";
import type { Message } from "../../estate/queries.ts";
import { WORK_STATUSES } from "../../estate/schema.ts";
import { actor, channelId, chatPost, containerKey, dueDate, labels, opId, pagePut, pageTitle, projectKey, textField, workComment, workFields, workKey } from "../../estate/records.ts";
import { encodeTrigger, type Trigger } from "../../org/trigger.ts";
import type { Org } from "../../org/org.ts";
import { routeFor } from "../../org/routing.ts";
import { defineTool, fail, ok, type Tool, type ToolContext, type ToolResult } from "./contract.ts";
import type { EstatePort, PublishPort, WriteOutcome } from "./estate-port.ts";

export interface ChatPostedFact {
  channel: string;
  /** The thread the post went into (its root message id), or null for a top-level post. */
  thread_root: string | null;
  message_id: string | null;
}

export interface BuiltinDeps {
  /** The org in force (a company revision may replace it between calls). */
  org: () => Org;
  estate: EstatePort;
  queue: PublishPort;
  clock: Clock;
  /** Told of every chat post a tool made (the turn's reply obligation reads it). */
  onChatPosted?: (ctx: ToolContext, fact: ChatPostedFact) => void;
}

/** What a write's answer proves: refused or never answered → nothing left the engine. */
export async function writeResult(write: () => Promise<WriteOutcome>, describe: (o: Record<string, unknown>) => unknown): Promise<ToolResult> {
  let out: WriteOutcome;
  try {
    out = await write();
  } catch (err) {
    if (err instanceof EstateUnavailable) return fail(err.message, false);
    if (err instanceof EstateInvalid) return { ...fail(err.message, false), refused: true };
    throw err;
  }
  if (out.status === "applied") {
    if (!out.outcome.ok) {
      const refused = out.outcome as { code: string; message: string; field?: string };
      return { ...fail(`refused (${refused.code}): ${refused.message}${refused.field ? ` [${refused.field}]` : ""}`, false), refused: true };
    }
    return { ...ok(describe(out.outcome as Record<string, unknown>)), reached: true };
  }
  if (out.status === "pending") return { ...ok({ status: "pending", op_id: out.op_id }), reached: true };
  // unknown: it may have run; count it, and tell the model the truth.
  return { content: `the write may or may not have been applied: ${out.error}`, is_error: true, reached: true };
}

/** A search needle or a question: text bounded in bytes like every estate field. */
const text = (max_bytes: number) => textField(max_bytes, { min: 1 });

// Tool inputs are derived from the record schemas (src/estate/records.ts), so a model is
// refused by the same rule, in the same words, as the API and the log: a call the record
// could not hold is a tool error the model reads, never a record on the log.
const assigneeInput = actor.describe("A seat handle, without @");

export function builtinTools(deps: BuiltinDeps): Tool[] {
  const { estate } = deps;
  const readOnly = { readOnly: true, openWorld: false, estateWrite: false };
  const estateWrite = { readOnly: false, openWorld: false, estateWrite: true };

  const postChat = async (ctx: ToolContext, channel: string, body: string, thread_root: string | null): Promise<ToolResult> => {
    const result = await writeResult(
      () => estate.write("chat", { op: "chat.post", channel, author: ctx.seat, body, thread_parent: thread_root, mentions: parseMentions(body), dm: null }),
      (o) => ({ channel, message_id: o.message_id, thread: thread_root }),
    );
    if (result.reached) {
      const parsed = safeJson(result.content) as { message_id?: string } | null;
      deps.onChatPosted?.(ctx, { channel, thread_root, message_id: parsed?.message_id ?? null });
    }
    return result;
  };

  return [
    defineTool({
      name: "work_list",
      description: "List work items, optionally filtered by project, status or assignee.",
      input: z.strictObject({
        project: projectKey.optional(),
        status: z.enum(WORK_STATUSES).optional(),
        assignee: actor.optional(),
        limit: z.number().int().min(1).max(100).default(50),
      }),
      annotations: readOnly,
      run: async (a) => ok(await estate.read({ q: "work.list", project: a.project, status: a.status, assignee: a.assignee, limit: a.limit })),
    }),
    defineTool({
      name: "work_get",
      description: "Get one work item with its comments and activity.",
      input: z.strictObject({ key: workKey.describe("e.g. ENG-12") }),
      annotations: readOnly,
      run: async (a) => {
        const got = await estate.read({ q: "work.get", key: a.key });
        return got === null ? fail(`no work item ${a.key}`) : ok(got);
      },
    }),
    defineTool({
      name: "work_search",
      description: "Full-text search of work items (key, title, body), best matches first.",
      input: z.strictObject({ text: text(200), project: projectKey.optional(), status: z.enum(WORK_STATUSES).optional(), limit: z.number().int().min(1).max(50).default(20) }),
      annotations: readOnly,
      run: async (a) => {
        const found = await estate.read({ q: "work.search", text: a.text, project: a.project, status: a.status, limit: a.limit });
        return ok({ searched: found.searched, hits: found.hits.map(({ key, title, status, assignee, snippet }) => ({ key, title, status, assignee, snippet })) });
      },
    }),
    defineTool({
      name: "work_create",
      description: "Create a work item in a project, optionally assigned to a seat.",
      input: z.strictObject({
        project: projectKey.describe("Project key, e.g. ENG"),
        title: workFields.shape.title,
        body: workFields.shape.body.default(""),
        assignee: assigneeInput.optional(),
        type: workFields.shape.type.default("task"),
        priority: workFields.shape.priority.default("none"),
        labels: labels.default([]),
        due: dueDate.optional().describe("YYYY-MM-DD"),
        parent: workKey.optional(),
      }),
      annotations: estateWrite,
      run: (a, ctx) =>
        writeResult(
          () =>
            estate.write("tracker", {
              op: "work.create",
              project: a.project,
              reporter: ctx.seat,
              type: a.type,
              title: a.title,
              body: a.body,
              status: "todo",
              priority: a.priority,
              assignee: a.assignee?.replace(/^@/, "") ?? null,
              parent: a.parent ?? null,
              labels: a.labels,
              due: a.due ?? null,
            }),
          (o) => ({ key: o.key }),
        ),
    }),
    defineTool({
      name: "work_update",
      description: "Change a work item's status, title, body, assignee, priority, labels or due date.",
      input: z.strictObject({
        key: workKey,
        status: workFields.shape.status.optional(),
        title: workFields.shape.title.optional(),
        body: workFields.shape.body.optional(),
        assignee: assigneeInput.nullable().optional(),
        priority: workFields.shape.priority.optional(),
        labels: labels.optional(),
        due: dueDate.nullable().optional().describe("YYYY-MM-DD, or null to clear"),
      }),
      annotations: estateWrite,
      run: (a, ctx) => {
        const { key, ...rest } = a;
        const patch = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined));
        if (typeof patch.assignee === "string") patch.assignee = patch.assignee.replace(/^@/, "");
        if (Object.keys(patch).length === 0) return Promise.resolve(fail("nothing to change"));
        return writeResult(() => estate.write("tracker", { op: "work.update", key, actor: ctx.seat, patch }), () => ({ key, updated: Object.keys(patch) }));
      },
    }),
    defineTool({
      name: "work_comment",
      description: "Comment on a work item.",
      input: z.strictObject({ key: workKey, body: workComment.shape.body }),
      annotations: estateWrite,
      run: (a, ctx) => writeResult(() => estate.write("tracker", { op: "work.comment", key: a.key, author: ctx.seat, body: a.body }), (o) => ({ key: a.key, comment: o.comment_id ?? null })),
    }),
    defineTool({
      name: "pages_search",
      description: "Full-text search of the knowledge base.",
      input: z.strictObject({ text: text(500), container: containerKey.optional(), limit: z.number().int().min(1).max(50).default(10) }),
      annotations: readOnly,
      run: async (a) => ok(await estate.read({ q: "pages.search", text: a.text, container: a.container, limit: a.limit })),
    }),
    defineTool({
      name: "pages_get",
      description: "Read one knowledge page by container and title.",
      input: z.strictObject({ container: containerKey, title: pageTitle }),
      annotations: readOnly,
      run: async (a) => {
        const page = await estate.read({ q: "pages.get", container: a.container, title: a.title });
        return page === null ? fail(`no page "${a.title}" in ${a.container}`) : ok(page);
      },
    }),
    defineTool({
      name: "pages_write",
      description: "Create or replace a knowledge page.",
      input: z.strictObject({ container: containerKey, title: pageTitle, body: pagePut.shape.body, labels: labels.default([]) }),
      annotations: estateWrite,
      run: (a, ctx) =>
        writeResult(
          () =>
            estate.write("pages", {
              op: "page.put",
              container: a.container,
              title: a.title,
              body: a.body,
              labels: a.labels,
              author: ctx.seat,
              base_revision: null,
            }),
          (o) => ({ container: a.container, title: a.title, revision: o.revision ?? null }),
        ),
    }),
    defineTool({
      name: "chat_post",
      description: "Post a message to a chat channel (top level).",
      input: z.strictObject({ channel: channelId, body: chatPost.shape.body }),
      annotations: estateWrite,
      run: (a, ctx) => postChat(ctx, a.channel, a.body, null),
    }),
    defineTool({
      name: "chat_reply",
      description: "Reply in the thread of a chat message.",
      input: z.strictObject({ message_id: opId, body: chatPost.shape.body }),
      annotations: estateWrite,
      run: async (a, ctx) => {
        const m = await estate.read({ q: "chat.message", id: a.message_id });
        if (m === null) return fail(`no message ${a.message_id}`);
        return postChat(ctx, m.channel, a.body, m.thread_parent ?? m.id);
      },
    }),
    defineTool({
      name: "chat_read",
      description: "Read the newest messages of a chat channel.",
      input: z.strictObject({ channel: channelId, limit: z.number().int().min(1).max(100).default(30) }),
      annotations: readOnly,
      run: async (a) => {
        // The newest `limit`, read as one page from the end; shown oldest first.
        const page = await estate.read({ q: "chat.messages", channel: a.channel, order: "newest", limit: a.limit });
        return ok({ messages: page.messages.map(brief) });
      },
    }),
    defineTool({
      name: "chat_search",
      description: "Full-text search of chat messages, in one channel or every channel you can see, best matches first.",
      input: z.strictObject({ text: text(200), channel: channelId.optional(), limit: z.number().int().min(1).max(50).default(20) }),
      annotations: readOnly,
      run: async (a, ctx) => {
        // member: the seat's own DMs are searched with the open channels, nobody else's.
        const found = await estate.read({ q: "chat.search", text: a.text, channel: a.channel, member: ctx.seat, limit: a.limit });
        return ok({ searched: found.searched, hits: found.hits.map((h) => ({ id: h.id, channel: h.channel, author: h.author, snippet: h.snippet, thread: h.thread_parent, at: h.created_at })) });
      },
    }),
    defineTool({
      name: "ask_colleague",
      description: "Ask a colleague (a seat handle) something. Returns at once; the answer arrives later as a message to you.",
      input: z.strictObject({ handle: z.string(), question: text(16 * 1024) }),
      annotations: { readOnly: false, openWorld: true, estateWrite: false },
      run: async (a, ctx) => {
        const route = routeFor(deps.org(), a.handle);
        if (!route.ok) return fail(route.reason === "human_seat" ? `${a.handle} is a person; mention them in chat instead` : `no seat ${a.handle}`);
        if (route.route.handle === ctx.seat) return fail("you cannot ask yourself");
        const exchange = randomUUID();
        const trigger: Trigger = {
          type: "a2a_request",
          event_id: `a2a-req-${exchange}`,
          seat: route.route.handle,
          conversation: `a2a:${exchange}`,
          from: ctx.seat,
          text: a.question,
          refs: {},
          created_at: deps.clock.now(),
        };
        try {
          await deps.queue.publish(route.route.subject, encodeTrigger(trigger), { msgId: trigger.event_id });
        } catch (err) {
          // The publish may have reached the broker before the error: count it.
          return { content: `could not reach ${route.route.handle}: ${(err as Error).message}`, is_error: true, reached: true };
        }
        return { ...ok({ asked: route.route.handle, exchange }), reached: true };
      },
    }),
    defineTool({
      name: "list_colleagues",
      description: "Everyone in the company you work with: handle, name, human or agent, goal, and how they relate to you.",
      input: z.strictObject({}),
      annotations: readOnly,
      run: async (_a, ctx) => ok(deps.org().colleaguesOf(ctx.seat)),
    }),
  ];
}

function brief(m: Message) {
  return { id: m.id, author: m.author, body: m.body, thread: m.thread_parent, at: m.created_at };
}

function safeJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return null;
  }
}
