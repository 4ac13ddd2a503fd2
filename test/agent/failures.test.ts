// Every kind of model-endpoint failure, end to end on real parts (failure-rig.ts: a real
// nats-server queue, a real estate.db, a real HTTP endpoint speaking the OpenAI or the
// Anthropic wire). Each test asserts what the person sees in their thread, how many calls
// the endpoint got and when, and where the message ended: answered, dead letter with a
// reason, or handed back.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { NOTICE_PREFIX, Notifier } from "../../src/agent/notice.ts";
import { createApp } from "../../src/api/app.ts";
import { TokenAuth } from "../../src/api/auth.ts";
import { agentsGroup } from "../../src/api/routes/agents.ts";
import { GRANTS } from "../../src/config/tier-a.ts";
import { memoryLogger, silentLogger } from "../../src/log.ts";
import { buildOrg } from "../../src/org/org.ts";
import { commentTrigger, directTrigger, mentionTrigger, rootCompany, taskTrigger } from "./support.ts";
import { MAX_ATTEMPTS } from "../../src/agent/providers/http.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { FailureRig, TEST_REDELIVERY, type Wire } from "./failure-rig.ts";
import { anthropicStream, anthropicTextReply, openAiStream, openAiTextReply, openAiToolReply, startModelServer, type ModelServer, type Reply } from "./model-server.ts";

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

const KEY = "sk-test-live-9f8e7d6c5b4a3210";
const TOKEN = "api-token-for-the-redaction-check-77";

async function rig(wire: Wire, extra: Partial<Parameters<typeof FailureRig.start>[0]> = {}): Promise<FailureRig> {
  const r = await FailureRig.start({ wire, base_url: server.url, api_keys: [KEY], secrets: [TOKEN], ...extra }, nats);
  await r.attach("cto");
  return r;
}

const text = (wire: Wire, s: string): Reply => (wire === "openai" ? openAiTextReply(s) : anthropicTextReply(s));
const errorBody = (wire: Wire, type: string, message: string) =>
  wire === "openai" ? { error: { message, type, code: type } } : { type: "error", error: { type, message } };

/** What GET /agents/cto answers on the node running the rig's engine. */
async function agentRow(r: FailureRig): Promise<{ turns: { last_error: string | null; last_error_at: number | null } }> {
  const org = buildOrg(rootCompany());
  const group = agentsGroup({
    nodeId: "node-a",
    org: () => org,
    status: (h) => r.engine.status(h),
    // The rig's engine holds cto here (the lease view /agents reads).
    leases: async () => ({ nodes: [], leases: [{ handle: "cto", node: "node-a", owner: "node-a:x", epoch: 1, since: Date.now(), expires_in_ms: 45_000 }], unplaceable: [], unmanned_roles: [] }),
  });
  const app = createApp({ auth: new TokenAuth([{ id: "ops", token: TOKEN, grants: [...GRANTS] }]), log: silentLogger, health: { health: () => ({ ok: true }), notReadyReason: () => null }, groups: [group] });
  const res = await app.request("/agents/cto", { headers: { authorization: `Bearer ${TOKEN}` } });
  expect(res.status).toBe(200);
  return (await res.json()) as { turns: { last_error: string | null; last_error_at: number | null } };
}

/** Nothing the person, the dead letter or /agents shows carries a secret or the raw body. */
function expectClean(r: FailureRig, shown: string[]): void {
  const status = r.engine.status("cto");
  for (const s of [...shown, status.last_error ?? ""]) {
    expect(s).not.toContain(KEY);
    expect(s).not.toContain(TOKEN);
  }
}

const wires: Wire[] = ["openai", "anthropic"];

/** The DM between the founder and cto. */
const DM = "dm.cto.founder";

/** The founder writes to cto in their DM (the trigger not yet published). */
async function directMessage(r: FailureRig, body: string): Promise<{ message_id: string; trigger: ReturnType<typeof directTrigger> }> {
  const out = await r.estate.write("chat", { op: "chat.post", channel: DM, author: "founder", body, thread_parent: null, mentions: [], dm: { members: ["cto", "founder"] } });
  if (out.status !== "applied" || !out.outcome.ok) throw new Error(`dm failed: ${JSON.stringify(out)}`);
  const message_id = out.outcome.message_id as string;
  return { message_id, trigger: directTrigger("cto", DM, message_id, body) };
}

