// The outbound tools — github_comment, github_issue_create, github_label, slack_post —
// and the answer back: a turn woken from GitHub or Slack that ends with words says them
// where the wake came from (the issue or pull request, the Slack thread) unless it already
// posted there. Every tool is open-world: a call counts as having reached outside, so a
// turn that used one and then broke is recorded and acked, never re-run into a second post.
// A tool is offered to a seat only when an integration with a token routes to it.
import { z } from "zod";
import type { Org } from "../org/org.ts";
import type { Trigger } from "../org/trigger.ts";
import { defineTool, fail, type Tool, type ToolContext, type ToolResult } from "../agent/tools/contract.ts";
import { baseUrlOf, type IntegrationConfig, type IntegrationKind } from "../config/integrations.ts";
import { CREWLET_MARKER, type Origin } from "./event.ts";
import { GithubClient, SlackClient, type FetchLike, type OutboundResult } from "./outbound.ts";
import { routedSeats } from "./route.ts";

/** GitHub's comment limit is 65,536 characters; a little under leaves room for nothing to break. */
export const GITHUB_TEXT_MAX = 65_000;
/** Slack truncates a message past 40,000 characters. */
export const SLACK_TEXT_MAX = 39_000;
/** Turns whose posts are remembered for the answer back; a turn outliving this many others is long gone. */
const POSTED_TURNS_MAX = 1_024;

/** Reads back the conversation a wake set (`github:{id}:{owner/repo}#{n}`, `slack:{id}:{channel}:{ts}`). */
export function originOfConversation(conversation: string | undefined): { integration: string; origin: Origin } | null {
  if (!conversation) return null;
  const m = /^(github|slack):([a-z0-9][a-z0-9_\-]{0,47}):(.+)$/.exec(conversation);
  if (!m) return null;
  const [, kind, integration, rest] = m as unknown as [string, "github" | "slack", string, string];
  if (kind === "github") {
    const g = /^([A-Za-z0-9_.\-]+\/[A-Za-z0-9_.\-]+)#(\d+)$/.exec(rest);
    return g ? { integration, origin: { kind: "github", repository: g[1]!, number: Number(g[2]) } } : null;
  }
  const s = /^([A-Za-z0-9]+):(\d+\.\d+)$/.exec(rest);
  return s ? { integration, origin: { kind: "slack", channel: s[1]!, thread_ts: s[2]! } } : null;
}

/** What an agent writes on GitHub carries the marker, so its own webhook wakes nobody. */
function marked(body: string): string {
  return body === "" ? CREWLET_MARKER : `${body}\n\n${CREWLET_MARKER}`;
}

function originKey(integration: string, o: Origin): string {
  return o.kind === "github" ? `${integration}|gh|${o.repository.toLowerCase()}#${o.number}` : `${integration}|slack|${o.channel}|${o.thread_ts}`;
}

export interface AnswerBackRequest {
  seat: string;
  turn_id: string;
  triggers: readonly Trigger[];
  text: string;
  /** False once the seat moved: nothing may be posted then. */
  fence: () => boolean;
}
export type AnswerBackResult = { fenced: true } | { fenced: false; reached: boolean; error: string | null; retryable: boolean };

export interface OutboundOptions {
  integrations: () => readonly IntegrationConfig[];
  org: () => Org;
  fetch?: FetchLike;
}

function outcome<T>(res: OutboundResult<T>, describe: (v: T) => unknown): ToolResult {
  if (!res.ok) return fail(res.message, res.reached);
  return { content: JSON.stringify(describe(res.value)), is_error: false, reached: true };
}

const repo = z.string().regex(/^[A-Za-z0-9_.\-]+\/[A-Za-z0-9_.\-]+$/, "repository is owner/name");
const integrationArg = z.string().min(1).optional().describe("Integration id; defaults to the one that woke you");

export class Outbound {
  private readonly posted = new Map<string, Set<string>>();

  constructor(private readonly o: OutboundOptions) {}

  private available(seat: string, kind: IntegrationKind): IntegrationConfig[] {
    const org = this.o.org();
    return this.o.integrations().filter((i) => i.kind === kind && i.token !== undefined && routedSeats(i, org).includes(seat));
  }

