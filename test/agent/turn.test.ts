import { EstateInvalid } from "../../src/estate/router.ts";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { systemClock } from "../../src/clock.ts";
import { MemoryCoordination, StoreFaults } from "../../src/coord/index.ts";
import { memoryLogger } from "../../src/log.ts";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { CasConflict, StoreUnavailable } from "../../src/coord/contract.ts";
import { EstateUnavailable } from "../../src/estate/router.ts";
import { NOTICE_PREFIX } from "../../src/agent/notice.ts";
import { CompletionLedger } from "../../src/agent/ledger.ts";
import { openAiProvider } from "../../src/agent/providers/openai.ts";
import { buildProviders } from "../../src/agent/providers/index.ts";
import type { Provider } from "../../src/agent/providers/contract.ts";
import { TurnEngine, type ApprovalPort } from "../../src/agent/turn.ts";
import { REDELIVERY_BASE_MS } from "../../src/agent/classify.ts";
import { buildOrg } from "../../src/org/org.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import type { Tool } from "../../src/agent/tools/contract.ts";
import { LocalEstate, mentionTrigger, rootCompany, taskTrigger } from "./support.ts";
import { openAiTextReply, openAiToolReply, startModelServer, type ModelServer } from "./model-server.ts";

const company = rootCompany();
const org = buildOrg(company);
const { log } = memoryLogger("warn");
let server: ModelServer;
const estates: LocalEstate[] = [];
const queues: MemoryQueue[] = [];

beforeAll(() => {
  server = startModelServer();
});
afterAll(() => server.stop());
afterEach(async () => {
  for (const e of estates.splice(0)) e.close();
  for (const q of queues.splice(0)) await q.close();
});

interface Rig {
  estate: LocalEstate;
  events: MemoryEventSink;
  ledger: CompletionLedger;
  faults: StoreFaults;
  engine: (node: string, opts?: { provider?: Provider; extraTools?: Tool[]; approvals?: ApprovalPort }) => TurnEngine;
}

function rig(): Rig {
  const estate = new LocalEstate(company);
  estates.push(estate);
  const coord = new MemoryCoordination({ clock: systemClock, log });
  const faults = new StoreFaults(systemClock);
  const slot = coord.node({ faults }).slot("ledger");
  // A store that stays down is given up on after a second here, not the shipped 15 s.
  const ledger = new CompletionLedger(slot, systemClock, log, 1_000);
  const events = new MemoryEventSink();
  const queue = new MemoryQueue({ clock: systemClock, log });
  queues.push(queue);
  const scripted = buildProviders(company.providers.llm, systemClock);
  return {
    estate,
    events,
    ledger,
    faults,
    engine: (node, opts = {}) =>
      new TurnEngine({
        org: () => org,
        node_id: node,
        clock: systemClock,
        log,
        estate,
        queue,
        providerFor: (seat) => opts.provider ?? scripted.get(seat.llm ?? ""),
        mcpTools: () => opts.extraTools ?? [],
        ledger,
        events,
        approvals: opts.approvals ?? null,
      }),
  };
}

const owned = () => true;

/** A read-only MCP tool whose every call throws `error()`. */
function throwingTool(name: string, description: string, error: () => Error): Tool {
  return {
    name,
    description,
    input_schema: { type: "object" },
    annotations: { readOnly: true, openWorld: false, estateWrite: false, source: "mcp" },
    call: async () => {
      throw error();
    },
  };
}

/** No retry budget: one call per round, so a scripted failure ends the turn at once. */
function openai(): Provider {
  return openAiProvider({ name: "gpt", base_url: server.url, model: "m", api_keys: [], timeout_ms: 5_000, retry_budget_ms: 0, random: () => 0, clock: systemClock });
}