/** A task assigned to cto and the founder's comment on it (the comment's trigger not yet published). */
async function commentedTask(r: FailureRig, body: string): Promise<{ work_key: string; trigger: ReturnType<typeof commentTrigger> }> {
  const created = await r.estate.write("tracker", { op: "work.create", project: "ENG", type: "task", title: "Fix the build", body: "", status: "todo", priority: "medium", assignee: "cto", parent: null, labels: [], due: null, reporter: "founder" });
  if (created.status !== "applied" || !created.outcome.ok) throw new Error(`work.create failed: ${JSON.stringify(created)}`);
  const work_key = created.outcome.key as string;
  const commented = await r.estate.write("tracker", { op: "work.comment", key: work_key, author: "founder", body });
  if (commented.status !== "applied" || !commented.outcome.ok) throw new Error(`work.comment failed: ${JSON.stringify(commented)}`);
  return { work_key, trigger: commentTrigger("cto", work_key, commented.outcome.comment_id as string, body) };
}

describe.each(wires)("%s wire: permanent failures are told at once, never retried", (wire) => {
  test.each([
    [401, "authentication_error", `Incorrect API key provided: ${KEY}; token ${TOKEN}`, "refused the API key (401) — check providers.llm.model.api_keys"],
    [403, "permission_error", "not allowed", "refused this key access (403)"],
    [404, "not_found_error", "model test-model does not exist", "404 Not Found — check providers.llm.model.base_url and providers.llm.model.model"],
    [400, "invalid_request_error", "tools[0].function.parameters is invalid", "rejected the request as invalid (400)"],
  ] as const)("HTTP %p → one call, one notice in the thread, dead letter with the reason", async (status, type, body, words) => {
    const r = await rig(wire);
    try {
      server.script([{ status, json: errorBody(wire, type, body) }]);
      const { message_id, trigger } = await r.ask("cto", "status?");
      const end = await r.ending("cto", message_id, trigger.event_id);
      expect(end.where).toBe("dead_letter");
      expect(server.requests.length).toBe(1);
      expect(end.thread).toHaveLength(2);
      const [author, notice] = end.thread[1]!;
      expect(author).toBe("cto");
      expect(notice.startsWith(NOTICE_PREFIX)).toBe(true);
      expect(notice).toContain(words);
      expect(notice).not.toContain(body.slice(0, 20));
      expect(end.dead_letter!.reason).toContain("permanent");
      expect(end.dead_letter!.deliveryCount).toBe(1);
      const row = await agentRow(r);
      expect(row.turns.last_error).toContain(`HTTP ${status}`);
      expect(row.turns.last_error_at).toBeGreaterThan(Date.now() - 60_000);
      expectClean(r, [notice, end.dead_letter!.reason, JSON.stringify(r.events.events), ...r.logs.lines.map((l) => JSON.stringify(l))]);
    } finally {
      await r.stop(true);
    }
  });

  test("a 200 whose body is not the wire format → one call, told to check base_url and type", async () => {
    const r = await rig(wire);
    try {
      server.script([{ text: "<html><body>Sign in to the proxy</body></html>" }]);
      const { message_id, trigger } = await r.ask("cto", "status?");
      const end = await r.ending("cto", message_id, trigger.event_id);
      expect(end.where).toBe("dead_letter");
      expect(server.requests.length).toBe(1);
      expect(end.thread[1]![1]).toContain("not the model API — check providers.llm.model.base_url and providers.llm.model.type");
      expect(end.thread[1]![1]).not.toContain("Sign in");
    } finally {
      await r.stop(true);
    }
  });

  test("context too long → one call, told to start a new thread", async () => {
    const r = await rig(wire);
    try {
      const msg = wire === "openai" ? "This model's maximum context length is 8192 tokens" : "prompt is too long: 210000 tokens > 200000 maximum";
      server.script([{ status: 400, json: errorBody(wire, wire === "openai" ? "context_length_exceeded" : "invalid_request_error", msg) }]);
      const { message_id, trigger } = await r.ask("cto", "summarise everything");
      const end = await r.ending("cto", message_id, trigger.event_id);
      expect(end.where).toBe("dead_letter");
      expect(server.requests.length).toBe(1);
      expect(end.thread[1]![1]).toContain("no longer fits my model's context window — start a new thread");
      expect(end.dead_letter!.reason).toContain("context_too_long");
    } finally {
      await r.stop(true);
    }
  });
});

