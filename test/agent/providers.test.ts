import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { FakeClock, systemClock } from "../../src/clock.ts";
import { loadConfigFile } from "../../src/config/load.ts";
import { anthropicProvider } from "../../src/agent/providers/anthropic.ts";
import { ProviderError, type ChatMessage, type ToolSpec } from "../../src/agent/providers/contract.ts";
import { MAX_ATTEMPTS, RETRY_AFTER_MAX_MS, retryDelayMs } from "../../src/agent/providers/http.ts";
import { buildProviders, withFallback } from "../../src/agent/providers/index.ts";
import { openAiProvider } from "../../src/agent/providers/openai.ts";
import { compilePattern, renderTemplate, scriptedProvider } from "../../src/agent/providers/scripted.ts";
import { openAiTextReply, openAiToolReply, startModelServer, type ModelServer } from "./model-server.ts";

let server: ModelServer;
beforeAll(() => {
  server = startModelServer();
});
afterAll(() => server.stop());

const tools: ToolSpec[] = [
  { name: "work_create", description: "Create a work item", input_schema: { type: "object", properties: { title: { type: "string" } }, required: ["title"] } },
];

function openai(keys: string[] = ["k1"], timeout_ms = 5_000) {
  return openAiProvider({ name: "gpt", base_url: `${server.url}/v1/`, model: "m1", api_keys: keys, timeout_ms, clock: systemClock });
}

/** Runs `work` on a fake clock, moving it on while the promise is pending (real I/O in between). */
async function drive<T>(clock: FakeClock, work: Promise<T>, step_ms: number): Promise<T> {
  let settled = false;
  const done = work.finally(() => void (settled = true));
  done.catch(() => {});
  for (let i = 0; i < 2_000 && !settled; i++) {
    await Bun.sleep(2);
    await clock.advance(step_ms);
  }
  return done;
}

async function failure(p: Promise<unknown>): Promise<ProviderError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ProviderError);
    return err as ProviderError;
  }
  throw new Error("expected a ProviderError");
}

describe("retry decisions (pure)", () => {
  const now = Date.UTC(2026, 0, 1);
  test.each([
    // status, retry-after, attempt, want
    [429, null, 1, 500],
    [429, null, 2, 1000],
    [503, null, 3, 2000],
    [500, "2", 1, 2000],
    [529, "0", 1, 0],
    [429, new Date(now + 3000).toUTCString(), 1, 3000],
    [429, String(RETRY_AFTER_MAX_MS / 1000 + 1), 1, null],
    [429, "soon", 1, 500],
    [null, null, 1, 500],
    [400, null, 1, null],
    [404, "1", 1, null],
    [503, null, MAX_ATTEMPTS, null],
  ] as const)("status %p retry-after %p attempt %p → %p", (status, ra, attempt, want) => {
    expect(retryDelayMs(status, ra, attempt, now)).toBe(want);
  });
});