describe("the default company (scripted provider)", () => {
  test("@ceo asked for a plan → work items for @cto and @pm and one reply in the thread; a redelivery is skipped", async () => {
    const r = rig();
    const msg = await r.estate.post("general", "founder", "@ceo we need a plan for the Q3 launch");
    const trigger = mentionTrigger("ceo", "general", msg, "@ceo we need a plan for the Q3 launch");
    const report = await r.engine("node-a").run({ seat: "ceo", epoch: 1, fence: owned, triggers: [trigger] });
    expect(report.settle).toBe("ack");
    expect(report.outcome).toBe("completed");
    expect(report.tool_calls).toBe(2);
    expect(report.rounds).toBe(2);

    const eng = await r.estate.read({ q: "work.list", project: "ENG", limit: 10 });
    const ops = await r.estate.read({ q: "work.list", project: "OPS", limit: 10 });
    expect(eng.items.map((i) => [i.key, i.assignee, i.reporter])).toEqual([["ENG-1", "cto", "ceo"]]);
    expect(ops.items.map((i) => [i.key, i.assignee])).toEqual([["OPS-1", "pm"]]);
    expect(eng.items[0]!.title).toBe("Technical plan: @ceo we need a plan for the Q3 launch");

    const thread = await r.estate.thread("general", msg);
    expect(thread.map((m) => m.author)).toEqual(["founder", "ceo"]);
    expect(thread[1]!.body).toContain("@cto owns the technical plan");
    // An automatic reply wakes no agent seat (no agent ping-pong).
    expect(thread[1]!.mentions).toEqual([]);

    const started = r.events.named("turn_started")[0]!;
    const done = r.events.named("turn_completed")[0]!;
    expect(started).toMatchObject({ seat: "ceo", node: "node-a", epoch: 1, trigger_ids: [trigger.event_id] });
    expect(done).toMatchObject({ seat: "ceo", outcome: "completed", rounds: 2, tool_calls: 2, settle: "ack" });
    // Who asked and where, on both: the dashboard says "ceo answered founder in #general".
    expect(started).toMatchObject({ from: trigger.from, conversation: trigger.conversation });
    expect(done).toMatchObject({ from: trigger.from, conversation: trigger.conversation });

    // The node died before the ack: the successor (another node) gets the redelivery.
    const again = await r.engine("node-b").run({ seat: "ceo", epoch: 2, fence: owned, triggers: [trigger] });
    expect(again.outcome).toBe("skipped");
    expect(again.skipped).toEqual([trigger.event_id]);
    expect(r.events.named("turn_trigger_skipped")).toEqual([
      expect.objectContaining({ seat: "ceo", event_id: trigger.event_id, reason: "already_completed", by_node: "node-a" }),
    ]);
    expect((await r.estate.thread("general", msg)).length).toBe(2);
    expect((await r.estate.read({ q: "work.list", limit: 10 })).items.length).toBe(2);
  });

  test("a task assigned to @cto → a comment and in_progress, no chat reply", async () => {
    const r = rig();
    await r.estate.write("tracker", { op: "work.create", project: "ENG", reporter: "ceo", type: "task", title: "Technical plan", body: "", status: "todo", priority: "none", assignee: "cto", parent: null, labels: [], due: null });
    const report = await r.engine("node-a").run({ seat: "cto", epoch: 1, fence: owned, triggers: [taskTrigger("cto", "ENG-1", "Technical plan")] });
    expect(report.outcome).toBe("completed");
    expect(report.final_text).toBe("Started ENG-1.");
    const got = await r.estate.read({ q: "work.get", key: "ENG-1" });
    expect(got!.item.status).toBe("in_progress");
    expect(got!.comments.map((c) => [c.author, c.body])).toEqual([["cto", "Picked up by @cto; first draft today."]]);
    expect(r.estate.writes.filter((w) => w.domain === "chat").length).toBe(0);
  });

  test("the ledger fails open: unreadable → the turn runs; unwritable → still acked", async () => {
    const r = rig();
    r.faults.unreachable = true;
    const msg = await r.estate.post("general", "founder", "@pm hello");
    const report = await r.engine("node-a").run({ seat: "pm", epoch: 1, fence: owned, triggers: [mentionTrigger("pm", "general", msg, "@pm hello")] });
    expect(report.settle).toBe("ack");
    expect(report.outcome).toBe("completed");
    expect((await r.estate.thread("general", msg)).map((m) => m.body)).toEqual(["@pm hello", "Noted, @founder. (pm)"]);
  });

  test("a reply whose write answered unknown is written again as the same write: one answer in the thread", async () => {
    const r = rig();
    const msg = await r.estate.post("general", "founder", "@pm hello");
    let lost = 0;
    r.estate.loseAnswer = (domain, body) => domain === "chat" && (body as { author?: string }).author === "pm" && lost++ === 0;
    const report = await r.engine("node-a").run({ seat: "pm", epoch: 1, fence: owned, triggers: [mentionTrigger("pm", "general", msg, "@pm hello")] });
    expect(report.settle).toBe("ack");
    expect(r.estate.writes.filter((w) => w.domain === "chat" && (w.body as { author?: string }).author === "pm").length).toBe(2);
    expect((await r.estate.thread("general", msg)).map((m) => m.body)).toEqual(["@pm hello", "Noted, @founder. (pm)"]);
  });

  test("a reply whose write never landed is owed, not said: its delivery comes back and the next run posts it, once", async () => {
    const r = rig();
    const msg = await r.estate.post("general", "founder", "@pm hello");
    const trigger = mentionTrigger("pm", "general", msg, "@pm hello");
    let cut = true;
    r.estate.dropWrite = (domain, body) => cut && domain === "chat" && (body as { author?: string }).author === "pm";
    const first = await r.engine("node-a").run({ seat: "pm", epoch: 1, fence: owned, triggers: [trigger] });
    expect({ outcome: first.outcome, settle: first.settle }).toEqual({ outcome: "completed", settle: "nak" });
    expect(first.delay_ms).toBeGreaterThan(0);
    expect((await r.estate.thread("general", msg)).map((m) => m.body)).toEqual(["@pm hello"]);

    // Still cut off: owed again, and the turn is not run again.
    const second = await r.engine("node-a").run({ seat: "pm", epoch: 1, fence: owned, triggers: [trigger], delivery_count: 2 });
    expect({ outcome: second.outcome, settle: second.settle, turn_id: second.turn_id }).toEqual({ outcome: "skipped", settle: "nak", turn_id: null });

    cut = false; // healed: the seat's next holder posts the owed reply and runs nothing
    const third = await r.engine("node-b").run({ seat: "pm", epoch: 2, fence: owned, triggers: [trigger], delivery_count: 3 });
    expect({ outcome: third.outcome, settle: third.settle }).toEqual({ outcome: "skipped", settle: "ack" });
    const fourth = await r.engine("node-b").run({ seat: "pm", epoch: 2, fence: owned, triggers: [trigger], delivery_count: 4 });
    expect(fourth.settle).toBe("ack");
    expect((await r.estate.thread("general", msg)).map((m) => m.body)).toEqual(["@pm hello", "Noted, @founder. (pm)"]);
    expect(r.events.named("turn_started")).toHaveLength(1);
  });

  test("a reply no data node took, after the turn's calls reached outside, is owed: the answer comes later, not a failure notice, and nothing runs twice", async () => {
    const r = rig();
    const msg = await r.estate.post("general", "founder", "@ceo we need a plan for the Q3 launch");
    const trigger = mentionTrigger("ceo", "general", msg, "@ceo we need a plan for the Q3 launch");
    let cut = true;
    r.estate.beforeWrite = (domain, body) => {
      if (cut && domain === "chat" && (body as { author?: string }).author === "ceo") throw new EstateUnavailable("write reply", {});
    };
    const first = await r.engine("node-a").run({ seat: "ceo", epoch: 1, fence: owned, triggers: [trigger] });
    expect({ outcome: first.outcome, settle: first.settle }).toEqual({ outcome: "completed", settle: "nak" });
    expect((await r.estate.thread("general", msg)).map((m) => m.author)).toEqual(["founder"]);
    cut = false;
    const again = await r.engine("node-b").run({ seat: "ceo", epoch: 2, fence: owned, triggers: [trigger], delivery_count: 2 });
    expect({ outcome: again.outcome, settle: again.settle }).toEqual({ outcome: "skipped", settle: "ack" });
    const thread = await r.estate.thread("general", msg);
    expect(thread.map((m) => m.author)).toEqual(["founder", "ceo"]);
    expect(thread[1]!.body).toContain("@cto owns the technical plan");
    expect(thread.some((m) => m.body.startsWith(NOTICE_PREFIX))).toBe(false);
    expect((await r.estate.read({ q: "work.list", project: "ENG", limit: 10 })).items).toHaveLength(1);
    expect(r.events.named("turn_started")).toHaveLength(1);
  });

  test("an owed reply the store refuses for good ends in a notice to the person, and the delivery is acked", async () => {
    const r = rig();
    const msg = await r.estate.post("general", "founder", "@pm hello");
    const trigger = mentionTrigger("pm", "general", msg, "@pm hello");
    let cut = true;
    const isReply = (domain: string, body: unknown) => domain === "chat" && (body as { body?: string }).body?.startsWith("Noted") === true;
    r.estate.dropWrite = (domain, body) => cut && isReply(domain, body);
    const first = await r.engine("node-a").run({ seat: "pm", epoch: 1, fence: owned, triggers: [trigger] });
    expect(first.settle).toBe("nak");
    cut = false;
    // Healed, but the reply can never land now (say its thread was removed meanwhile).
    r.estate.beforeWrite = (domain, body) => {
      if (isReply(domain, body)) throw new EstateInvalid("thread_parent: no such message", "thread_parent", "invalid_record");
    };
    const second = await r.engine("node-b").run({ seat: "pm", epoch: 2, fence: owned, triggers: [trigger], delivery_count: 2 });
    expect({ outcome: second.outcome, settle: second.settle }).toEqual({ outcome: "skipped", settle: "ack" });
    const thread = (await r.estate.thread("general", msg)).map((m) => m.body);
    expect(thread).toHaveLength(2);
    expect(thread[1]).toContain("My reply could not be posted");
    expect(r.events.named("turn_started")).toHaveLength(1);
  });

  test("a ledger write that meets an election is retried before the ack, so a redelivery is skipped", async () => {
    const r = rig();
    const msg = await r.estate.post("general", "founder", "@pm hello");
    const trigger = mentionTrigger("pm", "general", msg, "@pm hello");
    // The store goes away at the turn's first ledger write and comes back 400 ms later
    // (an election): the record must still land before the turn settles.
    r.faults.onOp = (op) => {
      if (op.kind !== "put") return;
      r.faults.onOp = null;
      r.faults.unreachable = true;
      setTimeout(() => (r.faults.unreachable = false), 400);
      throw new StoreUnavailable("put crewlet_ledger: 503 (injected election)");
    };
    const first = await r.engine("node-a").run({ seat: "pm", epoch: 1, fence: owned, triggers: [trigger] });
    expect(first.settle).toBe("ack");
    const again = await r.engine("node-b").run({ seat: "pm", epoch: 2, fence: owned, triggers: [trigger] });
    expect(again.outcome).toBe("skipped");
    expect((await r.estate.thread("general", msg)).map((m) => m.body)).toEqual(["@pm hello", "Noted, @founder. (pm)"]);
  });
});