  /** The integration a call uses: named, else the wake's, else the only one. */
  private pick(seat: string, kind: IntegrationKind, named: string | undefined, ctx: ToolContext): IntegrationConfig | string {
    const list = this.available(seat, kind);
    if (named !== undefined) return list.find((i) => i.id === named) ?? `no ${kind} integration "${named}" routes to you (have: ${list.map((i) => i.id).join(", ") || "none"})`;
    const from = originOfConversation(ctx.conversation);
    const woke = from && list.find((i) => i.id === from.integration);
    if (woke) return woke;
    if (list.length === 1) return list[0]!;
    return `several ${kind} integrations route to you; name one in "integration" (${list.map((i) => i.id).join(", ")})`;
  }

  private wakeOrigin(ctx: ToolContext, integ: IntegrationConfig): Origin | null {
    const from = originOfConversation(ctx.conversation);
    return from && from.integration === integ.id ? from.origin : null;
  }

  private remember(turn_id: string, integration: string, o: Origin): void {
    let set = this.posted.get(turn_id);
    if (!set) {
      if (this.posted.size >= POSTED_TURNS_MAX) this.posted.delete(this.posted.keys().next().value!);
      set = new Set();
      this.posted.set(turn_id, set);
    }
    set.add(originKey(integration, o));
  }

  private github(integ: IntegrationConfig): GithubClient {
    return new GithubClient(baseUrlOf(integ)!, integ.token!, this.o.fetch);
  }
  private slack(integ: IntegrationConfig): SlackClient {
    return new SlackClient(baseUrlOf(integ)!, integ.token!, this.o.fetch);
  }

  /** The tools a seat is offered: those of the integrations (with a token) that route to it. */
  toolsFor(seat: string): Tool[] {
    const out: Tool[] = [];
    if (this.available(seat, "github").length > 0) out.push(...this.githubTools());
    if (this.available(seat, "slack").length > 0) out.push(this.slackTool());
    return out;
  }

  private githubTools(): Tool[] {
    const openWorld = { readOnly: false, openWorld: true, estateWrite: false };
    /** The integration and the issue or pull request a call acts on (named, else the wake's). */
    const target = (ctx: ToolContext, a: { integration?: string; repository?: string; number?: number }): { integ: IntegrationConfig; repository: string; number: number } | string => {
      const integ = this.pick(ctx.seat, "github", a.integration, ctx);
      if (typeof integ === "string") return integ;
      const o = this.wakeOrigin(ctx, integ);
      const wake = o?.kind === "github" ? o : null;
      const r = a.repository ?? wake?.repository;
      const n = a.number ?? (a.repository === undefined || a.repository.toLowerCase() === wake?.repository.toLowerCase() ? wake?.number : undefined);
      if (r === undefined || n === undefined) return "no issue or pull request to act on: give repository and number";
      return { integ, repository: r, number: n };
    };
    return [
      defineTool({
        name: "github_comment",
        description: "Comment on a GitHub issue or pull request. Without repository and number it answers the issue or pull request that woke you.",
        input: z.strictObject({
          body: z.string().min(1).max(GITHUB_TEXT_MAX),
          repository: repo.optional(),
          number: z.number().int().min(1).optional(),
          integration: integrationArg,
        }),
        annotations: openWorld,
        run: async (a, ctx) => {
          const t = target(ctx, a);
          if (typeof t === "string") return fail(t);
          const res = await this.github(t.integ).comment(t.repository, t.number, marked(a.body));
          if (res.ok) this.remember(ctx.turn_id, t.integ.id, { kind: "github", repository: t.repository, number: t.number });
          return outcome(res, (v) => ({ comment_id: v.id, url: v.html_url }));
        },
      }),
      defineTool({
        name: "github_issue_create",
        description: "Open a GitHub issue. Without repository it opens it in the repository that woke you.",
        input: z.strictObject({
          title: z.string().min(1).max(256),
          body: z.string().max(GITHUB_TEXT_MAX).optional(),
          labels: z.array(z.string().min(1).max(100)).max(20).optional(),
          repository: repo.optional(),
          integration: integrationArg,
        }),
        annotations: openWorld,
        run: async (a, ctx) => {
          const integ = this.pick(ctx.seat, "github", a.integration, ctx);
          if (typeof integ === "string") return fail(integ);
          const o = this.wakeOrigin(ctx, integ);
          const repository = a.repository ?? (o?.kind === "github" ? o.repository : undefined);
          if (repository === undefined) return fail("no repository: give repository (owner/name)");
          const res = await this.github(integ).createIssue(repository, { title: a.title, body: marked(a.body ?? ""), ...(a.labels ? { labels: a.labels } : {}) });
          return outcome(res, (v) => ({ number: v.number, url: v.html_url }));
        },
      }),
      defineTool({
        name: "github_label",
        description: "Add or remove labels on a GitHub issue or pull request (the one that woke you unless named).",
        input: z
          .strictObject({
            add: z.array(z.string().min(1).max(100)).max(20).default([]),
            remove: z.array(z.string().min(1).max(100)).max(20).default([]),
            repository: repo.optional(),
            number: z.number().int().min(1).optional(),
            integration: integrationArg,
          })
          .refine((a) => a.add.length + a.remove.length > 0, "name labels to add or remove"),
        annotations: openWorld,
        run: async (a, ctx) => {
          const t = target(ctx, a);
          if (typeof t === "string") return fail(t);
          const gh = this.github(t.integ);
          let labels: string[] = [];
          let reached = false;
          if (a.add.length > 0) {
            const res = await gh.addLabels(t.repository, t.number, a.add);
            if (!res.ok) return fail(res.message, res.reached);
            reached = true;
            labels = res.value.map((l) => l.name);
          }
          for (const name of a.remove) {
            const res = await gh.removeLabel(t.repository, t.number, name);
            if (!res.ok) return fail(res.message, reached || res.reached);
            reached = true;
            labels = res.value.map((l) => l.name);
          }
          return { content: JSON.stringify({ labels }), is_error: false, reached: true };
        },
      }),
    ];
  }