describe("openai over HTTP", () => {
  test("sends system, messages and tools; parses tool calls and usage", async () => {
    server.script([openAiToolReply([{ id: "call_1", name: "work_create", args: { title: "Plan" } }])]);
    const messages: ChatMessage[] = [
      { role: "user", content: "make a plan" },
      { role: "assistant", content: "", tool_calls: [{ id: "c0", name: "work_create", arguments: { title: "x" }, raw_arguments: "" }] },
      { role: "tool", tool_call_id: "c0", name: "work_create", content: '{"key":"ENG-1"}', is_error: false },
    ];
    const out = await openai().complete({ system: "You are the CEO.", messages, tools });
    expect(out.toolCalls).toEqual([{ id: "call_1", name: "work_create", arguments: { title: "Plan" }, raw_arguments: '{"title":"Plan"}' }]);
    expect(out.usage).toEqual({ input_tokens: 11, output_tokens: 7 });
    const req = server.requests[0]!;
    expect(req.path).toBe("/v1/chat/completions");
    expect(req.headers.authorization).toBe("Bearer k1");
    expect(req.body.model).toBe("m1");
    expect(req.body.messages[0]).toEqual({ role: "system", content: "You are the CEO." });
    expect(req.body.messages[2].tool_calls[0].function).toEqual({ name: "work_create", arguments: '{"title":"x"}' });
    expect(req.body.messages[3]).toEqual({ role: "tool", tool_call_id: "c0", content: '{"key":"ENG-1"}' });
    expect(req.body.tools[0].function.name).toBe("work_create");
  });

  test("arguments that are not a JSON object come back as null with the raw text", async () => {
    server.script([{ json: { choices: [{ message: { content: null, tool_calls: [{ id: "c", type: "function", function: { name: "t", arguments: "{nope" } }] } }] } }]);
    const out = await openai().complete({ system: "", messages: [], tools: [] });
    expect(out.toolCalls[0]?.arguments).toBeNull();
    expect(out.toolCalls[0]?.raw_arguments).toBe("{nope");
  });

  test("429 and 503 are retried (Retry-After honoured) until an answer", async () => {
    server.script([
      { status: 429, headers: { "retry-after": "0" }, json: { error: { message: "slow down" } } },
      { status: 503, headers: { "retry-after": "0" }, text: "busy" },
      openAiTextReply("done"),
    ]);
    const out = await openai().complete({ system: "", messages: [{ role: "user", content: "hi" }], tools: [] });
    expect(out.text).toBe("done");
    expect(server.requests.length).toBe(3);
  });

  test("retries are bounded: MAX_ATTEMPTS then an error with the status and body", async () => {
    server.script([{ status: 503, headers: { "retry-after": "0" }, text: "overloaded right now" }]);
    const err = await failure(openai().complete({ system: "", messages: [], tools: [] }));
    expect(err.kind).toBe("http");
    expect(err.status).toBe(503);
    expect(err.attempts).toBe(MAX_ATTEMPTS);
    expect(err.message).toContain("overloaded right now");
    expect(server.requests.length).toBe(MAX_ATTEMPTS);
  });

  test("a 400 is not retried", async () => {
    server.script([{ status: 400, json: { error: { message: "bad tool schema" } } }]);
    const err = await failure(openai().complete({ system: "", messages: [], tools: [] }));
    expect(err.status).toBe(400);
    expect(err.message).toContain("bad tool schema");
    expect(server.requests.length).toBe(1);
  });

  test("a Retry-After beyond the bound fails at once rather than holding the seat", async () => {
    server.script([{ status: 429, headers: { "retry-after": "3600" }, text: "quota" }]);
    const err = await failure(openai().complete({ system: "", messages: [], tools: [] }));
    expect(err.status).toBe(429);
    expect(server.requests.length).toBe(1);
  });

  test("a rejected key rotates to the next key", async () => {
    server.script([{ status: 401, text: "bad key" }, openAiTextReply("ok")]);
    const p = openai(["bad", "good"]);
    const out = await p.complete({ system: "", messages: [], tools: [] });
    expect(out.text).toBe("ok");
    expect(server.requests.map((r) => r.headers.authorization)).toEqual(["Bearer bad", "Bearer good"]);
  });

  test("a 200 with the wrong shape names the field", async () => {
    server.script([{ json: { choices: [] } }]);
    const err = await failure(openai().complete({ system: "", messages: [], tools: [] }));
    expect(err.kind).toBe("bad_response");
    expect(err.message).toContain("choices");
  });

  test("timeout is honest", async () => {
    server.script([{ delay_ms: 300, ...openAiTextReply("late") }]);
    const clock = new FakeClock();
    const p = openAiProvider({ name: "gpt", base_url: server.url, model: "m", api_keys: [], timeout_ms: 100, clock });
    const err = await failure(drive(clock, p.complete({ system: "", messages: [], tools: [] }), 100));
    expect(err.kind).toBe("timeout");
    expect(err.attempts).toBe(MAX_ATTEMPTS);
  });

  test("a refused connection is a network error; the fallback answers", async () => {
    const clock = new FakeClock();
    const dead = openAiProvider({ name: "dead", base_url: "http://127.0.0.1:9", model: "m", api_keys: [], timeout_ms: 600_000, clock });
    const err = await failure(drive(clock, dead.complete({ system: "", messages: [], tools: [] }), 1_000));
    expect(err.kind).toBe("network");
    expect(err.attempts).toBe(MAX_ATTEMPTS);
    server.script([openAiTextReply("from fallback")]);
    const out = await drive(clock, withFallback(dead, openai()).complete({ system: "", messages: [], tools: [] }), 1_000);
    expect(out.text).toBe("from fallback");
  });

  test("buildProviders wires fallback from config", async () => {
    server.script([{ status: 400, text: "primary refuses" }, openAiTextReply("second")]);
    const providers = buildProviders(
      {
        a: { type: "openai", base_url: server.url, model: "m", api_keys: [], timeout_seconds: 5, fallback: "b" },
        b: { type: "openai", base_url: server.url, model: "m2", api_keys: [], timeout_seconds: 5, fallback: "a" },
      },
      systemClock,
    );
    const out = await providers.get("a")!.complete({ system: "", messages: [], tools: [] });
    expect(out.text).toBe("second");
    expect(server.requests.map((r) => r.body.model)).toEqual(["m", "m2"]);
  });
});

