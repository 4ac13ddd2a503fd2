// Table tests on the integrations' pure parts: signatures (the providers' own documented
// examples as known answers), config refusals, payload reading for every routed event,
// routes, the bounded rendering, and the rate valve's decisions.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, loadConfigFile } from "../../src/config/load.ts";
import { companySchema } from "../../src/config/company.ts";
import { MAX_EVENT_BODY_BYTES } from "../../src/integrations/event.ts";
import { parseGeneric } from "../../src/integrations/generic.ts";
import { parseGithub } from "../../src/integrations/github.ts";
import { triggerFor } from "../../src/integrations/notification.ts";
import { renderCoalesced, renderEvent } from "../../src/integrations/render.ts";
import { routeEvent, routedSeats } from "../../src/integrations/route.ts";
import { signSlack, verifyGeneric, verifyGithub, verifySlack } from "../../src/integrations/signature.ts";
import { parseSlack } from "../../src/integrations/slack.ts";
import { originOfConversation } from "../../src/integrations/tools.ts";
import { admitTo, emptyRecord, VALVE_HELD_KEYS_MAX, type ValveRecord } from "../../src/integrations/valve.ts";
import { buildOrg } from "../../src/org/org.ts";
import { triggerSchema } from "../../src/org/trigger.ts";
import { rootCompany } from "../agent/support.ts";
import { fixture, integrationsCompany, SLACK_SECRET } from "./support.ts";

const enc = (s: string) => new TextEncoder().encode(s);
const headers = (h: Record<string, string>) => (n: string) => Object.entries(h).find(([k]) => k.toLowerCase() === n.toLowerCase())?.[1];

describe("signatures", () => {
  test("GitHub's documented example verifies; a changed byte, a wrong secret, a missing header do not", () => {
    // docs.github.com, "Validating webhook deliveries": secret "It's a Secret to Everybody",
    // payload "Hello, World!".
    const sig = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    const secret = "It's a Secret to Everybody";
    expect(verifyGithub(secret, headers({ "X-Hub-Signature-256": sig }), enc("Hello, World!"))).toEqual({ ok: true });
    expect(verifyGithub(secret, headers({ "X-Hub-Signature-256": sig }), enc("Hello, World?")).ok).toBe(false);
    expect(verifyGithub("It's a Secret to Everybody!", headers({ "X-Hub-Signature-256": sig }), enc("Hello, World!")).ok).toBe(false);
    expect(verifyGithub(secret, headers({}), enc("Hello, World!"))).toEqual({ ok: false, reason: "missing X-Hub-Signature-256" });
    expect(verifyGithub(secret, headers({ "X-Hub-Signature-256": sig.replace("sha256=", "sha1=") }), enc("Hello, World!")).ok).toBe(false);
    expect(verifyGithub(secret, headers({ "X-Hub-Signature-256": "sha256=zz" }), enc("Hello, World!")).ok).toBe(false);
    expect(verifyGithub(secret, headers({ "X-Hub-Signature-256": sig.slice(0, -2) }), enc("Hello, World!")).ok).toBe(false);
  });

  test("Slack's documented example verifies inside five minutes of its timestamp, and is a replay after", () => {
    // api.slack.com, "Verifying requests from Slack": the slash-command example.
    const body =
      "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const h = headers({ "X-Slack-Request-Timestamp": "1531420618", "X-Slack-Signature": "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503" });
    const at = 1531420618 * 1000;
    expect(verifySlack(SLACK_SECRET, h, enc(body), at + 60_000)).toEqual({ ok: true });
    expect(verifySlack(SLACK_SECRET, h, enc(body), at - 60_000)).toEqual({ ok: true });
    const late = verifySlack(SLACK_SECRET, h, enc(body), at + 5 * 60_000 + 1_000);
    expect(late.ok).toBe(false);
    expect((late as { reason: string }).reason).toContain("replay refused");
    expect(verifySlack(SLACK_SECRET, h, enc(body + "x"), at).ok).toBe(false);
    // The timestamp is signed: moving it breaks the signature.
    const moved = headers({ "X-Slack-Request-Timestamp": "1531420619", "X-Slack-Signature": "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503" });
    expect(verifySlack(SLACK_SECRET, moved, enc(body), at).ok).toBe(false);
    expect(verifySlack(SLACK_SECRET, headers({ "X-Slack-Signature": signSlack(SLACK_SECRET, 1531420618, body) }), enc(body), at).ok).toBe(false);
  });

  test("generic: hex HMAC-SHA256 in the configured header, with or without sha256=", () => {
    const secret = "generic-hmac-secret-0123456789";
    const hex = new Bun.CryptoHasher("sha256", secret).update("{}").digest("hex");
    expect(verifyGeneric(secret, "X-Sig", headers({ "X-Sig": hex }), enc("{}")).ok).toBe(true);
    expect(verifyGeneric(secret, "X-Sig", headers({ "X-Sig": `sha256=${hex}` }), enc("{}")).ok).toBe(true);
    expect(verifyGeneric(secret, "X-Sig", headers({ "X-Other": hex }), enc("{}")).ok).toBe(false);
    expect(verifyGeneric(secret, "X-Sig", headers({ "X-Sig": hex }), enc("{ }")).ok).toBe(false);
  });
});

