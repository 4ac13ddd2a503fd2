// The providers' REST calls the outbound tools make, with the integration's token at its
// base_url (GitHub Enterprise, a test's fake server). Every answer is parsed with zod for
// what we use; every call has a deadline. What a failure proves is said, not assumed:
// refused by the provider (4xx) or never connected → nothing happened there; a 5xx, a
// timeout or a lost answer → it may have happened (the turn counts it as reached).
import { z } from "zod";

/** A provider call slower than this is abandoned (and may have happened). */
export const OUTBOUND_TIMEOUT_MS = 15_000;
/** Error text kept from a provider's answer: enough to name the problem. */
const ERROR_TEXT_CHARS = 300;
/** GitHub's REST API version the calls are written against. */
const GITHUB_API_VERSION = "2022-11-28";

export type OutboundResult<T> =
  | { ok: true; value: T }
  /** reached: the call may have taken effect; retryable: trying again later could succeed. */
  | { ok: false; reached: boolean; retryable: boolean; message: string };

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

async function call<T>(fetcher: FetchLike, url: string, init: RequestInit, schema: z.ZodType<T>, what: string): Promise<OutboundResult<T>> {
  let res: Response;
  try {
    res = await fetcher(url, { ...init, signal: AbortSignal.timeout(OUTBOUND_TIMEOUT_MS), redirect: "error" });
  } catch (err) {
    const e = err as Error & { code?: string };
    const refused = e.code === "ECONNREFUSED" || e.code === "ConnectionRefused" || /refused|ENOTFOUND|getaddrinfo/i.test(e.message ?? "");
    // Never connected: nothing reached the provider. Anything else (a timeout, a reset) may have.
    return { ok: false, reached: !refused, retryable: true, message: `${what}: ${e.name === "TimeoutError" ? `no answer within ${OUTBOUND_TIMEOUT_MS} ms` : e.message}` };
  }
  const text = await res.text().catch(() => "");
  if (!res.ok) {
    const retryable = res.status === 429 || res.status >= 500;
    return { ok: false, reached: res.status >= 500, retryable, message: `${what}: ${res.status} ${text.slice(0, ERROR_TEXT_CHARS)}` };
  }
  let raw: unknown;
  try {
    raw = text === "" ? {} : JSON.parse(text);
  } catch {
    return { ok: false, reached: true, retryable: false, message: `${what}: the answer is not JSON` };
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) return { ok: false, reached: true, retryable: false, message: `${what}: unexpected answer (${parsed.error.issues[0]?.path.join(".")}: ${parsed.error.issues[0]?.message})` };
  return { ok: true, value: parsed.data };
}

const ghComment = z.object({ id: z.number(), html_url: z.string() });
const ghIssue = z.object({ number: z.number(), html_url: z.string() });
const ghLabels = z.array(z.object({ name: z.string() }));

export class GithubClient {
  constructor(
    private readonly base: string,
    private readonly token: string,
    private readonly fetcher: FetchLike = fetch,
  ) {}

  private init(method: string, body?: unknown): RequestInit {
    return {
      method,
      headers: {
        accept: "application/vnd.github+json",
        authorization: `Bearer ${this.token}`,
        "x-github-api-version": GITHUB_API_VERSION,
        "user-agent": "crewlet",
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    };
  }

  private repoPath(repository: string): string {
    const [owner, name] = repository.split("/");
    return `${this.base}/repos/${encodeURIComponent(owner!)}/${encodeURIComponent(name!)}`;
  }

  /** A comment on an issue or pull request (GitHub files both under issues). */
  comment(repository: string, number: number, body: string): Promise<OutboundResult<z.output<typeof ghComment>>> {
    return call(this.fetcher, `${this.repoPath(repository)}/issues/${number}/comments`, this.init("POST", { body }), ghComment, "github comment");
  }

  createIssue(repository: string, issue: { title: string; body?: string; labels?: string[] }): Promise<OutboundResult<z.output<typeof ghIssue>>> {
    return call(this.fetcher, `${this.repoPath(repository)}/issues`, this.init("POST", issue), ghIssue, "github issue");
  }

  addLabels(repository: string, number: number, labels: string[]): Promise<OutboundResult<z.output<typeof ghLabels>>> {
    return call(this.fetcher, `${this.repoPath(repository)}/issues/${number}/labels`, this.init("POST", { labels }), ghLabels, "github label");
  }

  removeLabel(repository: string, number: number, label: string): Promise<OutboundResult<z.output<typeof ghLabels>>> {
    return call(this.fetcher, `${this.repoPath(repository)}/issues/${number}/labels/${encodeURIComponent(label)}`, this.init("DELETE"), ghLabels, "github unlabel");
  }
}

const slackPosted = z.discriminatedUnion("ok", [
  z.object({ ok: z.literal(true), channel: z.string(), ts: z.string() }),
  z.object({ ok: z.literal(false), error: z.string() }),
]);

/** Slack errors that say the post was refused for good (a retry would be refused again). */
const SLACK_PERMANENT = new Set(["channel_not_found", "not_in_channel", "is_archived", "msg_too_long", "no_text", "invalid_auth", "not_authed", "account_inactive", "token_revoked", "missing_scope", "restricted_action"]);

export class SlackClient {
  constructor(
    private readonly base: string,
    private readonly token: string,
    private readonly fetcher: FetchLike = fetch,
  ) {}

  async post(channel: string, text: string, thread_ts?: string): Promise<OutboundResult<{ channel: string; ts: string }>> {
    const res = await call(
      this.fetcher,
      `${this.base}/chat.postMessage`,
      {
        method: "POST",
        headers: { authorization: `Bearer ${this.token}`, "content-type": "application/json; charset=utf-8", "user-agent": "crewlet" },
        body: JSON.stringify({ channel, text, ...(thread_ts ? { thread_ts } : {}) }),
      },
      slackPosted,
      "slack post",
    );
    if (!res.ok) return res;
    // Slack answers 200 with ok:false for a refusal: nothing was posted.
    if (!res.value.ok) return { ok: false, reached: false, retryable: !SLACK_PERMANENT.has(res.value.error), message: `slack post: ${res.value.error}` };
    return { ok: true, value: { channel: res.value.channel, ts: res.value.ts } };
  }
}
