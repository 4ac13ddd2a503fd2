// The webhook ingress and the notifications handler on real parts: a nats-server on
// 127.0.0.1, the JetStream queue, the coordination's KV slots (crewlet_claims,
// crewlet_rate), the Hono app. Every routed fixture is posted as its provider would send it
// and read back as a trigger from the routed seat's inbox.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { NatsConnection } from "nats";
import { createApp } from "../../src/api/app.ts";
import { TokenAuth } from "../../src/api/auth.ts";
import { FakeClock, systemClock, type Clock } from "../../src/clock.ts";
import type { Company } from "../../src/config/company.ts";
import { createCoordination, type CoordinationHandle } from "../../src/coord/index.ts";
import { Integrations } from "../../src/integrations/index.ts";
import { MAX_WEBHOOK_BODY_BYTES } from "../../src/integrations/ingress.ts";
import { deliveryKey } from "../../src/integrations/notification.ts";
import { memoryLogger, type MemorySink } from "../../src/log.ts";
import { decodeTrigger, type Trigger } from "../../src/org/trigger.ts";
import { ack, type Attachment } from "../../src/queue/contract.ts";
import { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { ensureSeatMailboxes } from "../../src/queue/mailboxes.ts";
import { mailbox, STREAM_NOTIFICATIONS } from "../../src/queue/topics.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { fixture, genericRequest, GH_SECRET, githubRequest, integrationsCompany, slackRequest } from "./support.ts";

const SEATS = ["ceo", "cto", "pm", "engineer"];
let nats: TestNats;
let nc: NatsConnection;
let queue: JetStreamQueue;
let coord: CoordinationHandle;
const stops: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  nats = await startNats(1);
  nc = await nats.connect();
  const { log } = memoryLogger("warn");
  queue = new JetStreamQueue({ nc, replicas: 1, clock: systemClock, log });
  await queue.ensureStreams();
  coord = await createCoordination({ type: "local", nc, replicas: 1, clock: systemClock, log });
  await ensureSeatMailboxes(queue, SEATS, systemClock, log);
});
afterAll(async () => {
  for (const s of stops.reverse()) await s();
  await coord?.close();
  await queue?.close();
  await nc?.close();
  await nats?.stop();
});

interface Rig {
  integrations: Integrations;
  /** Every handler this rig runs (the ingress's first, then its peers). */
  handlers: Integrations[];
  sink: MemorySink;
  post(path: string, req: { headers: Record<string, string>; body: string | Uint8Array }): Promise<{ status: number; json: any }>;
  /** Triggers read from each seat's inbox so far. */
  inbox: Map<string, Trigger[]>;
  wait(what: string, check: () => boolean, timeout_ms?: number): Promise<void>;
  /** The seat's inbox reaches `n` triggers and, a moment later, still holds exactly `n`. */
  wokeExactly(seat: string, n: number): Promise<void>;
  notificationsPublished(): Promise<number>;
}

const attachments: Attachment[] = [];
async function rig(company: Company, clock: Clock = systemClock, peers = 0): Promise<Rig> {
  const { log, sink } = memoryLogger("debug");
  // Only this rig's handlers in the group: a previous rig's would take this one's notifications.
  for (const s of stops.splice(0)) await s();
  const make = () => new Integrations({ nodeId: "node-a", company: () => company, queue, claims: coord.slot("claims"), rate: coord.slot("rate"), clock, log });
  const integrations = make();
  await integrations.ensureMailbox();
  const handlers = [integrations, ...Array.from({ length: peers }, make)];
  for (const h of handlers) {
    await h.startHandler();
    stops.push(() => h.stop());
  }
  const app = createApp({ auth: new TokenAuth([{ id: "t", token: "x".repeat(32), grants: [] }]), log, health: { health: () => ({}), notReadyReason: () => null }, groups: [integrations.routeGroup()] });
  const inbox = new Map<string, Trigger[]>(SEATS.map((s) => [s, []]));
  // One reader per seat inbox (replacing the previous rig's), as the seat's holder would be.
  for (const a of attachments.splice(0)) await a.detach();
  for (const seat of SEATS) {
    const { subject, group } = mailbox(seat, "inbox");
    attachments.push(
      await queue.attach(subject, group, async (d) => {
        const t = decodeTrigger(d.data);
        if (t.ok) inbox.get(seat)!.push(t.trigger);
        return ack();
      }),
    );
  }
  const jsm = await nc.jetstreamManager();
  const wait: Rig["wait"] = async (what, check, timeout_ms = 20_000) => {
    const deadline = Date.now() + timeout_ms;
    while (!check()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await Bun.sleep(20);
    }
  };
  return {
    integrations,
    handlers,
    sink,
    inbox,
    async post(path, req) {
      const res = await app.fetch(new Request(`http://127.0.0.1${path}`, { method: "POST", headers: req.headers, body: req.body }));
      const text = await res.text();
      return { status: res.status, json: text ? JSON.parse(text) : null };
    },
    wait,
    async wokeExactly(seat, n) {
      await wait(`${n} wake(s) of ${seat}`, () => inbox.get(seat)!.length >= n);
      // Long enough for a second wake already on its way to land: none may.
      await Bun.sleep(300);
      expect(inbox.get(seat)!.length).toBe(n);
    },
    notificationsPublished: async () => (await jsm.streams.info(STREAM_NOTIFICATIONS)).state.last_seq,
  };
}