describe.each(wires)("%s wire: transient failures back off, then give up and tell", (wire) => {
  test("HTTP 500 on every call: MAX_ATTEMPTS calls per delivery, delayed redeliveries, then one notice and a dead letter", async () => {
    const r = await rig(wire);
    try {
      server.script([{ status: 500, json: errorBody(wire, "api_error", "internal error") }]);
      const { message_id, trigger } = await r.ask("cto", "status?");
      const end = await r.ending("cto", message_id, trigger.event_id);
      expect(end.where).toBe("dead_letter");
      const deliveries = TEST_REDELIVERY.give_up_after;
      expect(end.reports).toBe(deliveries);
      expect(server.requests.length).toBe(MAX_ATTEMPTS * deliveries);
      // Each redelivery waited at least its NAK delay (base, then doubled) after the last call.
      for (let d = 1; d < deliveries; d++) {
        const lastOfPrev = server.requests[d * MAX_ATTEMPTS - 1]!.at;
        const firstOfNext = server.requests[d * MAX_ATTEMPTS]!.at;
        expect(firstOfNext - lastOfPrev).toBeGreaterThanOrEqual(TEST_REDELIVERY.base_ms * 2 ** (d - 1) - 5);
      }
      expect(end.thread.filter(([a]) => a === "cto")).toHaveLength(1);
      expect(end.thread[1]![1]).toContain("kept failing (HTTP 500)");
      expect(end.thread[1]![1]).toContain(`I tried ${deliveries} times`);
      expect(end.dead_letter!.deliveryCount).toBe(deliveries);
      expect(end.dead_letter!.reason).toContain("transient");
    } finally {
      await r.stop(true);
    }
  });

  test("503 then an answer on the next delivery: answered, no notice", async () => {
    const r = await rig(wire);
    try {
      server.script([...Array.from({ length: MAX_ATTEMPTS }, () => ({ status: 503, text: "busy" })), text(wire, "All green.")]);
      const { message_id, trigger } = await r.ask("cto", "status?");
      const end = await r.ending("cto", message_id, trigger.event_id);
      expect(end.where).toBe("answered");
      expect(server.requests.length).toBe(MAX_ATTEMPTS + 1);
      expect(server.requests[MAX_ATTEMPTS]!.at - server.requests[MAX_ATTEMPTS - 1]!.at).toBeGreaterThanOrEqual(TEST_REDELIVERY.base_ms - 5);
      expect(end.thread).toEqual([
        ["founder", "@cto status?"],
        ["cto", "All green."],
      ]);
    } finally {
      await r.stop(true);
    }
  });

  test("429 with Retry-After: the retry inside the turn waits as asked, then answers", async () => {
    const r = await rig(wire);
    try {
      server.script([{ status: 429, headers: { "retry-after": "1" }, json: errorBody(wire, "rate_limit_error", "slow down") }, text(wire, "Done.")]);
      const { message_id, trigger } = await r.ask("cto", "status?");
      const end = await r.ending("cto", message_id, trigger.event_id);
      expect(end.where).toBe("answered");
      expect(end.reports).toBe(1);
      expect(server.requests.length).toBe(2);
      expect(server.requests[1]!.at - server.requests[0]!.at).toBeGreaterThanOrEqual(995);
      expect(end.thread[1]).toEqual(["cto", "Done."]);
    } finally {
      await r.stop(true);
    }
  });

  test("a hung endpoint is abandoned at the first-byte timeout; after the last delivery the person hears it", async () => {
    const r = await rig(wire, { settings: { first_byte_timeout_seconds: 0.3, retry_budget_seconds: 0 } });
    try {
      server.script([{ hang: true }]);
      const { message_id, trigger } = await r.ask("cto", "status?");
      const end = await r.ending("cto", message_id, trigger.event_id);
      expect(end.where).toBe("dead_letter");
      expect(server.requests.length).toBe(TEST_REDELIVERY.give_up_after);
      expect(end.thread[1]![1]).toContain("did not answer in time");
      expect(r.engine.status("cto").last_error).toContain("first-byte timeout");
    } finally {
      await r.stop(true);
    }
  });

  test("a refused connection: no call lands, the person is told to check base_url", async () => {
    const r = await rig(wire, { base_url: "http://127.0.0.1:9", settings: { retry_budget_seconds: 0 } });
    try {
      server.script([text(wire, "never")]);
      const { message_id, trigger } = await r.ask("cto", "status?");
      const end = await r.ending("cto", message_id, trigger.event_id);
      expect(end.where).toBe("dead_letter");
      expect(server.requests.length).toBe(0);
      expect(end.thread[1]![1]).toContain("could not connect to my model endpoint — check providers.llm.model.base_url");
    } finally {
      await r.stop(true);
    }
  });

  test("streamed: a stream that stalls is abandoned at the idle timeout and retried; the retry answers", async () => {
    const r = await rig(wire, { settings: { stream: true, idle_timeout_seconds: 0.3 } });
    try {
      const stalled = wire === "openai" ? openAiStream(["partial"]) : anthropicStream(["partial"]);
      const good = wire === "openai" ? openAiStream(["All ", "green."]) : anthropicStream(["All ", "green."]);
      server.script([{ ...stalled, stall_after: 1 }, good]);
      const { message_id, trigger } = await r.ask("cto", "status?");
      const end = await r.ending("cto", message_id, trigger.event_id);
      expect(end.where).toBe("answered");
      expect(server.requests.length).toBe(2);
      expect(end.thread[1]).toEqual(["cto", "All green."]);
      // The live view saw the text as it came.
      expect(r.events.named("turn_text").map((e) => e.text).join("")).toContain("green.");
    } finally {
      await r.stop(true);
    }
  });
});

