// The outbound tools and the answer back, against a fake GitHub and a fake Slack written
// here (a real HTTP server on 127.0.0.1 that records every call and answers as the
// providers document). Turns run on the real turn engine with the scripted provider.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { systemClock } from "../../src/clock.ts";
import { companySchema, type Company } from "../../src/config/company.ts";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { buildProviders } from "../../src/agent/providers/index.ts";
import { TurnEngine } from "../../src/agent/turn.ts";
import { parseGithub } from "../../src/integrations/github.ts";
import { triggerFor, type Notification } from "../../src/integrations/notification.ts";
import { parseSlack } from "../../src/integrations/slack.ts";
import { Outbound } from "../../src/integrations/tools.ts";
import { memoryLogger } from "../../src/log.ts";
import { buildOrg } from "../../src/org/org.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { LocalEstate } from "../agent/support.ts";
import { fixture, integrationsCompany } from "./support.ts";

interface Call {
  method: string;
  path: string;
  auth: string | null;
  body: any;
}

/** A fake of the parts of GitHub's and Slack's REST APIs the tools use. */
function fakeProviders() {
  const calls: Call[] = [];
  let nextComment = 100;
  const labels = new Map<string, Set<string>>();
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      const text = await req.text();
      const body = text ? JSON.parse(text) : null;
      calls.push({ method: req.method, path: url.pathname, auth: req.headers.get("authorization"), body });
      const gh = /^\/gh\/repos\/([^/]+)\/([^/]+)\/issues(?:\/(\d+)\/(comments|labels)(?:\/([^/]+))?)?$/.exec(url.pathname);
      if (gh) {
        if (req.headers.get("authorization") !== "Bearer ghp_test_token_0123456789") return Response.json({ message: "Bad credentials" }, { status: 401 });
        const [, owner, repo, num, what, label] = gh;
        const html = `https://github.com/${owner}/${repo}/issues`;
        if (!num && req.method === "POST") return Response.json({ number: 1400, html_url: `${html}/1400`, title: body.title }, { status: 201 });
        if (what === "comments" && req.method === "POST") {
          const id = nextComment++;
          return Response.json({ id, html_url: `${html}/${num}#issuecomment-${id}`, body: body.body }, { status: 201 });
        }
        const key = `${owner}/${repo}#${num}`;
        const set = labels.get(key) ?? new Set(["bug"]);
        labels.set(key, set);
        if (what === "labels" && req.method === "POST") for (const l of body.labels) set.add(l);
        else if (what === "labels" && req.method === "DELETE") {
          if (!set.delete(decodeURIComponent(label!))) return Response.json({ message: "Label does not exist" }, { status: 404 });
        }
        return Response.json([...set].map((name) => ({ name })));
      }
      if (url.pathname === "/slack/chat.postMessage") {
        if (req.headers.get("authorization") !== "Bearer xoxb-test-token-0123456789") return Response.json({ ok: false, error: "invalid_auth" });
        if (body.channel === "CGONE0001") return Response.json({ ok: false, error: "channel_not_found" });
        return Response.json({ ok: true, channel: body.channel, ts: `17000000${calls.length}.000100`, message: { text: body.text } });
      }
      return Response.json({ message: "Not Found" }, { status: 404 });
    },
  });
  return { calls, url: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) };
}

let fake: ReturnType<typeof fakeProviders>;
beforeAll(() => {
  fake = fakeProviders();
});
/** Every engine's estate (a SQLite file in a temp dir), closed and removed at the end. */
const estates: LocalEstate[] = [];
afterAll(() => {
  fake.stop();
  for (const e of estates.splice(0)) e.close();
});

function company(rules: unknown[]): Company {
  const base = integrationsCompany({ githubBase: `${fake.url}/gh`, slackBase: `${fake.url}/slack` }) as any;
  return companySchema.parse({ ...base, providers: { llm: { offline: { type: "scripted", rules } } } });
}

function engine(c: Company) {
  const { log, sink } = memoryLogger("debug");
  const org = buildOrg(c);
  const outbound = new Outbound({ integrations: () => c.integrations, org: () => org });
  const providers = buildProviders(c.providers.llm, systemClock);
  const estate = new LocalEstate(c);
  estates.push(estate);
  const events = new MemoryEventSink();
  const turns = new TurnEngine({
    org: () => org,
    node_id: "node-a",
    clock: systemClock,
    log,
    estate,
    queue: new MemoryQueue({ clock: systemClock, log }),
    providerFor: (s) => providers.get(s.llm ?? ""),
    extraTools: (h) => outbound.toolsFor(h),
    answerBack: outbound.answerBack,
    ledger: null,
    events,
  });
  return { turns, outbound, sink, events, estate };
}