let seq = 0;
const fresh = () => `${crypto.randomUUID()}-${++seq}`;

describe("inbound", () => {
  test.each([
    ["github-issues-opened", "github", "gh", ["cto"]],
    ["github-issues-labeled", "github", "gh", ["pm"]],
    ["github-issue_comment-created", "github", "gh", ["cto", "engineer"]],
    ["github-pull_request-opened", "github", "gh", ["cto"]],
    ["github-pull_request_review-submitted", "github", "gh", ["cto"]],
    ["github-pull_request_review_comment-created", "github", "gh", ["cto"]],
    ["github-check_run-completed", "github", "gh", ["cto"]],
    ["slack-message", "slack", "slack", ["pm"]],
    ["slack-thread-mention", "slack", "slack", ["pm", "cto"]],
    ["slack-app_mention", "slack", "slack", ["ceo"]],
  ])("%s is accepted once and wakes %j with a readable trigger", async (name, kind, id, seats) => {
    const r = await rig(integrationsCompany());
    const f = fixture(name);
    // A fresh delivery id each run: the claims slot outlives one test.
    const req =
      kind === "github"
        ? githubRequest(f, GH_SECRET, { delivery: fresh() })
        : slackRequest(f, Date.now(), undefined, { ...f.body, event_id: `Ev${fresh().replace(/-/g, "")}`.slice(0, 40) });
    const res = await r.post(`/hooks/${kind}/${id}`, req);
    expect(res.status).toBe(202);
    expect(res.json).toMatchObject({ accepted: true, seats });
    await r.wait(`wakes for ${seats.join(", ")}`, () => seats.every((s) => r.inbox.get(s)!.length === 1));
    for (const seat of seats) {
      const t = r.inbox.get(seat)![0]!;
      expect(t.type).toBe("external_notification");
      expect(t.event_id.startsWith(`hook.${id}.`) && t.event_id.endsWith(`.${seat}`)).toBe(true);
      if (kind === "github") expect(t.event_id).toBe(`hook.${res.json.delivery.slice(2)}.${seat}`);
      expect(t.conversation.startsWith(`${kind}:${id}:`)).toBe(true);
      expect(t.text.startsWith(`[${kind}:${id}] `)).toBe(true);
      expect(t.text).not.toContain('{"');
      // Both integrations have a token: the model is told its answer goes back.
      expect(t.text.endsWith("(Your final answer is posted back there as your reply; say nothing to post nothing.)")).toBe(true);
    }
    // Nobody else was woken.
    for (const s of SEATS.filter((x) => !seats.includes(x))) expect(r.inbox.get(s)!.length).toBe(0);
  }, 60_000);

  test("a generic hook verifies its configured header and dedupes on its delivery header", async () => {
    const r = await rig(integrationsCompany());
    const d = fresh();
    const first = await r.post("/hooks/generic/ci", genericRequest({ event: "build.failed", text: "main is red: 3 tests fail", url: "https://ci.example.com/runs/7" }, undefined, d));
    expect(first).toMatchObject({ status: 202, json: { accepted: true, seats: ["engineer"] } });
    const again = await r.post("/hooks/generic/ci", genericRequest({ event: "build.failed", text: "main is red: 3 tests fail", url: "https://ci.example.com/runs/7" }, undefined, d));
    expect(again).toMatchObject({ status: 200, json: { duplicate: true } });
    await r.wait("engineer's wake", () => r.inbox.get("engineer")!.length === 1);
    expect(r.inbox.get("engineer")![0]!.text).toBe("[generic:ci] webhook sent a notification in webhook\n> main is red: 3 tests fail\nhttps://ci.example.com/runs/7");
    expect((await r.post("/hooks/generic/ci", genericRequest({ event: "build.failed", text: "x" }, "the-wrong-secret-0123456789"))).status).toBe(401);
  }, 60_000);

  test("signature failures are 401 and nothing else happens: no claim, no notification, no wake", async () => {
    const r = await rig(integrationsCompany());
    const f = fixture("github-issues-opened");
    const before = await r.notificationsPublished();
    const delivery = fresh();
    const good = githubRequest(f, GH_SECRET, { delivery });
    const cases: { headers: Record<string, string>; body: string }[] = [
      { ...good, headers: Object.fromEntries(Object.entries(good.headers).filter(([k]) => k !== "X-Hub-Signature-256")) },
      githubRequest(f, "not-the-secret-0123456789", { delivery }),
      { ...good, body: good.body.replace("Found a bug", "Found a bag") },
      { ...good, headers: { ...good.headers, "X-Hub-Signature-256": "sha256=" + "0".repeat(64) } },
    ];
    for (const c of cases) {
      const res = await r.post("/hooks/github/gh", c);
      expect(res.status).toBe(401);
      expect(res.json.error.code).toBe("unauthorized");
    }
    expect(await coord.slot("claims").get(deliveryKey("gh", delivery))).toBeNull();
    expect(await r.notificationsPublished()).toBe(before);
    expect(r.sink.events("integration_signature_refused").length).toBe(4);
    // Slack: a signed request from six minutes ago is a replay; the challenge needs a signature too.
    const msg = fixture("slack-message");
    const replay = await r.post("/hooks/slack/slack", slackRequest(msg, Date.now() - 6 * 60_000));
    expect(replay.status).toBe(401);
    const unsigned = await r.post("/hooks/slack/slack", { headers: { "Content-Type": "application/json" }, body: JSON.stringify(fixture("slack-url_verification").body) });
    expect(unsigned.status).toBe(401);
    expect(await r.notificationsPublished()).toBe(before);
    // The secret never reaches a log line.
    expect(JSON.stringify(r.sink.lines)).not.toContain(GH_SECRET);
    await Bun.sleep(200);
    for (const s of SEATS) expect(r.inbox.get(s)!.length).toBe(0);
  }, 60_000);

  test("Slack's url_verification is answered with its challenge", async () => {
    const r = await rig(integrationsCompany());
    const res = await r.post("/hooks/slack/slack", slackRequest(fixture("slack-url_verification")));
    expect(res).toEqual({ status: 200, json: { challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" } });
  }, 60_000);

  test("a body over the cap is 413; an unknown integration 404; a wrong kind 404", async () => {
    const r = await rig(integrationsCompany());
    const body = JSON.stringify({ ...fixture("github-issues-opened").body, padding: "x".repeat(MAX_WEBHOOK_BODY_BYTES) });
    const big = await r.post("/hooks/github/gh", { headers: { "Content-Type": "application/json", "X-GitHub-Event": "issues" }, body });
    expect(big.status).toBe(413);
    expect((await r.post("/hooks/github/nope", githubRequest(fixture("github-issues-opened")))).status).toBe(404);
    expect((await r.post("/hooks/slack/gh", githubRequest(fixture("github-issues-opened")))).status).toBe(404);
  }, 60_000);

  test("events we do not route are 202 with a debug line; a payload missing a used field is 202 naming it", async () => {
    const r = await rig(integrationsCompany());
    const before = await r.notificationsPublished();
    for (const name of ["github-ping", "github-push"]) {
      const res = await r.post("/hooks/github/gh", githubRequest(fixture(name), GH_SECRET, { delivery: fresh() }));
      expect(res.status).toBe(202);
      expect(res.json.accepted).toBe(false);
    }
    const bot = await r.post("/hooks/slack/slack", slackRequest(fixture("slack-bot-message")));
    expect(bot.status).toBe(202);
    // Routed type, but no route matches this repository.
    const other = structuredClone(fixture("github-issues-opened").body);
    other.repository.full_name = "someone/else";
    expect((await r.post("/hooks/github/gh", githubRequest(fixture("github-issues-opened"), GH_SECRET, { delivery: fresh(), body: other }))).json.accepted).toBe(false);
    expect(r.sink.events("integration_event_unrouted").length).toBe(4);
    const broken = structuredClone(fixture("github-issue_comment-created").body);
    delete broken.comment.body;
    broken.comment.user = null;
    const unusable = await r.post("/hooks/github/gh", githubRequest(fixture("github-issue_comment-created"), GH_SECRET, { delivery: fresh(), body: broken }));
    expect(unusable.status).toBe(202);
    expect(unusable.json.field).toBe("comment.user");
    const line = r.sink.events("integration_payload_unusable")[0]!;
    expect(line.fields).toMatchObject({ integration: "gh", event_type: "issue_comment.created", field: "comment.user" });
    const notJson = await r.post("/hooks/github/gh", { headers: { "X-GitHub-Event": "issues", "X-Hub-Signature-256": (await import("../../src/integrations/signature.ts")).signGithub(GH_SECRET, "{nope") }, body: "{nope" });
    expect(notJson.status).toBe(400);
    expect(await r.notificationsPublished()).toBe(before);
  }, 60_000);

  test("a redelivery, and the same delivery sent five times at once, wake the seat once", async () => {
    const r = await rig(integrationsCompany());
    const req = githubRequest(fixture("github-issues-opened"), GH_SECRET, { delivery: fresh() });
    const before = await r.notificationsPublished();
    const answers = await Promise.all(Array.from({ length: 5 }, () => r.post("/hooks/github/gh", req)));
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses.filter((s) => s === 202).length).toBe(1);
    expect(statuses.filter((s) => s === 200).length).toBe(4);
    expect((await r.post("/hooks/github/gh", req)).status).toBe(200);
    expect(await r.notificationsPublished()).toBe(before + 1);
    await r.wokeExactly("cto", 1);
  }, 60_000);

  test("a Slack retry (same event_id, a new timestamp and signature, X-Slack-Retry-Num) wakes the seat once", async () => {
    const r = await rig(integrationsCompany());
    const f = fixture("slack-message");
    // A message of its own: a wake is one per (message, seat), and the fixture's message woke pm above.
    const ts = (n: number) => `1355518000.${String(n).padStart(6, "0")}`;
    const body = { ...f.body, event_id: `Ev${fresh().replace(/-/g, "")}`.slice(0, 40), event: { ...f.body.event, ts: ts(1), event_ts: ts(1) } };
    const before = await r.notificationsPublished();
    const first = await r.post("/hooks/slack/slack", slackRequest(f, Date.now() - 30_000, undefined, body));
    expect(first).toMatchObject({ status: 202, json: { accepted: true, seats: ["pm"] } });
    // Slack re-signs a retry at its own time and says why it retried; the body is the same.
    const retry = slackRequest(f, Date.now(), undefined, body);
    retry.headers["X-Slack-Retry-Num"] = "1";
    retry.headers["X-Slack-Retry-Reason"] = "http_timeout";
    const again = await r.post("/hooks/slack/slack", retry);
    expect(again).toMatchObject({ status: 200, json: { duplicate: true, delivery: first.json.delivery } });
    expect(await r.notificationsPublished()).toBe(before + 1);
    // Another message (its own event_id and ts) with the same text is news.
    const next = { ...body, event_id: `${body.event_id}x`.slice(0, 40), event: { ...body.event, ts: ts(2), event_ts: ts(2) } };
    const other = await r.post("/hooks/slack/slack", slackRequest(f, Date.now(), undefined, next));
    expect(other.status).toBe(202);
    await r.wokeExactly("pm", 2);
    expect(await r.notificationsPublished()).toBe(before + 2);
  }, 60_000);

  test("generic: with no delivery header configured, or the configured one absent, the body's hash is the delivery id", async () => {
    const base = integrationsCompany();
    const noHeader = { ...base, integrations: base.integrations.map((i) => (i.id === "ci" ? { ...i, delivery_header: undefined } : i)) } as Company;
    for (const [company, why] of [
      [noHeader, "no delivery_header configured"],
      [base, "delivery_header configured, the request has none"],
    ] as const) {
      const r = await rig(company);
      const payload = { event: "build.failed", text: `main is red (${why}) ${fresh()}` };
      const req = genericRequest(payload);
      expect(Object.keys(req.headers)).not.toContain("X-Delivery");
      const first = await r.post("/hooks/generic/ci", req);
      expect(first).toMatchObject({ status: 202, json: { accepted: true, seats: ["engineer"] } });
      const hash = new Bun.CryptoHasher("sha256").update(req.body).digest("hex");
      expect(first.json.delivery).toBe(deliveryKey("ci", `sha256:${hash}`));
      expect(await r.post("/hooks/generic/ci", genericRequest(payload))).toMatchObject({ status: 200, json: { duplicate: true } });
      // One byte of difference is another delivery.
      expect((await r.post("/hooks/generic/ci", genericRequest({ ...payload, text: `${payload.text}!` }))).status).toBe(202);
      await r.wokeExactly("engineer", 2);
    }
  }, 60_000);

  test("GitHub without X-GitHub-Delivery is deduped by the body's hash (a redelivery resends the same bytes)", async () => {
    const r = await rig(integrationsCompany());
    const f = fixture("github-issues-labeled");
    const body = structuredClone(f.body);
    body.issue.title = `Found a bug ${fresh()}`;
    const req = githubRequest(f, GH_SECRET, { body });
    delete req.headers["X-GitHub-Delivery"];
    const before = await r.notificationsPublished();
    const first = await r.post("/hooks/github/gh", req);
    expect(first).toMatchObject({ status: 202, json: { accepted: true, seats: ["pm"] } });
    const hash = new Bun.CryptoHasher("sha256").update(req.body).digest("hex");
    expect(first.json.delivery).toBe(deliveryKey("gh", `sha256:${hash}`));
    expect(r.sink.events("integration_delivery_accepted").at(-1)!.fields).toMatchObject({ delivery_id: `sha256:${hash}`, delivery_id_from: "body_hash" });
    expect(await r.post("/hooks/github/gh", req)).toMatchObject({ status: 200, json: { duplicate: true } });
    expect(await r.notificationsPublished()).toBe(before + 1);
    await r.wokeExactly("pm", 1);
  }, 60_000);

  test("a delivery claimed by a node that died before publishing is published by the retry", async () => {
    const r = await rig(integrationsCompany());
    const delivery = fresh();
    const key = deliveryKey("gh", delivery);
    await coord.slot("claims").create(key, new TextEncoder().encode(JSON.stringify({ state: "pending", node: "dead-node", at: 1 })));
    const res = await r.post("/hooks/github/gh", githubRequest(fixture("github-issues-opened"), GH_SECRET, { delivery }));
    expect(res.status).toBe(202);
    await r.wait("cto's wake", () => r.inbox.get("cto")!.length === 1);
    const claim = JSON.parse(new TextDecoder().decode((await coord.slot("claims").get(key))!.value));
    expect(claim.state).toBe("published");
  }, 60_000);
});

describe("rate valve", () => {
  test("a burst of 50 comments: 3 wake one by one, the other 47 become one wake that lists every one", async () => {
    const clock = new FakeClock(Date.UTC(2026, 5, 1, 12, 0, 0));
    const r = await rig(integrationsCompany({ rate: 3 }), clock);
    const base = fixture("github-issue_comment-created");
    for (let i = 0; i < 50; i++) {
      const body = structuredClone(base.body);
      body.comment.body = `comment number ${i}`;
      body.comment.html_url = `https://github.com/octocat/Hello-World/issues/1347#issuecomment-${1000 + i}`;
      const res = await r.post("/hooks/github/gh", githubRequest(base, GH_SECRET, { delivery: fresh(), body }));
      expect(res.status).toBe(202);
    }
    await r.wait("47 held", () => r.sink.events("integration_wake_held").length === 47, 30_000);
    expect(r.inbox.get("cto")!.length).toBe(3);
    // The minute ends: one wake lists the 47.
    await clock.advance(62_000);
    await r.wait("the coalesced wake", () => r.inbox.get("cto")!.length === 4, 20_000);
    const coalesced = r.inbox.get("cto")![3]!;
    expect(coalesced.type).toBe("external_notification");
    expect(coalesced.text.split("\n")[0]).toContain("47 more notifications for @cto");
    // Every comment is in exactly one wake: the three let through, or the list.
    const numbers = (text: string) => [...text.matchAll(/comment number (\d+)\b/g)].map((m) => Number(m[1]));
    const single = r.inbox.get("cto")!.slice(0, 3).flatMap((t) => numbers(t.text));
    const listed = numbers(coalesced.text);
    expect(single.length).toBe(3);
    expect(listed.length).toBe(47);
    expect([...single, ...listed].sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    // The sweep finds nothing more to flush, and drops the finished window.
    await clock.advance(16_000);
    await Bun.sleep(300);
    expect(r.inbox.get("cto")!.length).toBe(4);
    await r.wait("the window's record retired", () => r.sink.events("integration_wake_coalesced").length === 1);
  }, 120_000);

  test("two handlers share one valve; when the node holding a window dies, a peer's sweep sends its wake", async () => {
    const clock = new FakeClock(Date.UTC(2026, 5, 1, 13, 0, 0));
    const company = integrationsCompany({ rate: 3 });
    const r = await rig(company, clock, 1);
    const base = fixture("github-issues-opened");
    await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const body = structuredClone(base.body);
        body.issue.title = `issue ${i}`;
        expect((await r.post("/hooks/github/gh", githubRequest(base, GH_SECRET, { delivery: fresh(), body }))).status).toBe(202);
      }),
    );
    await r.wait("17 held", () => r.sink.events("integration_wake_held").length === 17, 30_000);
    expect(r.inbox.get("cto")!.length).toBe(3);
    // Whichever of the two took each notification, together they let exactly three through.
    const published = r.sink.events("integration_wake_published").length;
    expect(published).toBe(3);
    // Every handler goes (the one with the flush timer among them) before the minute ends.
    for (const h of r.handlers) await h.stop();
    await clock.advance(62_000);
    await Bun.sleep(200);
    expect(r.inbox.get("cto")!.length).toBe(3);
    // A node that joins later sweeps the ended window and sends the one wake.
    const { log } = memoryLogger("warn");
    const late = new Integrations({ nodeId: "node-b", company: () => company, queue, claims: coord.slot("claims"), rate: coord.slot("rate"), clock, log });
    await late.startHandler();
    stops.push(() => late.stop());
    await clock.advance(20_000);
    await r.wait("the swept wake", () => r.inbox.get("cto")!.length === 4, 20_000);
    expect(r.inbox.get("cto")![3]!.text.split("\n")[0]).toContain("17 more notifications for @cto");
  }, 120_000);

  test("a notification handled twice (a redelivery, a second node) wakes the seat once", async () => {
    // A minute of its own: the valve's window (fleet-wide, outliving a rig) is not shared
    // with the wakes the inbound tests sent cto this minute on the system clock.
    const r = await rig(integrationsCompany(), new FakeClock(Date.UTC(2026, 5, 1, 14, 0, 0)));
    const res = await r.post("/hooks/github/gh", githubRequest(fixture("github-issues-opened"), GH_SECRET, { delivery: fresh() }));
    expect(res.status).toBe(202);
    await r.wait("cto's wake", () => r.inbox.get("cto")!.length === 1);
    // The same notification published again under another message id, as a replay past the
    // stream's duplicate window would be.
    const { encodeNotification } = await import("../../src/integrations/notification.ts");
    const { parseGithub } = await import("../../src/integrations/github.ts");
    const p = parseGithub("issues", fixture("github-issues-opened").body);
    if (p.status !== "event") throw new Error("not an event");
    const n = { v: 1 as const, integration: "gh", kind: "github" as const, delivery: res.json.delivery, seats: ["cto"], event: p.event, received_at: Date.now() };
    await queue.publish("crewlet.notifications.inbound", encodeNotification(n), { msgId: `replay-${fresh()}` });
    await r.wait("the replay handled", () => r.sink.events("integration_wake_published").length === 2);
    await Bun.sleep(300);
    expect(r.inbox.get("cto")!.length).toBe(1);
  }, 60_000);
});