describe("anthropic over HTTP", () => {
  const anthropic = () =>
    anthropicProvider({ name: "claude", base_url: server.url, model: "c1", api_keys: ["ak"], max_tokens: 256, timeout_ms: 5_000, clock: systemClock });

  test("tool use round trip: request shape and parsed tool calls", async () => {
    server.script([
      { status: 529, headers: { "retry-after": "0" }, json: { type: "error", error: { type: "overloaded_error" } } },
      {
        json: {
          id: "msg_1",
          type: "message",
          role: "assistant",
          content: [
            { type: "text", text: "Creating it." },
            { type: "tool_use", id: "toolu_1", name: "work_create", input: { title: "Plan" } },
          ],
          stop_reason: "tool_use",
          usage: { input_tokens: 20, output_tokens: 9 },
        },
      },
    ]);
    const messages: ChatMessage[] = [
      { role: "user", content: "plan" },
      {
        role: "assistant",
        content: "two calls",
        tool_calls: [
          { id: "t1", name: "a", arguments: {}, raw_arguments: "{}" },
          { id: "t2", name: "b", arguments: { x: 1 }, raw_arguments: "" },
        ],
      },
      { role: "tool", tool_call_id: "t1", name: "a", content: "r1", is_error: false },
      { role: "tool", tool_call_id: "t2", name: "b", content: "boom", is_error: true },
    ];
    const out = await anthropic().complete({ system: "sys", messages, tools });
    expect(out.text).toBe("Creating it.");
    expect(out.toolCalls).toEqual([{ id: "toolu_1", name: "work_create", arguments: { title: "Plan" }, raw_arguments: '{"title":"Plan"}' }]);
    expect(out.usage).toEqual({ input_tokens: 20, output_tokens: 9 });
    expect(server.requests.length).toBe(2);
    const req = server.requests[1]!;
    expect(req.path).toBe("/v1/messages");
    expect(req.headers["x-api-key"]).toBe("ak");
    expect(req.headers["anthropic-version"]).toBe("2023-06-01");
    expect(req.body.system).toBe("sys");
    expect(req.body.max_tokens).toBe(256);
    expect(req.body.tools[0]).toEqual({ name: "work_create", description: "Create a work item", input_schema: tools[0]!.input_schema });
    // Roles alternate: the two tool results ride one user message.
    expect(req.body.messages.map((m: any) => m.role)).toEqual(["user", "assistant", "user"]);
    expect(req.body.messages[2].content).toEqual([
      { type: "tool_result", tool_use_id: "t1", content: "r1", is_error: false },
      { type: "tool_result", tool_use_id: "t2", content: "boom", is_error: true },
    ]);
  });

  test("an error status is reported with the API's words", async () => {
    server.script([{ status: 401, json: { type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } } }]);
    const err = await failure(anthropic().complete({ system: "", messages: [{ role: "user", content: "x" }], tools: [] }));
    expect(err.status).toBe(401);
    expect(err.message).toContain("invalid x-api-key");
  });
});

describe("scripted", () => {
  test("inline flags become JS flags", () => {
    expect(compilePattern("(?i)plan").test("PLAN it")).toBe(true);
    expect(compilePattern("plan").test("PLAN")).toBe(false);
  });
  test("templates render known vars and blank unknown ones", () => {
    expect(renderTemplate("Hi @{{author}} ({{ seat }}) {{nope}}!", { author: "ann", seat: "ceo" })).toBe("Hi @ann (ceo) !");
  });

  test("the root crewlet.yaml rules: @ceo asked for a plan → two work_create calls, then the reply", async () => {
    const company = loadConfigFile("crewlet.yaml", {}).config.company!;
    const cfg = company.providers.llm.offline!;
    expect(cfg.type).toBe("scripted");
    const p = scriptedProvider("offline", cfg as Extract<typeof cfg, { type: "scripted" }>);
    const facts = { seat: "ceo", trigger_type: "external_notification", vars: { text: "@ceo we need a plan for Q3", author: "founder", seat: "ceo" } };
    const first = await p.complete({ system: "", messages: [{ role: "user", content: "x" }], tools: [], facts });
    expect(first.toolCalls.map((c) => [c.name, c.arguments])).toEqual([
      ["work_create", { project: "ENG", title: "Technical plan: @ceo we need a plan for Q3", assignee: "cto" }],
      ["work_create", { project: "OPS", title: "Delivery plan: @ceo we need a plan for Q3", assignee: "pm" }],
    ]);
    const second = await p.complete({
      system: "",
      messages: [
        { role: "user", content: "x" },
        { role: "assistant", content: "", tool_calls: first.toolCalls },
      ],
      tools: [],
      facts,
    });
    expect(second.toolCalls).toEqual([]);
    expect(second.text).toContain("@cto owns the technical plan");

    const task = await p.complete({
      system: "",
      messages: [{ role: "user", content: "x" }],
      tools: [],
      facts: { seat: "cto", trigger_type: "task_assigned", vars: { seat: "cto", work_key: "ENG-1", text: "Technical plan" } },
    });
    expect(task.toolCalls.map((c) => [c.name, c.arguments])).toEqual([
      ["work_comment", { key: "ENG-1", body: "Picked up by @cto; first draft today." }],
      ["work_update", { key: "ENG-1", status: "in_progress" }],
    ]);

    const other = await p.complete({
      system: "",
      messages: [{ role: "user", content: "x" }],
      tools: [],
      facts: { seat: "pm", trigger_type: "external_notification", vars: { seat: "pm", author: "ann", text: "hello" } },
    });
    expect(other).toEqual({ text: "Noted, @ann. (pm)", toolCalls: [], usage: { input_tokens: 0, output_tokens: 0 } });
  });
});
