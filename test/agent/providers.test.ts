import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { systemClock } from "../../src/clock.ts";
import { memoryLogger } from "../../src/log.ts";
import { loadConfigFile } from "../../src/config/load.ts";
import { anthropicProvider } from "../../src/agent/providers/anthropic.ts";
import { ProviderError, type ChatMessage, type ToolSpec } from "../../src/agent/providers/contract.ts";
import { BACKOFF_MAX_MS, endpointUrl, MAX_ATTEMPTS, retryDelayMs } from "../../src/agent/providers/http.ts";
import { buildProviders, probeProviders, withFallback } from "../../src/agent/providers/index.ts";
import { openAiProvider } from "../../src/agent/providers/openai.ts";
import { compilePattern, renderTemplate, scriptedProvider } from "../../src/agent/providers/scripted.ts";
import { anthropicStream, anthropicTextReply, openAiStream, openAiTextReply, openAiToolReply, startModelServer, type ModelServer } from "./model-server.ts";

let server: ModelServer;
beforeAll(() => {
  server = startModelServer();
});
afterAll(() => server.stop());

const tools: ToolSpec[] = [
  { name: "work_create", description: "Create a work item", input_schema: { type: "object", properties: { title: { type: "string" } }, required: ["title"] } },
];

/** Retry-After "0" and zero jitter keep the retry tests quick; the delays are tested as a table. */
function openai(keys: string[] = ["k1"], timeout_ms = 5_000) {
  return openAiProvider({ name: "gpt", base_url: `${server.url}/v1/`, model: "m1", api_keys: keys, timeout_ms, random: () => 0, clock: systemClock });
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

describe("retry delays (pure): full jitter under a doubling ceiling, Retry-After wins", () => {
  const now = Date.UTC(2026, 0, 1);
  test.each([
    // retry-after, attempt, random, want
    [null, 1, 0.999, 999],
    [null, 2, 0.5, 1000],
    [null, 3, 0, 0],
    [null, 10, 0.5, BACKOFF_MAX_MS / 2],
    ["2", 1, 0.5, 2000],
    ["0", 4, 0.9, 0],
    [new Date(now + 3000).toUTCString(), 1, 0.5, 3000],
    ["soon", 1, 0.5, 500],
  ] as const)("retry-after %p attempt %p random %p → %p ms", (ra, attempt, random, want) => {
    expect(retryDelayMs(ra, attempt, now, () => random)).toBe(want);
  });
});

describe("base_url with or without the version segment", () => {
  test.each([
    ["openai", "https://api.openai.com/v1", "https://api.openai.com/v1/chat/completions"],
    ["openai", "https://api.openai.com/v1/", "https://api.openai.com/v1/chat/completions"],
    ["openai", "https://api.openai.com", "https://api.openai.com/v1/chat/completions"],
    ["openai", "http://localhost:11434/v1/chat/completions", "http://localhost:11434/v1/chat/completions"],
    ["openai", "https://openrouter.ai/api/v1", "https://openrouter.ai/api/v1/chat/completions"],
    ["anthropic", "https://api.anthropic.com", "https://api.anthropic.com/v1/messages"],
    ["anthropic", "https://api.anthropic.com/v1", "https://api.anthropic.com/v1/messages"],
    ["anthropic", "https://api.anthropic.com/v1/", "https://api.anthropic.com/v1/messages"],
    ["anthropic", "https://proxy.example/llm/v1/messages", "https://proxy.example/llm/v1/messages"],
  ] as const)("%s %s → %s", (wire, base, want) => {
    expect(endpointUrl(wire, base)).toBe(want);
  });

  test.each(["", "/v1", "/v1/"])("openai wire over HTTP with base_url suffix %p reaches /v1/chat/completions", async (suffix) => {
    server.script([openAiTextReply("ok")]);
    const p = openAiProvider({ name: "gpt", base_url: `${server.url}${suffix}`, model: "m", api_keys: [], timeout_ms: 5_000, clock: systemClock });
    expect((await p.complete({ system: "", messages: [], tools: [] })).text).toBe("ok");
    expect(server.requests[0]!.path).toBe("/v1/chat/completions");
  });

  test.each(["", "/v1", "/v1/"])("anthropic wire over HTTP with base_url suffix %p reaches /v1/messages", async (suffix) => {
    server.script([anthropicTextReply("ok")]);
    const p = anthropicProvider({ name: "claude", base_url: `${server.url}${suffix}`, model: "c", api_keys: ["ak"], max_tokens: 10, timeout_ms: 5_000, clock: systemClock });
    expect((await p.complete({ system: "", messages: [{ role: "user", content: "x" }], tools: [] })).text).toBe("ok");
    expect(server.requests[0]!.path).toBe("/v1/messages");
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
    expect(req.body.stream).toBe(false);
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

  test("transient failures are bounded by MAX_ATTEMPTS; the error carries the status and body", async () => {
    server.script([{ status: 503, headers: { "retry-after": "0" }, text: "overloaded right now" }]);
    const err = await failure(openai().complete({ system: "", messages: [], tools: [] }));
    expect(err.kind).toBe("http");
    expect(err.status).toBe(503);
    expect(err.failure).toBe("transient");
    expect(err.attempts).toBe(MAX_ATTEMPTS);
    expect(err.message).toContain("overloaded right now");
    expect(server.requests.length).toBe(MAX_ATTEMPTS);
  });

  test("the turn's retry budget bounds the retries, shared across calls", async () => {
    server.script([{ status: 503, headers: { "retry-after": "0.2" }, text: "busy" }]);
    const p = openAiProvider({ name: "gpt", base_url: server.url, model: "m", api_keys: [], timeout_ms: 5_000, retry_budget_ms: 500, clock: systemClock });
    const spend = { used_ms: 0 };
    const err = await failure(p.complete({ system: "", messages: [], tools: [], retry: spend }));
    expect(err.failure).toBe("transient");
    // 0.2 s apart within 0.5 s: the first try and two retries, then the next wait would overrun.
    expect(server.requests.length).toBe(3);
    expect(spend.used_ms).toBeLessThanOrEqual(500 + 200);
    // The same turn's next call has nothing left to wait with: one try.
    server.script([{ status: 503, headers: { "retry-after": "0.2" }, text: "busy" }]);
    await failure(p.complete({ system: "", messages: [], tools: [], retry: spend }));
    expect(server.requests.length).toBe(1);
  });

  test.each([400, 401, 403, 404])("a %p is permanent: one call, no retry", async (status) => {
    server.script([{ status, json: { error: { message: "refused for a reason" } } }]);
    const err = await failure(openai().complete({ system: "", messages: [], tools: [] }));
    expect(err.status).toBe(status);
    expect(err.failure).toBe("permanent");
    expect(err.message).toContain("refused for a reason");
    expect(server.requests.length).toBe(1);
  });

  test("a 400 about context length is context_too_long, not retried", async () => {
    server.script([{ status: 400, json: { error: { code: "context_length_exceeded", message: "This model's maximum context length is 8192 tokens" } } }]);
    const err = await failure(openai().complete({ system: "", messages: [], tools: [] }));
    expect(err.failure).toBe("context_too_long");
    expect(server.requests.length).toBe(1);
  });

  test("a Retry-After beyond the turn's budget fails at once rather than holding the seat", async () => {
    server.script([{ status: 429, headers: { "retry-after": "3600" }, text: "quota" }]);
    const err = await failure(openai().complete({ system: "", messages: [], tools: [] }));
    expect(err.status).toBe(429);
    expect(server.requests.length).toBe(1);
  });

  test("a rejected key rotates to the next key at once; all keys refused is permanent", async () => {
    server.script([{ status: 401, text: "bad key" }, openAiTextReply("ok")]);
    const out = await openai(["bad-key-1", "good-key-2"]).complete({ system: "", messages: [], tools: [] });
    expect(out.text).toBe("ok");
    expect(server.requests.map((r) => r.headers.authorization)).toEqual(["Bearer bad-key-1", "Bearer good-key-2"]);
    server.script([{ status: 401, text: "bad key" }]);
    const err = await failure(openai(["bad-key-1", "bad-key-2"]).complete({ system: "", messages: [], tools: [] }));
    expect(err.failure).toBe("permanent");
    expect(server.requests.length).toBe(2);
  });

  test("a body that is not the wire format is permanent and names the field", async () => {
    server.script([{ json: { choices: [] } }]);
    const err = await failure(openai().complete({ system: "", messages: [], tools: [] }));
    expect(err.kind).toBe("bad_response");
    expect(err.failure).toBe("permanent");
    expect(err.message).toContain("choices");
    server.script([{ text: "<html>login</html>" }]);
    const html = await failure(openai().complete({ system: "", messages: [], tools: [] }));
    expect(html.kind).toBe("bad_response");
    expect(server.requests.length).toBe(1);
  });

  test("a hung endpoint is abandoned at the first-byte timeout (each try), not the overall one", async () => {
    server.script([{ hang: true }]);
    const p = openAiProvider({ name: "gpt", base_url: server.url, model: "m", api_keys: [], timeout_ms: 60_000, timeouts: { first_byte_ms: 150 }, retry_budget_ms: 0, clock: systemClock });
    const t0 = Date.now();
    const err = await failure(p.complete({ system: "", messages: [], tools: [] }));
    expect(err.kind).toBe("timeout");
    expect(err.failure).toBe("transient");
    expect(err.message).toContain("first-byte timeout");
    expect(server.requests.length).toBe(1);
    expect(Date.now() - t0).toBeLessThan(30_000);
  });

  test("a black-holed address is abandoned at the connect timeout, not the first-byte one", async () => {
    // 100::/64 is the IPv6 discard prefix: SYNs go nowhere. A host with no IPv6 route
    // refuses at once instead (a network error); either way the call ends long before the
    // first-byte timeout.
    const p = openAiProvider({ name: "gpt", base_url: "http://[100::1]:80", model: "m", api_keys: [], timeout_ms: 60_000, timeouts: { connect_ms: 300, first_byte_ms: 60_000 }, retry_budget_ms: 0, clock: systemClock });
    const t0 = Date.now();
    const err = await failure(p.complete({ system: "", messages: [], tools: [] }));
    expect(err.failure).toBe("transient");
    if (err.kind === "timeout") expect(err.message).toContain("within 300 ms");
    else expect(err.kind).toBe("network");
    expect(Date.now() - t0).toBeLessThan(30_000);
  });

  test("a refused connection is a network error (transient); the fallback answers", async () => {
    const dead = openAiProvider({ name: "dead", base_url: "http://127.0.0.1:9", model: "m", api_keys: [], timeout_ms: 5_000, retry_budget_ms: 200, random: () => 0, clock: systemClock });
    const err = await failure(dead.complete({ system: "", messages: [], tools: [] }));
    expect(err.kind).toBe("network");
    expect(err.failure).toBe("transient");
    expect(err.attempts).toBe(MAX_ATTEMPTS);
    server.script([openAiTextReply("from fallback")]);
    const out = await withFallback(dead, openai()).complete({ system: "", messages: [], tools: [] });
    expect(out.text).toBe("from fallback");
  });

  test("buildProviders wires fallback from config; a malformed request (400) does not fall back", async () => {
    const cfg = (model: string, fallback: string) => ({ type: "openai" as const, base_url: server.url, model, api_keys: [], timeout_seconds: 5, retry_budget_seconds: 0, stream: false, fallback });
    server.script([{ status: 503, text: "primary down" }, openAiTextReply("second")]);
    const providers = buildProviders({ a: cfg("m", "b"), b: cfg("m2", "a") }, systemClock);
    const out = await providers.get("a")!.complete({ system: "", messages: [], tools: [] });
    expect(out.text).toBe("second");
    expect(server.requests.map((r) => r.body.model)).toEqual(["m", "m2"]);
    server.script([{ status: 400, text: "bad tool schema" }]);
    const err = await failure(providers.get("a")!.complete({ system: "", messages: [], tools: [] }));
    expect(err.status).toBe(400);
    expect(server.requests.length).toBe(1);
  });

  test("an error body quoting a configured key or token reaches no error message", async () => {
    const secret = "sk-live-0123456789abcdef";
    server.script([{ status: 401, json: { error: { message: `Incorrect API key provided: ${secret}. Token tok_admin_987654321 also seen.` } } }]);
    const providers = buildProviders(
      { gpt: { type: "openai", base_url: server.url, model: "m", api_keys: [secret], timeout_seconds: 5, retry_budget_seconds: 0, stream: false } },
      systemClock,
      { secrets: ["tok_admin_987654321"] },
    );
    const err = await failure(providers.get("gpt")!.complete({ system: "", messages: [], tools: [] }));
    expect(err.message).not.toContain(secret);
    expect(err.message).not.toContain(secret.slice(0, 8));
    expect(err.message).not.toContain("tok_admin_987654321");
    expect(err.message).toContain("[redacted]");
  });
});

describe("streaming (stream: true)", () => {
  test("openai: text and tool-call deltas assemble into the same Completion; text arrives as it comes", async () => {
    server.script([openAiStream(["Creat", "ing it."], [{ id: "call_1", name: "work_create", args: { title: "Plan" } }])]);
    const p = openAiProvider({ name: "gpt", base_url: server.url, model: "m", api_keys: [], timeout_ms: 5_000, stream: true, clock: systemClock });
    const deltas: string[] = [];
    const out = await p.complete({ system: "", messages: [], tools, onText: (d) => deltas.push(d) });
    expect(out).toEqual({
      text: "Creating it.",
      toolCalls: [{ id: "call_1", name: "work_create", arguments: { title: "Plan" }, raw_arguments: '{"title":"Plan"}' }],
      usage: { input_tokens: 11, output_tokens: 7 },
    });
    expect(deltas).toEqual(["Creat", "ing it."]);
    expect(server.requests[0]!.body.stream).toBe(true);
    expect(server.requests[0]!.body.stream_options).toEqual({ include_usage: true });
  });

  test("anthropic: text and input_json deltas assemble into the same Completion", async () => {
    server.script([anthropicStream(["Creat", "ing it."], [{ id: "toolu_1", name: "work_create", args: { title: "Plan" } }])]);
    const p = anthropicProvider({ name: "claude", base_url: server.url, model: "c", api_keys: ["ak"], max_tokens: 10, timeout_ms: 5_000, stream: true, clock: systemClock });
    const deltas: string[] = [];
    const out = await p.complete({ system: "", messages: [{ role: "user", content: "x" }], tools, onText: (d) => deltas.push(d) });
    expect(out).toEqual({
      text: "Creating it.",
      toolCalls: [{ id: "toolu_1", name: "work_create", arguments: { title: "Plan" }, raw_arguments: '{"title":"Plan"}' }],
      usage: { input_tokens: 20, output_tokens: 9 },
    });
    expect(deltas).toEqual(["Creat", "ing it."]);
    expect(server.requests[0]!.body.stream).toBe(true);
  });

  test.each(["openai", "anthropic"] as const)("%s: a stream that stalls between chunks is abandoned at the idle timeout and retried", async (wire) => {
    const stalled = wire === "openai" ? openAiStream(["a", "b"]) : anthropicStream(["a", "b"]);
    const good = wire === "openai" ? openAiStream(["fine"]) : anthropicStream(["fine"]);
    server.script([{ ...stalled, stall_after: 2 }, good]);
    const common = { base_url: server.url, model: "m", timeout_ms: 10_000, timeouts: { idle_ms: 150 }, stream: true, random: () => 0, clock: systemClock };
    const p = wire === "openai" ? openAiProvider({ ...common, name: "w", api_keys: [] }) : anthropicProvider({ ...common, name: "w", api_keys: ["ak"], max_tokens: 10 });
    const out = await p.complete({ system: "", messages: [{ role: "user", content: "x" }], tools: [] });
    expect(out.text).toBe("fine");
    expect(server.requests.length).toBe(2);
  });

  test("anthropic: an overloaded error inside the stream is transient and retried", async () => {
    server.script([{ sse: [{ event: "error", data: JSON.stringify({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } }) }] }, anthropicStream(["ok"])]);
    const p = anthropicProvider({ name: "claude", base_url: server.url, model: "c", api_keys: ["ak"], max_tokens: 10, timeout_ms: 5_000, stream: true, random: () => 0, clock: systemClock });
    const out = await p.complete({ system: "", messages: [{ role: "user", content: "x" }], tools: [] });
    expect(out.text).toBe("ok");
    expect(server.requests.length).toBe(2);
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

  test("an error status is reported with the API's words, and is permanent", async () => {
    server.script([{ status: 401, json: { type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } } }]);
    const err = await failure(anthropic().complete({ system: "", messages: [{ role: "user", content: "x" }], tools: [] }));
    expect(err.status).toBe(401);
    expect(err.failure).toBe("permanent");
    expect(err.message).toContain("invalid x-api-key");
    expect(server.requests.length).toBe(1);
  });

  test("a prompt too long (400 invalid_request_error) is context_too_long", async () => {
    server.script([{ status: 400, json: { type: "error", error: { type: "invalid_request_error", message: "prompt is too long: 210000 tokens > 200000 maximum" } } }]);
    const err = await failure(anthropic().complete({ system: "", messages: [{ role: "user", content: "x" }], tools: [] }));
    expect(err.failure).toBe("context_too_long");
  });
});

describe("provider_unreachable at boot", () => {
  test("a refusing endpoint is logged once with its name; a reachable one is not", async () => {
    const { log, sink } = memoryLogger("debug");
    const down = await probeProviders(
      {
        up: { type: "openai", base_url: server.url, model: "m", api_keys: [], timeout_seconds: 5, retry_budget_seconds: 0, stream: false },
        down: { type: "anthropic", base_url: "http://127.0.0.1:9", model: "c", api_keys: ["k"], timeout_seconds: 5, retry_budget_seconds: 0, stream: false, max_tokens: 10 },
        offline: { type: "scripted", rules: [] },
      },
      systemClock,
      log,
    );
    expect(down).toEqual(["down"]);
    const lines = sink.events("provider_unreachable");
    expect(lines).toHaveLength(1);
    expect(lines[0]!.fields.provider).toBe("down");
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