function wake(kind: "github" | "slack", name: string, seat: string) {
  const f = fixture(name);
  const parsed = kind === "github" ? parseGithub(f.headers["X-GitHub-Event"]!, f.body) : parseSlack(f.body);
  if (parsed.status !== "event") throw new Error(`${name} is not an event`);
  const n: Notification = { v: 1, integration: kind === "github" ? "gh" : "slack", kind, delivery: `d.x.${crypto.randomUUID().replace(/-/g, "")}`, seats: [seat], event: parsed.event, received_at: Date.now() };
  return triggerFor(n, seat);
}

const owned = () => true;
const since = (n: number) => fake.calls.slice(n);

describe("outbound tools", () => {
  test("offered only to seats an integration with a token routes to, and marked open-world", () => {
    const { outbound } = engine(company([]));
    const names = (h: string) => outbound.toolsFor(h).map((t) => t.name);
    expect(names("cto")).toEqual(["github_comment", "github_issue_create", "github_label"]);
    expect(names("pm")).toEqual(["github_comment", "github_issue_create", "github_label", "slack_post"]);
    expect(names("ceo")).toEqual(["slack_post"]);
    // engineer is woken by mentions and by the generic hook, neither of which gives tools.
    expect(names("engineer")).toEqual([]);
    for (const t of outbound.toolsFor("pm")) expect(t.annotations).toMatchObject({ openWorld: true, readOnly: false });
  });

  test("a GitHub wake: the tool labels the issue that woke the seat, and the final words go back as a comment there", async () => {
    const c = company([
      { when: { trigger: "external_notification", seat: "cto" }, tool_calls: [{ tool: "github_label", args: { add: ["triaged"] } }], reply: "Looking into it, {{author}}." },
    ]);
    const { turns } = engine(c);
    const n = fake.calls.length;
    const report = await turns.run({ seat: "cto", epoch: 1, fence: owned, triggers: [wake("github", "github-issues-opened", "cto")] });
    expect(report).toMatchObject({ settle: "ack", outcome: "completed", reached_outside: true, tool_calls: 1 });
    expect(since(n).map((x) => [x.method, x.path, x.body])).toEqual([
      ["POST", "/gh/repos/octocat/Hello-World/issues/1347/labels", { labels: ["triaged"] }],
      ["POST", "/gh/repos/octocat/Hello-World/issues/1347/comments", { body: "Looking into it, github:hubot.\n\n<!-- crewlet -->" }],
    ]);
    expect(since(n).every((x) => x.auth === "Bearer ghp_test_token_0123456789")).toBe(true);
  });

  test("a turn that already commented where it was woken is not answered twice; a new issue goes to the wake's repository", async () => {
    const c = company([
      {
        when: { trigger: "external_notification", seat: "cto" },
        tool_calls: [
          { tool: "github_comment", args: { body: "Reproduced on main." } },
          { tool: "github_issue_create", args: { title: "Gripper settle delay is not configurable", labels: ["enhancement"] } },
        ],
        reply: "Reproduced and filed a follow-up.",
      },
    ]);
    const { turns } = engine(c);
    const n = fake.calls.length;
    const report = await turns.run({ seat: "cto", epoch: 1, fence: owned, triggers: [wake("github", "github-pull_request_review-submitted", "cto")] });
    expect(report.settle).toBe("ack");
    expect(since(n).map((x) => [x.method, x.path])).toEqual([
      ["POST", "/gh/repos/octocat/Hello-World/issues/1348/comments"],
      ["POST", "/gh/repos/octocat/Hello-World/issues"],
    ]);
    expect(since(n)[1]!.body).toEqual({ title: "Gripper settle delay is not configurable", body: "<!-- crewlet -->", labels: ["enhancement"] });
  });

  test("a Slack wake: slack_post without a channel replies in the thread, and the final words are not posted again", async () => {
    const c = company([{ when: { trigger: "external_notification", seat: "pm" }, tool_calls: [{ tool: "slack_post", args: { text: "Checking line 3 now." } }], reply: "Checked." }]);
    const { turns } = engine(c);
    const n = fake.calls.length;
    const report = await turns.run({ seat: "pm", epoch: 1, fence: owned, triggers: [wake("slack", "slack-thread-mention", "pm")] });
    expect(report.settle).toBe("ack");
    expect(since(n).map((x) => [x.path, x.body])).toEqual([["/slack/chat.postMessage", { channel: "C024BE91L", text: "Checking line 3 now.", thread_ts: "1355517523.000005" }]]);
    expect(since(n)[0]!.auth).toBe("Bearer xoxb-test-token-0123456789");
  });

  test("a Slack wake answered only in words: the reply goes to the message's thread", async () => {
    const c = company([{ when: { trigger: "external_notification" }, reply: "Noted: line 3 tote drop." }]);
    const { turns } = engine(c);
    const n = fake.calls.length;
    await turns.run({ seat: "pm", epoch: 1, fence: owned, triggers: [wake("slack", "slack-message", "pm")] });
    expect(since(n).map((x) => x.body)).toEqual([{ channel: "C024BE91L", text: "Noted: line 3 tote drop.", thread_ts: "1355517523.000005" }]);
  });

  test("a fenced turn answers nothing back", async () => {
    const c = company([{ when: { trigger: "external_notification" }, reply: "words" }]);
    const { turns } = engine(c);
    let calls = 0;
    const fence = () => ++calls <= 1;
    const n = fake.calls.length;
    const report = await turns.run({ seat: "pm", epoch: 1, fence, triggers: [wake("slack", "slack-message", "pm")] });
    expect(report.settle).toBe("defer");
    expect(since(n)).toEqual([]);
  });

  test("a refusal is the model's to read and proves nothing reached", async () => {
    const c = company([]);
    const bad = companySchema.parse({ ...(c as any), integrations: c.integrations.map((i) => (i.id === "gh" ? { ...i, token: "ghp_wrong_token_0123456789" } : i)) });
    const { outbound } = engine(bad);
    const ctx = { seat: "cto", epoch: 1, turn_id: "t1", signal: new AbortController().signal, conversation: "github:gh:octocat/Hello-World#1347" };
    const comment = outbound.toolsFor("cto").find((t) => t.name === "github_comment")!;
    const res = await comment.call({ body: "hello" }, ctx);
    expect(res.is_error).toBe(true);
    expect(res.reached).toBe(false);
    expect(res.content).toContain("401");
    const slack = engine(c).outbound.toolsFor("pm").find((t) => t.name === "slack_post")!;
    const gone = await slack.call({ text: "hi", channel: "CGONE0001" }, { ...ctx, seat: "pm", conversation: undefined });
    expect(gone).toMatchObject({ is_error: true, reached: false });
    expect(gone.content).toContain("channel_not_found");
    const noTarget = await comment.call({ body: "hello" }, { ...ctx, conversation: "chat:general:m1" });
    expect(noTarget).toMatchObject({ is_error: true, reached: false });
    const badArgs = await comment.call({ body: "" }, ctx);
    expect(badArgs.content).toContain("body");
    // A provider that is not there: nothing connected, nothing reached.
    const nowhere = companySchema.parse({ ...(c as any), integrations: c.integrations.map((i) => (i.id === "gh" ? { ...i, base_url: "http://127.0.0.1:1" } : i)) });
    const down = await engine(nowhere).outbound.toolsFor("cto").find((t) => t.name === "github_label")!.call({ add: ["x"] }, ctx);
    expect(down).toMatchObject({ is_error: true, reached: false });
  });

  test("open-world: a turn whose tool reached GitHub and then lost its seat is recorded and acked, never handed to a successor to repeat", async () => {
    const c = company([{ when: { trigger: "external_notification", seat: "cto" }, tool_calls: [{ tool: "github_label", args: { add: ["triaged"] } }], reply: "ok" }]);
    const { turns } = engine(c);
    // Owned for round 1 and its tool call; gone at round 2.
    let checks = 0;
    const report = await turns.run({ seat: "cto", epoch: 1, fence: () => ++checks <= 2, triggers: [wake("github", "github-issues-opened", "cto")] });
    expect(report).toMatchObject({ settle: "ack", outcome: "failed", reached_outside: true });
    // The same turn whose call GitHub refused (nothing reached) goes to the successor.
    const bad = companySchema.parse({ ...(c as any), integrations: c.integrations.map((i) => (i.id === "gh" ? { ...i, token: "ghp_wrong_token_0123456789" } : i)) });
    let checks2 = 0;
    const refused = await engine(bad).turns.run({ seat: "cto", epoch: 1, fence: () => ++checks2 <= 2, triggers: [wake("github", "github-issues-opened", "cto")] });
    expect(refused).toMatchObject({ settle: "defer", reached_outside: false });
  });
});