describe("a turn that broke", () => {
  test("transiently, before anything reached outside → NAK with a delay; the redelivery runs and succeeds", async () => {
    const r = rig();
    const msg = await r.estate.post("general", "founder", "@cto status?");
    const trigger = mentionTrigger("cto", "general", msg, "@cto status?");
    server.script([{ status: 503, text: "model busy" }]);
    const first = await r.engine("node-a", { provider: openai() }).run({ seat: "cto", epoch: 1, fence: owned, triggers: [trigger] });
    expect(first.settle).toBe("nak");
    expect(first.delay_ms).toBe(REDELIVERY_BASE_MS);
    expect(first.outcome).toBe("retry");
    expect(first.reached_outside).toBe(false);
    expect(r.estate.writes.length).toBe(1); // only the person's post

    server.script([openAiTextReply("All green.")]);
    const second = await r.engine("node-a", { provider: openai() }).run({ seat: "cto", epoch: 1, fence: owned, triggers: [trigger] });
    expect(second.settle).toBe("ack");
    expect((await r.estate.thread("general", msg)).map((m) => [m.author, m.body])).toEqual([
      ["founder", "@cto status?"],
      ["cto", "All green."],
    ]);
  });

  test("after an estate write → recorded and acked, published failed, never re-run", async () => {
    const r = rig();
    const msg = await r.estate.post("general", "founder", "@cto file it");
    const trigger = mentionTrigger("cto", "general", msg, "@cto file it");
    server.script([openAiToolReply([{ id: "c1", name: "work_create", args: { project: "ENG", title: "Filed" } }]), { status: 400, text: "context too long" }]);
    const first = await r.engine("node-a", { provider: openai() }).run({ seat: "cto", epoch: 1, fence: owned, triggers: [trigger] });
    expect(first).toMatchObject({ settle: "ack", outcome: "failed", reached_outside: true });
    expect(r.events.named("turn_completed")[0]).toMatchObject({ outcome: "failed" });
    expect(r.events.named("turn_trigger_skipped")[0]).toMatchObject({ event_id: trigger.event_id, reason: "turn_failed_after_reaching_outside" });

    server.script([openAiToolReply([{ id: "c2", name: "work_create", args: { project: "ENG", title: "Filed twice" } }])]);
    const again = await r.engine("node-b", { provider: openai() }).run({ seat: "cto", epoch: 2, fence: owned, triggers: [trigger] });
    expect(again.outcome).toBe("skipped");
    expect((await r.estate.read({ q: "work.list", project: "ENG", limit: 10 })).items.map((i) => i.title)).toEqual(["Filed"]);
  });

  test("an unexpected exception → recorded, acked, turn.guard_breach", async () => {
    const r = rig();
    const boom = throwingTool("explode", "a defect", () => new TypeError("cannot read properties of undefined"));
    const msg = await r.estate.post("general", "founder", "@pm go");
    const trigger = mentionTrigger("pm", "general", msg, "@pm go");
    server.script([openAiToolReply([{ id: "c1", name: "explode", args: {} }])]);
    const report = await r.engine("node-a", { provider: openai(), extraTools: [boom] }).run({ seat: "pm", epoch: 1, fence: owned, triggers: [trigger] });
    expect(report).toMatchObject({ settle: "ack", outcome: "failed", reached_outside: false });
    expect(r.events.named("turn.guard_breach")[0]).toMatchObject({ seat: "pm", kind: "unhandled_exception" });
    const check = await r.ledger.check([trigger]);
    expect(check.skip.length).toBe(1);
  });
  test("a store race lost past its retries (CasConflict) while taking a decision → a retry, not a recorded defect", async () => {
    const r = rig();
    const msg = await r.estate.post("general", "founder", "@pm go");
    const decided = { ...mentionTrigger("pm", "general", msg, "@pm go"), type: "approval_decided" as const, event_id: "approval.ap-0123456789abcdef0123.decided" };
    const racing: ApprovalPort = {
      intercept: async () => null,
      resume: async () => {
        throw new CasConflict("pm.ap-0123456789abcdef0123", 7);
      },
    };
    const report = await r.engine("node-a", { approvals: racing }).run({ seat: "pm", epoch: 1, fence: owned, triggers: [decided] });
    expect(report).toMatchObject({ settle: "nak", outcome: "retry", reached_outside: false });
    expect(r.events.named("turn.guard_breach")).toEqual([]);
    expect((await r.ledger.check([decided])).skip).toEqual([]);
    expect((await r.estate.thread("general", msg)).map((m) => m.body)).toEqual(["@pm go"]);
  });
});