  private slackTool(): Tool {
    return defineTool({
      name: "slack_post",
      description: "Post to Slack. Without channel it replies in the thread that woke you; with a channel and no thread_ts it starts a new message there.",
      input: z.strictObject({
        text: z.string().min(1).max(SLACK_TEXT_MAX),
        channel: z.string().regex(/^[A-Za-z0-9]+$/, "a channel id such as C024BE91L").optional(),
        thread_ts: z.string().regex(/^\d+\.\d+$/, "a Slack message ts such as 1700000000.000100").optional(),
        integration: integrationArg,
      }),
      annotations: { readOnly: false, openWorld: true, estateWrite: false },
      run: async (a, ctx) => {
        const integ = this.pick(ctx.seat, "slack", a.integration, ctx);
        if (typeof integ === "string") return fail(integ);
        const o = this.wakeOrigin(ctx, integ);
        const wake = o?.kind === "slack" ? o : null;
        const channel = a.channel ?? wake?.channel;
        if (channel === undefined) return fail("no channel: give channel");
        const thread_ts = a.thread_ts ?? (a.channel === undefined || a.channel === wake?.channel ? wake?.thread_ts : undefined);
        const res = await this.slack(integ).post(channel, a.text, thread_ts);
        if (res.ok && thread_ts !== undefined) this.remember(ctx.turn_id, integ.id, { kind: "slack", channel, thread_ts });
        return outcome(res, (v) => ({ channel: v.channel, ts: v.ts, thread_ts: thread_ts ?? null }));
      },
    });
  }

  /**
   * The turn's final words go back where its GitHub or Slack wake came from, unless a tool
   * already posted there this turn. Null when there is nothing to answer.
   */
  readonly answerBack = async (req: AnswerBackRequest): Promise<AnswerBackResult | null> => {
    const posted = this.posted.get(req.turn_id);
    this.posted.delete(req.turn_id);
    if (req.text.trim() === "") return null;
    const wake = [...req.triggers].reverse().find((t) => t.type === "external_notification" && originOfConversation(t.conversation) !== null);
    const from = wake ? originOfConversation(wake.conversation) : null;
    if (!from) return null;
    const integ = this.o.integrations().find((i) => i.id === from.integration);
    if (!integ || integ.token === undefined || integ.kind !== from.origin.kind) return null;
    if (posted?.has(originKey(integ.id, from.origin))) return null;
    if (!req.fence()) return { fenced: true };
    const o = from.origin;
    const res = o.kind === "github" ? await this.github(integ).comment(o.repository, o.number, marked(req.text.slice(0, GITHUB_TEXT_MAX))) : await this.slack(integ).post(o.channel, req.text.slice(0, SLACK_TEXT_MAX), o.thread_ts);
    if (res.ok) return { fenced: false, reached: true, error: null, retryable: false };
    return { fenced: false, reached: res.reached, error: res.message, retryable: res.retryable };
  };
}
