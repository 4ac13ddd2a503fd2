// GitHub deliveries → normalized events. Pure. Each event type we route has a zod schema
// for the fields we use and nothing else (zod's default object drops unknown keys, so a
// new field GitHub adds changes nothing); a delivery missing one is `unusable`, naming it.
// The event name is the X-GitHub-Event header, the action the payload's `action`.
import { z } from "zod";
import { CREWLET_MARKER, cutBytes, cutChars, MAX_EVENT_BODY_BYTES, MAX_EVENT_LABELS, mentionsIn, type NormalizedEvent, type Origin } from "./event.ts";
import { zodField, type Parsed } from "./parsed.ts";

const login = z.object({ login: z.string().min(1), type: z.string().optional() });
const repository = z.object({ full_name: z.string().min(1) });
const labels = z.array(z.object({ name: z.string() })).default([]);
const text = z.string().nullish().transform((s) => s ?? "");

const issue = z.object({
  number: z.number().int().min(1),
  title: z.string(),
  html_url: z.string(),
  body: text,
  labels,
  /** Present when the "issue" is a pull request (its comments are issue comments). */
  pull_request: z.object({}).passthrough().optional(),
});
const pullRequest = z.object({
  number: z.number().int().min(1),
  title: z.string(),
  html_url: z.string(),
  body: text,
  labels,
  merged: z.boolean().nullish(),
});

const base = { action: z.string().min(1), repository, sender: login };

const schemas = {
  issues: z.object({ ...base, issue, label: z.object({ name: z.string() }).optional() }),
  issue_comment: z.object({ ...base, issue, comment: z.object({ body: text, html_url: z.string(), user: login }) }),
  pull_request: z.object({ ...base, number: z.number().int().min(1), pull_request: pullRequest, label: z.object({ name: z.string() }).optional() }),
  pull_request_review: z.object({
    ...base,
    review: z.object({ state: z.string(), body: text, html_url: z.string(), user: login }),
    pull_request: pullRequest,
  }),
  pull_request_review_comment: z.object({ ...base, comment: z.object({ body: text, html_url: z.string(), user: login }), pull_request: pullRequest }),
  check_run: z.object({
    ...base,
    check_run: z.object({
      name: z.string(),
      status: z.string(),
      conclusion: z.string().nullish(),
      html_url: z.string().nullish(),
      head_sha: z.string().min(1),
      pull_requests: z.array(z.object({ number: z.number().int().min(1) })).default([]),
    }),
  }),
} as const;

export type GithubEventType = keyof typeof schemas;
export const GITHUB_EVENT_TYPES = Object.keys(schemas) as GithubEventType[];

interface Parts {
  actor: string;
  summary: string;
  body: string;
  url: string | null;
  labels: string[];
  number: number | null;
  thread: string;
  /** The body is the actor's own words in this event (a comment, a review, a new issue). */
  authored: boolean;
}