describe("config", () => {
  const root = rootCompany() as any;
  const withIntegrations = (integrations: unknown[]) => companySchema.safeParse({ ...root, integrations });
  const problem = (r: ReturnType<typeof withIntegrations>) => (r.success ? null : { path: r.error.issues[0]!.path.join("."), message: r.error.issues[0]!.message });
  const gh = (extra: Record<string, unknown> = {}) => ({ id: "gh", kind: "github", secret: "0123456789abcdef", routes: [{ seat: "cto" }], ...extra });

  test.each([
    ["a secret under 16 bytes", [gh({ secret: "too-short" })], "integrations.0.secret", "shorter than 16 bytes"],
    ["a route to an unknown seat", [gh({ routes: [{ seat: "cfo" }] })], "integrations.0.routes.0.seat", 'unknown seat "cfo"'],
    ["a route to a person", [gh({ routes: [{ seat: "founder" }] })], "integrations.0.routes.0.seat", "is a person"],
    ["a route to an unknown unit", [gh({ routes: [{ unit: "legal" }] })], "integrations.0.routes.0.unit", 'unknown unit "legal"'],
    ["a route naming both seat and unit", [gh({ routes: [{ seat: "cto", unit: "eng" }] })], "integrations.0.routes.0", "exactly one of seat or unit"],
    ["a slack route on a repository", [{ id: "s", kind: "slack", secret: "0123456789abcdef", routes: [{ seat: "cto", repository: "a/b" }] }], "integrations.0.routes.0.repository", "only a github route"],
    ["a github route on a channel", [gh({ routes: [{ seat: "cto", channel: "C1" }] })], "integrations.0.routes.0.channel", "only a slack route"],
    ["two integrations with one id", [gh(), gh()], "integrations.1.id", "duplicate integration id"],
    ["a rate of 0", [gh({ rate_per_minute: 0 })], "integrations.0.rate_per_minute", ""],
    ["an unknown field", [gh({ secrett: "x" })], "integrations.0", ""],
  ])("refuses %s, naming the field", (_what, list, path, message) => {
    const p = problem(withIntegrations(list));
    expect(p).not.toBeNull();
    expect(p!.path).toBe(path);
    expect(p!.message).toContain(message);
  });

  test("a crewlet.yaml with a route to an unknown seat is refused at load, naming the field and its line", () => {
    const dir = mkdtempSync(join(tmpdir(), "crewlet-integrations-config-"));
    const file = join(dir, "crewlet.yaml");
    const yaml = readFileSync("crewlet.yaml", "utf8").replace(
      "  roles:\n    - name: CEO",
      ["  integrations:", "    - id: gh", "      kind: github", '      secret: "${GH_SECRET}"', "      routes:", "        - {seat: cfo, events: [issues.opened]}", "  roles:", "    - name: CEO"].join("\n"),
    );
    writeFileSync(file, yaml);
    try {
      let err: unknown = null;
      try {
        loadConfigFile(file, { GH_SECRET: "0123456789abcdef0123" });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ConfigError);
      const problem = (err as ConfigError).problems.find((p) => p.path === "company.integrations[0].routes[0].seat");
      expect(problem?.message).toContain('unknown seat "cfo"');
      const line = yaml.split("\n").findIndex((l) => l.includes("seat: cfo")) + 1;
      expect(problem?.message).toContain(`(line ${line})`);
      // The secret comes from the environment and is refused when short.
      expect(() => loadConfigFile(file, { GH_SECRET: "short" })).toThrow(/company\.integrations\[0\]\.secret/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("accepts the test company's three integrations, with defaults filled in", () => {
    const c = integrationsCompany();
    expect(c.integrations.map((i) => [i.id, i.kind, i.rate_per_minute, i.mentions])).toEqual([
      ["gh", "github", 10, true],
      ["slack", "slack", 10, true],
      ["ci", "generic", 10, true],
    ]);
  });
});

describe("payloads", () => {
  test.each([
    ["github-issues-opened", "issues", "issues.opened", "opened issue #1347 “Found a bug”", "octocat/Hello-World#1347", ["bug"]],
    ["github-issues-labeled", "issues", "issues.labeled", "labeled issue #1347 “Found a bug” (+needs-triage)", "octocat/Hello-World#1347", ["bug", "needs-triage"]],
    ["github-issue_comment-created", "issue_comment", "issue_comment.created", "commented on issue #1347 “Found a bug”", "octocat/Hello-World#1347", ["bug"]],
    ["github-pull_request-opened", "pull_request", "pull_request.opened", "opened pull request #1348 “Fix the gripper timing”", "octocat/Hello-World#1348", []],
    ["github-pull_request_review-submitted", "pull_request_review", "pull_request_review.submitted", "reviewed pull request #1348 “Fix the gripper timing”: changes requested", "octocat/Hello-World#1348", []],
    ["github-pull_request_review_comment-created", "pull_request_review_comment", "pull_request_review_comment.created", "commented on the diff of pull request #1348 “Fix the gripper timing”", "octocat/Hello-World#1348", []],
    ["github-check_run-completed", "check_run", "check_run.completed", "check run “Octocoders-linter” completed (completed: failure) on pull request #1348", "octocat/Hello-World#1348", []],
  ])("%s reads as a readable event", (name, header, event, summary, thread, labels) => {
    const f = fixture(name);
    expect(f.headers["X-GitHub-Event"]).toBe(header);
    const p = parseGithub(header, f.body);
    expect(p.status).toBe("event");
    if (p.status !== "event") return;
    expect(p.event.event).toBe(event);
    expect(p.event.summary).toBe(summary);
    expect(p.event.thread).toBe(thread);
    expect(p.event.labels).toEqual(labels);
    expect(p.event.origin).toEqual({ kind: "github", repository: "octocat/Hello-World", number: Number(thread.split("#")[1]) });
  });

  test("a ping and a push are not routed; our own account's act wakes nobody, another bot's does", () => {
    expect(parseGithub("ping", fixture("github-ping").body).status).toBe("ignored");
    expect(parseGithub("push", fixture("github-push").body).status).toBe("ignored");
    const body = fixture("github-issue_comment-created").body;
    const dependabot = { login: "dependabot[bot]", type: "Bot" };
    expect(parseGithub("issue_comment", { ...body, sender: dependabot, comment: { ...body.comment, user: dependabot } }).status).toBe("event");
    expect(parseGithub("issue_comment", body, "hubot").status).toBe("ignored");
  });

  test.each([
    ["issues", "github-issues-opened", (b: any) => delete b.issue.title, "issue.title"],
    ["issues", "github-issues-opened", (b: any) => delete b.repository, "repository"],
    ["issue_comment", "github-issue_comment-created", (b: any) => delete b.comment.user, "comment.user"],
    ["pull_request", "github-pull_request-opened", (b: any) => (b.pull_request.number = "1348"), "pull_request.number"],
    ["pull_request_review_comment", "github-pull_request_review_comment-created", (b: any) => delete b.comment.html_url, "comment.html_url"],
    ["check_run", "github-check_run-completed", (b: any) => delete b.check_run.head_sha, "check_run.head_sha"],
  ])("%s missing a used field is unusable, naming it (%s, %s)", (event, name, mutate, field) => {
    const body = structuredClone(fixture(name).body);
    mutate(body);
    const p = parseGithub(event, body);
    expect(p).toMatchObject({ status: "unusable", field });
  });

  test("Slack: messages, thread replies and app mentions read; bots and edits do not; the challenge is answered", () => {
    const m = parseSlack(fixture("slack-message").body);
    expect(m).toMatchObject({ status: "event", event: { event: "message", channel: "C024BE91L", thread: "C024BE91L:1355517523.000005", origin: { kind: "slack", channel: "C024BE91L", thread_ts: "1355517523.000005" } } });
    const reply = parseSlack(fixture("slack-thread-mention").body);
    expect(reply.status).toBe("event");
    if (reply.status === "event") {
      expect(reply.event.thread).toBe("C024BE91L:1355517523.000005");
      expect(reply.event.mentions).toEqual(["cto"]);
      expect(reply.event.body).not.toContain("<@");
    }
    expect(parseSlack(fixture("slack-app_mention").body)).toMatchObject({ status: "event", event: { event: "app_mention", channel: "C0LAN2Q65" } });
    // This app's own reply (its bot user is in `authorizations`) wakes nobody; another bot's post does.
    expect(parseSlack(fixture("slack-bot-message").body).status).toBe("ignored");
    const alert = { ...fixture("slack-message").body, event: { type: "message", subtype: "bot_message", bot_id: "B0ALERTS1", username: "Grafana", text: "Line 3 error rate above 5%", ts: "1355517800.000001", channel: "C024BE91L" } };
    expect(parseSlack(alert)).toMatchObject({ status: "event", event: { actor: "Grafana", body: "Line 3 error rate above 5%" } });
    const edited = { ...fixture("slack-message").body, event: { ...fixture("slack-message").body.event, subtype: "message_changed" } };
    expect(parseSlack(edited).status).toBe("ignored");
    expect(parseSlack(fixture("slack-url_verification").body)).toEqual({ status: "challenge", challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" });
    const noTs = structuredClone(fixture("slack-message").body);
    delete noTs.event.ts;
    expect(parseSlack(noTs)).toMatchObject({ status: "unusable", field: "event.ts" });
    expect(parseSlack({ ...fixture("slack-message").body, event_id: undefined })).toMatchObject({ status: "unusable", field: "event_id" });
  });

  test("what an agent wrote (the marker) wakes nobody; a label added to its issue still does", () => {
    const comment = structuredClone(fixture("github-issue_comment-created").body);
    comment.comment.body = "Reproduced on main.\n\n<!-- crewlet -->";
    expect(parseGithub("issue_comment", comment)).toMatchObject({ status: "ignored", reason: expect.stringContaining("Crewlet agent") });
    const opened = structuredClone(fixture("github-issues-opened").body);
    opened.issue.body = "Filed by an agent.\n\n<!-- crewlet -->";
    expect(parseGithub("issues", opened).status).toBe("ignored");
    const labeled = structuredClone(fixture("github-issues-labeled").body);
    labeled.issue.body = "Filed by an agent.\n\n<!-- crewlet -->";
    expect(parseGithub("issues", labeled).status).toBe("event");
  });

  test("Slack's `message` and `app_mention` for one message wake a seat once (one wake id)", () => {
    const m = fixture("slack-app_mention").body;
    const asMessage = { ...m, event_id: "Ev0LAN670S", event: { ...m.event, type: "message" } };
    const a = parseSlack(m);
    const b = parseSlack(asMessage);
    if (a.status !== "event" || b.status !== "event") throw new Error("not events");
    const n = (ev: typeof a.event, d: string) => ({ v: 1 as const, integration: "slack", kind: "slack" as const, delivery: `d.slack.${d.repeat(32)}`, seats: ["ceo"], event: ev, received_at: 1 });
    expect(triggerFor(n(a.event, "a"), "ceo").event_id).toBe(triggerFor(n(b.event, "b"), "ceo").event_id);
    const other = parseSlack(fixture("slack-message").body);
    if (other.status !== "event") throw new Error("not an event");
    expect(triggerFor(n(other.event, "c"), "ceo").event_id).not.toBe(triggerFor(n(a.event, "a"), "ceo").event_id);
  });

  test("generic: text is the one field needed", () => {
    expect(parseGeneric({ event: "build.failed", text: "main is red" }, "d1")).toMatchObject({ status: "event", event: { event: "build.failed", body: "main is red" } });
    expect(parseGeneric({ event: "build.failed" }, "d1")).toMatchObject({ status: "unusable", field: "text" });
  });
});

describe("routes", () => {
  const company = integrationsCompany();
  const org = buildOrg(company);
  const [gh, slack, ci] = company.integrations as [any, any, any];
  const seatsFor = (integ: any, p: ReturnType<typeof parseGithub>) => (p.status === "event" ? routeEvent(integ, p.event, org).map((s) => s.seat) : `not an event: ${p.status}`);

  test.each([
    ["github-issues-opened", "issues", ["cto"]],
    ["github-issues-labeled", "issues", ["pm"]],
    // The eng unit's lead (cto) by route, and @engineer by mention.
    ["github-issue_comment-created", "issue_comment", ["cto", "engineer"]],
    ["github-pull_request-opened", "pull_request", ["cto"]],
    ["github-pull_request_review-submitted", "pull_request_review", ["cto"]],
    ["github-pull_request_review_comment-created", "pull_request_review_comment", ["cto"]],
    ["github-check_run-completed", "check_run", ["cto"]],
  ])("%s wakes %j", (name, event, seats) => {
    expect(seatsFor(gh, parseGithub(event, fixture(name).body))).toEqual(seats);
  });

  test("a repository condition is a condition; mentions can be turned off; persons are never woken", () => {
    const body = structuredClone(fixture("github-issues-opened").body);
    body.repository.full_name = "octocat/Other";
    expect(seatsFor(gh, parseGithub("issues", body))).toEqual([]);
    const comment = fixture("github-issue_comment-created").body;
    expect(seatsFor({ ...gh, mentions: false }, parseGithub("issue_comment", comment))).toEqual(["cto"]);
    const toFounder = { ...comment, comment: { ...comment.comment, body: "@founder fyi" } };
    expect(seatsFor(gh, parseGithub("issue_comment", toFounder))).toEqual(["cto"]);
  });

  test("Slack: a channel routes to its unit's lead, app mentions to the ceo, @cto in a thread to cto", () => {
    const s = (name: string) => {
      const p = parseSlack(fixture(name).body);
      return p.status === "event" ? routeEvent(slack, p.event, org).map((x) => x.seat) : [];
    };
    expect(s("slack-message")).toEqual(["pm"]);
    expect(s("slack-thread-mention")).toEqual(["pm", "cto"]);
    expect(s("slack-app_mention")).toEqual(["ceo"]);
    const g = parseGeneric({ event: "build.failed", text: "main is red" }, "d");
    expect(g.status === "event" ? routeEvent(ci, g.event, org).map((x) => x.seat) : []).toEqual(["engineer"]);
    expect(routedSeats(gh, org)).toEqual(["cto", "pm"]);
  });
});

describe("rendering", () => {
  test("a wake says who, what, where, the body and the URL, never JSON, and stays bounded", () => {
    const p = parseGithub("issue_comment", fixture("github-issue_comment-created").body);
    if (p.status !== "event") throw new Error("not an event");
    const text = renderEvent("gh", p.event);
    expect(text).toBe(
      "[github:gh] hubot commented on issue #1347 “Found a bug” in octocat/Hello-World\nlabels: bug\n> Me too. @engineer can you take a look at the gripper timing?\nhttps://github.com/octocat/Hello-World/issues/1347#issuecomment-1",
    );
    const huge = structuredClone(fixture("github-issue_comment-created").body);
    huge.comment.body = "x".repeat(200_000);
    const big = parseGithub("issue_comment", huge);
    if (big.status !== "event") throw new Error("not an event");
    expect(Buffer.byteLength(big.event.body)).toBeLessThanOrEqual(MAX_EVENT_BODY_BYTES + 4);
    const t = triggerFor({ v: 1, integration: "gh", kind: "github", delivery: `d.gh.${"a".repeat(32)}`, seats: ["cto"], event: big.event, received_at: 1 }, "cto");
    expect(t.event_id).toBe(`hook.gh.${"a".repeat(32)}.cto`);
    expect(triggerSchema.safeParse(t).success).toBe(true);
    expect(t.text).not.toContain("{");
    expect(t.conversation).toBe("github:gh:octocat/Hello-World#1347");
    expect(originOfConversation(t.conversation)).toEqual({ integration: "gh", origin: { kind: "github", repository: "octocat/Hello-World", number: 1347 } });
    expect(originOfConversation("slack:slack:C024BE91L:1355517523.000005")).toEqual({ integration: "slack", origin: { kind: "slack", channel: "C024BE91L", thread_ts: "1355517523.000005" } });
    expect(originOfConversation("chat:general:m1")).toBeNull();
  });

  test("a coalesced wake lists what it can and counts the rest", () => {
    const text = renderCoalesced("cto", 10, ["a", "b"], 3);
    expect(text.split("\n")).toEqual(["5 more notifications for @cto in one minute, held back by the rate valve (10 a minute wake you one by one); oldest first:", "- a", "- b", "- …and 3 more not listed here"]);
  });
});

describe("rate valve (pure)", () => {
  test("the first N wake, the rest are held once each, a flushing window sends arrivals on", () => {
    let rec = emptyRecord(2);
    const step = (key: string) => {
      const { decision, next } = admitTo(rec, key, `line ${key}`, 2);
      if (next) rec = next;
      return decision;
    };
    expect(step("a")).toEqual({ kind: "wake" });
    expect(step("b")).toEqual({ kind: "wake" });
    expect(step("a")).toEqual({ kind: "wake" });
    expect(step("c")).toEqual({ kind: "held", first: true });
    expect(step("d")).toEqual({ kind: "held", first: false });
    expect(step("c")).toEqual({ kind: "held", first: false });
    expect(rec.admitted).toEqual(["a", "b"]);
    expect(rec.held.map((h) => h.key)).toEqual(["c", "d"]);
    rec = { ...rec, flush: { at: 1, published: false } };
    expect(step("e")).toEqual({ kind: "next_window" });
    expect(step("c")).toEqual({ kind: "held", first: false });
  });

  test("past the kept keys, holds are counted, never dropped", () => {
    let rec: ValveRecord = { ...emptyRecord(1), admitted: ["x"], held: Array.from({ length: VALVE_HELD_KEYS_MAX }, (_, i) => ({ key: `k${i}`, line: null })) };
    const { decision, next } = admitTo(rec, "new", "line", 1);
    expect(decision).toEqual({ kind: "held", first: false });
    rec = next!;
    expect(rec.more).toBe(1);
    expect(rec.held.length).toBe(VALVE_HELD_KEYS_MAX);
  });
});