describe("a failure the person must hear", () => {
  const storeDown = throwingTool("list_runs", "reads the fleet's store, which a cut-off node cannot reach", () => new StoreUnavailable("list crewlet_runs pm.*: 503"));
  const explode = throwingTool("explode", "a defect", () => new TypeError("cannot read properties of undefined"));

  test("a store that answers 503 to a tool (a cut-off node) is told to the model, not a defect that ends the turn", async () => {
    const r = rig();
    const msg = await r.estate.post("general", "founder", "@pm go");
    const trigger = mentionTrigger("pm", "general", msg, "@pm go");
    server.script([openAiToolReply([{ id: "c1", name: "list_runs", args: {} }]), openAiTextReply("The run store is away; I will try again.")]);
    const report = await r.engine("node-a", { provider: openai(), extraTools: [storeDown] }).run({ seat: "pm", epoch: 1, fence: owned, triggers: [trigger] });
    expect(report).toMatchObject({ settle: "ack", outcome: "completed" });
    expect(r.events.named("tool_called")[0]).toMatchObject({ tool: "list_runs", ok: false });
    expect(r.events.named("turn.guard_breach").length).toBe(0);
  });

  test("a notice that could not be posted keeps the delivery; the redelivery, skipped by the ledger, tells it once", async () => {
    const r = rig();
    const msg = await r.estate.post("general", "founder", "@pm go");
    const trigger = mentionTrigger("pm", "general", msg, "@pm go");
    r.estate.beforeWrite = (domain, body) => {
      if (domain === "chat" && (body as { author?: string }).author === "pm") throw new EstateUnavailable("chat.post", {});
    };
    server.script([openAiToolReply([{ id: "c1", name: "explode", args: {} }])]);
    const first = await r.engine("node-a", { provider: openai(), extraTools: [explode] }).run({ seat: "pm", epoch: 1, fence: owned, triggers: [trigger] });
    expect(first).toMatchObject({ settle: "nak", outcome: "failed", delay_ms: REDELIVERY_BASE_MS });
    expect((await r.estate.thread("general", msg)).length).toBe(1);

    // Still cut off at the first redelivery: held again, not dropped.
    const held = await r.engine("node-b").run({ seat: "pm", epoch: 2, fence: owned, triggers: [trigger], delivery_count: 2 });
    expect(held).toMatchObject({ settle: "nak", outcome: "skipped", delay_ms: REDELIVERY_BASE_MS * 2 });

    r.estate.beforeWrite = null;
    for (const node of ["node-b", "node-c"]) {
      const again = await r.engine(node).run({ seat: "pm", epoch: 2, fence: owned, triggers: [trigger], delivery_count: 3 });
      expect(again).toMatchObject({ settle: "ack", outcome: "skipped" });
    }
    const thread = await r.estate.thread("general", msg);
    expect(thread.map((m) => m.author)).toEqual(["founder", "pm"]);
    expect(thread[1]!.body.startsWith(NOTICE_PREFIX)).toBe(true);
  });
});

