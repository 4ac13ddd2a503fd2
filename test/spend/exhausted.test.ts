// A budget exhausted mid-conversation, end to end on real parts (failure-rig.ts: a real
// nats-server queue, estate.db, an HTTP model endpoint): the round that crossed the cap
// is charged, the next call is not made, the person is told which cap and when it resets,
// and the delivery is settled (a dead letter an operator replays after the reset).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { budgetsSchema } from "../../src/config/budgets.ts";
import { NOTICE_PREFIX } from "../../src/agent/notice.ts";
import { FailureRig } from "../agent/failure-rig.ts";
import { openAiTextReply, openAiToolReply, startModelServer, type ModelServer } from "../agent/model-server.ts";
import { startNats, type TestNats } from "../support/nats.ts";

let server: ModelServer;
let nats: TestNats;
beforeAll(async () => {
  server = startModelServer();
  nats = await startNats(1);
});
afterAll(async () => {
  server.stop();
  await nats.stop();
});

test("a cap crossed by a round stops the next call; the person sees which cap and when it resets; the next message makes no call", async () => {
  // One tool round is 18 tokens (model-server's usage): the first round crosses a 10-token cap.
  const budgets = budgetsSchema.parse({ org: { day: { tokens: 10 } } });
  const r = await FailureRig.start({ wire: "openai", base_url: server.url, budgets }, nats);
  try {
    await r.attach("cto");
    server.script([openAiToolReply([{ id: "c1", name: "no_such_tool", args: {} }]), openAiTextReply("done")]);
    const { message_id, trigger } = await r.ask("cto", "plan the release");
    const end = await r.ending("cto", message_id, trigger.event_id);
    expect(server.requests.length).toBe(1);
    expect(end.where).toBe("dead_letter");
    expect(end.dead_letter!.reason).toContain("budget");
    const notice = end.thread.find(([a, b]) => a === "cto" && b.startsWith(NOTICE_PREFIX));
    expect(notice).toBeDefined();
    expect(notice![1]).toContain("the company's daily model budget of 10 tokens is spent; it resets");
    expect(notice![1]).toContain("(UTC)");
    const completed = r.turnsOn(trigger.event_id);
    expect(completed.map((t) => t.outcome)).toEqual(["budget_exhausted"]);
    expect(r.events.named("budget_exhausted")).toHaveLength(1);
    // The charge landed: 18 tokens in the org's day record.
    const [org] = await r.counters!.status([]);
    expect(org!.spent.tokens).toBe(18);
    expect(org!.exhausted).toBe(true);

    // The next message: refused before any call.
    const second = await r.ask("cto", "and another thing");
    const end2 = await r.ending("cto", second.message_id, second.trigger.event_id);
    expect(server.requests.length).toBe(1);
    expect(end2.where).toBe("dead_letter");
    expect(end2.thread.some(([a, b]) => a === "cto" && b.includes("daily model budget"))).toBe(true);
  } finally {
    await r.stop(true);
  }
});

test("counters that cannot be read refuse the call: no request reaches the endpoint, the message comes back with backoff and is given up on with the person told why", async () => {
  const budgets = budgetsSchema.parse({ org: { day: { tokens: 1_000_000 } } });
  const r = await FailureRig.start({ wire: "openai", base_url: server.url, budgets, budgets_unreadable: true }, nats);
  try {
    await r.attach("cto");
    server.script([openAiTextReply("should never be asked")]);
    const { message_id, trigger } = await r.ask("cto", "plan the release");
    const end = await r.ending("cto", message_id, trigger.event_id, 60_000);
    // Unknown spend is not spend under the cap: not one call was made.
    expect(server.requests.length).toBe(0);
    const turns = r.turnsOn(trigger.event_id);
    // Transient, like an endpoint that is down: NAKed with backoff until given up (3 deliveries here).
    expect(turns.map((t) => t.settle)).toEqual(["nak", "nak", "reject"]);
    expect(end.where).toBe("dead_letter");
    expect(r.events.named("budget_unknown").length).toBe(3);
    const told = end.thread.filter(([a, b]) => a === "cto" && b.startsWith(NOTICE_PREFIX));
    expect(told).toHaveLength(1);
    expect(told[0]![1]).toContain("my model budget cannot be read right now");
  } finally {
    await r.stop(true);
  }
}, 120_000);