function describe(type: GithubEventType, p: any): Parts {
  const repo: string = p.repository.full_name;
  const names = (ls: { name: string }[]) => ls.map((l) => cutChars(l.name)).slice(0, MAX_EVENT_LABELS);
  switch (type) {
    case "issues": {
      const i = p.issue;
      const extra = p.action === "labeled" || p.action === "unlabeled" ? ` (${p.action === "labeled" ? "+" : "-"}${p.label?.name ?? "?"})` : "";
      return { actor: p.sender.login, summary: `${p.action} issue #${i.number} “${cutChars(i.title)}”${extra}`, body: i.body, url: i.html_url, labels: names(i.labels), number: i.number, thread: `${repo}#${i.number}`, authored: p.action === "opened" || p.action === "edited" };
    }
    case "issue_comment": {
      const i = p.issue;
      const what = i.pull_request ? "pull request" : "issue";
      return { actor: p.comment.user.login, summary: `${p.action === "created" ? "commented" : `${p.action} a comment`} on ${what} #${i.number} “${cutChars(i.title)}”`, body: p.comment.body, url: p.comment.html_url, labels: names(i.labels), number: i.number, thread: `${repo}#${i.number}`, authored: true };
    }
    case "pull_request": {
      const pr = p.pull_request;
      const action = p.action === "closed" && pr.merged ? "merged" : p.action;
      const extra = p.action === "labeled" || p.action === "unlabeled" ? ` (${p.action === "labeled" ? "+" : "-"}${p.label?.name ?? "?"})` : "";
      return { actor: p.sender.login, summary: `${action} pull request #${pr.number} “${cutChars(pr.title)}”${extra}`, body: pr.body, url: pr.html_url, labels: names(pr.labels), number: pr.number, thread: `${repo}#${pr.number}`, authored: p.action === "opened" || p.action === "edited" };
    }
    case "pull_request_review": {
      const pr = p.pull_request;
      const state = String(p.review.state).toLowerCase().replace(/_/g, " ");
      return { actor: p.review.user.login, summary: `reviewed pull request #${pr.number} “${cutChars(pr.title)}”: ${state}`, body: p.review.body, url: p.review.html_url, labels: names(pr.labels), number: pr.number, thread: `${repo}#${pr.number}`, authored: true };
    }
    case "pull_request_review_comment": {
      const pr = p.pull_request;
      return { actor: p.comment.user.login, summary: `commented on the diff of pull request #${pr.number} “${cutChars(pr.title)}”`, body: p.comment.body, url: p.comment.html_url, labels: names(pr.labels), number: pr.number, thread: `${repo}#${pr.number}`, authored: true };
    }
    case "check_run": {
      const c = p.check_run;
      const pr: number | null = c.pull_requests[0]?.number ?? null;
      const result = c.conclusion ? `${c.status}: ${c.conclusion}` : c.status;
      return {
        actor: p.sender.login,
        summary: `check run “${cutChars(c.name)}” ${p.action} (${result})${pr !== null ? ` on pull request #${pr}` : ` on ${String(c.head_sha).slice(0, 12)}`}`,
        body: "",
        url: c.html_url ?? null,
        labels: [],
        number: pr,
        thread: pr !== null ? `${repo}#${pr}` : `${repo}@${c.head_sha}`,
        authored: false,
      };
    }
  }
}

/**
 * Reads one GitHub delivery. `event` is X-GitHub-Event; `payload` the parsed JSON body.
 * `self` is the account the integration's token acts as: its own acts wake nobody (an
 * agent's comment would otherwise wake the agent that wrote it). Words an agent wrote
 * carry CREWLET_MARKER, which does the same whoever the account is.
 */
export function parseGithub(event: string, payload: unknown, self?: string): Parsed {
  if (event === "ping") return { status: "ignored", event, reason: "ping (the hook was created or tested)" };
  if (!(event in schemas)) return { status: "ignored", event, reason: `event type ${event} is not one we route` };
  const type = event as GithubEventType;
  const parsed = schemas[type].safeParse(payload);
  const action = typeof (payload as { action?: unknown } | null)?.action === "string" ? `${event}.${(payload as { action: string }).action}` : event;
  if (!parsed.success) {
    const { field, message } = zodField(parsed.error);
    return { status: "unusable", event: action, field, message };
  }
  const p = parsed.data as any;
  const sender = p.sender as { login: string; type?: string };
  // Other bots (Dependabot's pull requests, a CI app's check runs) are news like anyone's;
  // only this integration's own account, and words an agent wrote, are not.
  if (self !== undefined && sender.login === self) {
    return { status: "ignored", event: action, reason: `sent by this integration's own account (${sender.login})` };
  }
  const parts = describe(type, p);
  if (parts.authored && parts.body.includes(CREWLET_MARKER)) return { status: "ignored", event: action, reason: "written by a Crewlet agent (its own words wake nobody)" };
  const repo: string = p.repository.full_name;
  const origin: Origin | null = parts.number !== null ? { kind: "github", repository: cutChars(repo), number: parts.number } : null;
  const body = cutBytes(parts.body, MAX_EVENT_BODY_BYTES);
  const ev: NormalizedEvent = {
    kind: "github",
    event: cutChars(`${type}.${p.action}`),
    actor: cutChars(parts.actor),
    summary: parts.summary,
    where: cutChars(repo),
    body,
    url: parts.url && parts.url.length <= 2048 ? parts.url : null,
    repository: cutChars(repo),
    channel: null,
    labels: parts.labels,
    mentions: mentionsIn(parts.body),
    thread: cutChars(parts.thread, 600),
    origin,
    message: null,
  };
  return { status: "event", event: ev };
}