describe("the fence", () => {
  test("trips mid-turn after a read → no further tool call, deferred, not recorded", async () => {
    const r = rig();
    const msg = await r.estate.post("general", "founder", "@cto plan");
    const trigger = mentionTrigger("cto", "general", msg, "@cto plan");
    let moved = false;
    const probe: Tool = {
      name: "probe",
      description: "read-only probe; the seat moves while it runs",
      input_schema: { type: "object" },
      annotations: { readOnly: true, openWorld: false, estateWrite: false, source: "mcp" },
      call: async () => {
        moved = true;
        return { content: "ok", is_error: false };
      },
    };
    server.script([
      openAiToolReply([
        { id: "c1", name: "probe", args: {} },
        { id: "c2", name: "work_create", args: { project: "ENG", title: "must not exist" } },
      ]),
    ]);
    const report = await r.engine("node-a", { provider: openai(), extraTools: [probe] }).run({ seat: "cto", epoch: 3, fence: () => !moved, triggers: [trigger] });
    expect(report).toMatchObject({ settle: "defer", outcome: "deferred", tool_calls: 1, reached_outside: false });
    expect(r.events.named("tool_called").map((e) => e.tool)).toEqual(["probe"]);
    expect((await r.estate.read({ q: "work.list", limit: 10 })).items).toEqual([]);
    expect((await r.ledger.check([trigger])).run.length).toBe(1);
    // The new owner is served the delivery and runs it.
    server.script([openAiTextReply("Plan coming.")]);
    const next = await r.engine("node-b", { provider: openai() }).run({ seat: "cto", epoch: 4, fence: owned, triggers: [trigger] });
    expect(next.settle).toBe("ack");
  });

  test("trips after a write → no further call; acked and recorded (a successor would repeat the write)", async () => {
    const r = rig();
    const msg = await r.estate.post("general", "founder", "@cto two items");
    const trigger = mentionTrigger("cto", "general", msg, "@cto two items");
    let writes = 0;
    r.estate.beforeWrite = (domain) => void (domain === "tracker" && (writes += 1));
    server.script([
      openAiToolReply([
        { id: "c1", name: "work_create", args: { project: "ENG", title: "one" } },
        { id: "c2", name: "work_create", args: { project: "ENG", title: "two" } },
      ]),
    ]);
    const report = await r.engine("node-a", { provider: openai() }).run({ seat: "cto", epoch: 1, fence: () => writes === 0, triggers: [trigger] });
    expect(report).toMatchObject({ settle: "ack", outcome: "failed", tool_calls: 1, reached_outside: true });
    expect((await r.estate.read({ q: "work.list", limit: 10 })).items.map((i) => i.title)).toEqual(["one"]);
    expect((await r.ledger.check([trigger])).skip.length).toBe(1);
  });

  test("a stale fence at the top of the first round runs nothing", async () => {
    const r = rig();
    const msg = await r.estate.post("general", "founder", "@pm hi");
    const report = await r.engine("node-a").run({ seat: "pm", epoch: 1, fence: () => false, triggers: [mentionTrigger("pm", "general", msg, "@pm hi")] });
    expect(report).toMatchObject({ settle: "defer", rounds: 0, tool_calls: 0 });
  });
});

describe("threads and the second ledger key", () => {
  test("waiting messages the thread showed are recorded; their retry is skipped", async () => {
    const r = rig();
    const root = await r.estate.post("general", "founder", "@pm first question");
    const second = await r.estate.post("general", "founder", "@pm second question", root);
    // The first message's turn failed before reaching outside (NAK'd); the second runs first.
    const report = await r.engine("node-a").run({ seat: "pm", epoch: 1, fence: owned, triggers: [mentionTrigger("pm", "general", second, "@pm second question")] });
    expect(report.outcome).toBe("completed");
    const retry = await r.engine("node-a").run({ seat: "pm", epoch: 1, fence: owned, triggers: [mentionTrigger("pm", "general", root, "@pm first question")] });
    expect(retry.outcome).toBe("skipped");
    expect(r.events.named("turn_trigger_skipped")[0]).toMatchObject({ reason: "answered_in_thread" });
    expect((await r.estate.thread("general", root)).filter((m) => m.author === "pm").length).toBe(1);
  });
});