describe("fallback, task threads, reaching outside, one notice per message", () => {
  test("a refused key falls back to the next provider, which answers", async () => {
    const r = await rig("openai", { fallback: { wire: "openai", base_url: server.url } });
    try {
      server.script([{ status: 401, json: errorBody("openai", "invalid_api_key", "bad key") }, openAiTextReply("From the backup.")]);
      const { message_id, trigger } = await r.ask("cto", "status?");
      const end = await r.ending("cto", message_id, trigger.event_id);
      expect(end.where).toBe("answered");
      expect(server.requests.map((q) => q.headers.authorization)).toEqual([`Bearer ${KEY}`, "Bearer backup-key-0002"]);
      expect(end.thread[1]).toEqual(["cto", "From the backup."]);
    } finally {
      await r.stop(true);
    }
  });

  test("a task assignment that fails for good is told as a comment on the task", async () => {
    const r = await rig("anthropic");
    try {
      server.script([{ status: 401, json: errorBody("anthropic", "authentication_error", "invalid x-api-key") }]);
      const { work_key, trigger } = await r.assign("cto", "Ship the release");
      const end = await r.ending("cto", null, trigger.event_id);
      expect(end.where).toBe("dead_letter");
      const got = await r.estate.read({ q: "work.get", key: work_key });
      expect(got!.comments.map((c) => [c.author, c.body.startsWith(NOTICE_PREFIX), c.body.includes("(401)")])).toEqual([["cto", true, true]]);
    } finally {
      await r.stop(true);
    }
  });

  test("a DM that fails for good is told in the DM, in the message's thread", async () => {
    const r = await rig("openai");
    try {
      server.script([{ status: 401, json: errorBody("openai", "invalid_api_key", "bad key") }]);
      const { message_id, trigger } = await directMessage(r, "are we on track?");
      await r.publish(trigger);
      const end = await r.ending("cto", null, trigger.event_id);
      expect(end.where).toBe("dead_letter");
      expect(server.requests).toHaveLength(1);
      const thread = (await r.estate.thread(DM, message_id)).map((m) => [m.author, m.thread_parent, m.body.startsWith(NOTICE_PREFIX), m.body.includes("(401)")]);
      expect(thread).toEqual([
        ["founder", null, false, false],
        ["cto", message_id, true, true],
      ]);
      expect((await r.estate.thread("general", message_id)).length).toBe(0);
    } finally {
      await r.stop(true);
    }
  });

  test("a comment on a task that fails for good is told as a comment on the task", async () => {
    const r = await rig("anthropic");
    try {
      server.script([{ status: 404, json: errorBody("anthropic", "not_found_error", "model: test-model") }]);
      const { work_key, trigger } = await commentedTask(r, "any news?");
      await r.publish(trigger);
      const end = await r.ending("cto", null, trigger.event_id);
      expect(end.where).toBe("dead_letter");
      expect(server.requests).toHaveLength(1);
      const got = await r.estate.read({ q: "work.get", key: work_key });
      expect(got!.comments.map((c) => [c.author, c.body.startsWith(NOTICE_PREFIX), c.body.includes("404")])).toEqual([
        ["founder", false, false],
        ["cto", true, true],
      ]);
    } finally {
      await r.stop(true);
    }
  });

  test("a 500 after a tool wrote outside: acked, the person hears what was done and that it stopped", async () => {
    const r = await rig("openai");
    try {
      server.script([openAiToolReply([{ id: "c1", name: "work_create", args: { project: "ENG", title: "Filed" } }]), { status: 500, text: "boom" }]);
      const { message_id, trigger } = await r.ask("cto", "file it");
      const end = await r.ending("cto", message_id, trigger.event_id);
      expect(end.where).toBe("answered"); // acked: a re-run would file it twice
      expect(end.reports).toBe(1);
      expect(server.requests.length).toBe(1 + MAX_ATTEMPTS);
      const notice = end.thread[1]![1];
      expect(notice).toContain("I stopped before finishing: my model endpoint kept failing (HTTP 500)");
      expect(notice).toContain("Before stopping I had already run work_create");
      expect((await r.estate.read({ q: "work.list", project: "ENG", limit: 10 })).items.map((i) => i.title)).toEqual(["Filed"]);
    } finally {
      await r.stop(true);
    }
  });

  test("the same message failing again (a dead letter replayed, key still wrong) is not told twice", async () => {
    const r = await rig("openai");
    try {
      server.script([{ status: 401, json: errorBody("openai", "invalid_api_key", "bad key") }]);
      const { message_id, trigger } = await r.ask("cto", "status?");
      await r.ending("cto", message_id, trigger.event_id);
      // Replayed under a new message id (as an operator's replay publishes it).
      await r.publish(trigger, `${trigger.event_id}:replay`);
      const deadline = Date.now() + 20_000;
      while (r.turnsOn(trigger.event_id).length < 2 && Date.now() < deadline) await Bun.sleep(20);
      await Bun.sleep(100);
      expect(r.turnsOn(trigger.event_id)).toHaveLength(2);
      expect(server.requests.length).toBe(2);
      const thread = await r.estate.thread("general", message_id);
      expect(thread.filter((m) => m.author === "cto")).toHaveLength(1);
    } finally {
      await r.stop(true);
    }
  });

  test("an agent without a model says so", async () => {
    const r = await rig("openai", { no_provider: true });
    try {
      const { message_id, trigger } = await r.ask("cto", "status?");
      const end = await r.ending("cto", message_id, trigger.event_id);
      expect(end.where).toBe("dead_letter");
      expect(end.thread[1]![1]).toContain("I have no model configured");
    } finally {
      await r.stop(true);
    }
  });
});

describe("a notice is one write: told again after a lost answer, with no ledger mark, the thread or task holds one", () => {
  /** A person's message of `kind` to cto, and what cto has written where it is answered. */
  async function asked(r: FailureRig, kind: "chat_mention" | "chat_direct" | "task_assigned" | "task_comment") {
    if (kind === "chat_mention" || kind === "chat_direct") {
      const channel = kind === "chat_direct" ? DM : "general";
      const message_id = kind === "chat_direct" ? (await directMessage(r, "status?")).message_id : await r.estate.post("general", "founder", "@cto status?");
      const trigger = kind === "chat_direct" ? directTrigger("cto", DM, message_id, "status?") : mentionTrigger("cto", "general", message_id, "status?");
      return { trigger, shown: async () => (await r.estate.thread(channel, message_id)).filter((m) => m.author === "cto").map((m) => m.body) };
    }
    const task = await commentedTask(r, "any news?");
    const trigger = kind === "task_comment" ? task.trigger : taskTrigger("cto", task.work_key, "Fix the build", "founder");
    return { trigger, shown: async () => (await r.estate.read({ q: "work.get", key: task.work_key }))!.comments.filter((c) => c.author === "cto").map((c) => c.body) };
  }

  test.each(["chat_mention", "chat_direct", "task_assigned", "task_comment"] as const)("%s", async (kind) => {
    const r = await FailureRig.start({ wire: "openai", base_url: server.url }, nats);
    try {
      const { trigger, shown } = await asked(r, kind);
      // The first write applies but its answer is lost; the ledger's mark never lands (no
      // ledger here, as when the node dies between the write and the mark): a redelivery tells again.
      let lost = 0;
      r.estate.loseAnswer = (_domain, body) => (body as { author?: string }).author === "cto" && lost++ === 0;
      const { log } = memoryLogger("warn");
      const notifier = new Notifier({ estate: r.estate, ledger: null, log, events: new MemoryEventSink(), node_id: "node-a" });
      const text = `${NOTICE_PREFIX}I could not answer this: my model endpoint refused the API key (401).`;
      expect(await notifier.tell("cto", "turn-1", [trigger], text)).toBe("posted");
      expect(await notifier.tell("cto", "turn-2", [trigger], text)).toBe("posted");
      expect(lost).toBe(2);
      expect(await shown()).toEqual([text]);
    } finally {
      await r.stop(true);
    }
  });
});
