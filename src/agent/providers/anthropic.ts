// The anthropic provider: the Messages API with tool use. Tool results travel as
// tool_result blocks inside one user message (consecutive results merge, as the API
// requires alternating roles). Responses are zod-parsed.
import type { KeyCooldowns } from "./contract.ts";
import { z } from "zod";
import type { Clock } from "../../clock.ts";
import { ProviderError, type ChatMessage, type Completion, type CompletionRequest, type Provider } from "./contract.ts";
import { callWithRetries, defaultTimeouts, endpointUrl, keyFor, parseProviderJson, retryOptions, type Timeouts } from "./http.ts";
import { noRedaction, type Redact } from "./redact.ts";
import { assembleAnthropic, sseFrames } from "./stream.ts";

/** The Messages API version this code speaks (tool use is stable in it). */
export const ANTHROPIC_VERSION = "2023-06-01";

export interface AnthropicOptions {
  name: string;
  base_url: string;
  model: string;
  api_keys: readonly string[];
  max_tokens: number;
  /** Per-call timeout (the overall bound); the others default from it and `stream`. */
  timeout_ms: number;
  timeouts?: Partial<Timeouts>;
  /** Ask for server-sent events and assemble the deltas. */
  stream?: boolean;
  retry_budget_ms?: number;
  redact?: Redact;
  random?: () => number;
  clock: Clock;
  /** The fleet's shared key cooldowns (a key another node saw 429 on is passed over). */
  cooldowns?: KeyCooldowns;
}

const responseSchema = z.object({
  content: z.array(
    z.discriminatedUnion("type", [
      z.object({ type: z.literal("text"), text: z.string() }),
      z.object({ type: z.literal("tool_use"), id: z.string(), name: z.string().min(1), input: z.record(z.string(), z.unknown()) }),
      z.object({ type: z.literal("thinking") }).loose(),
      z.object({ type: z.literal("redacted_thinking") }).loose(),
    ]),
  ),
  usage: z.object({ input_tokens: z.number().int().nonnegative(), output_tokens: z.number().int().nonnegative() }).nullish(),
});

type Block = Record<string, unknown>;

export function toAnthropicMessages(messages: readonly ChatMessage[]): { role: "user" | "assistant"; content: Block[] }[] {
  const out: { role: "user" | "assistant"; content: Block[] }[] = [];
  const push = (role: "user" | "assistant", block: Block) => {
    const last = out[out.length - 1];
    if (last && last.role === role) last.content.push(block);
    else out.push({ role, content: [block] });
  };
  for (const m of messages) {
    if (m.role === "user") push("user", { type: "text", text: m.content });
    else if (m.role === "assistant") {
      if (m.content !== "") push("assistant", { type: "text", text: m.content });
      for (const c of m.tool_calls) push("assistant", { type: "tool_use", id: c.id, name: c.name, input: c.arguments ?? {} });
    } else push("user", { type: "tool_result", tool_use_id: m.tool_call_id, content: m.content, is_error: m.is_error });
  }
  return out;
}

export function parseAnthropicResponse(provider: string, text: string, redact: Redact = noRedaction): Completion {
  const data = parseProviderJson(provider, text, responseSchema, redact);
  const texts: string[] = [];
  const toolCalls: Completion["toolCalls"] = [];
  for (const b of data.content) {
    if (b.type === "text") texts.push(b.text);
    else if (b.type === "tool_use") {
      const input = b.input as Record<string, unknown>;
      toolCalls.push({ id: b.id as string, name: b.name as string, arguments: input, raw_arguments: JSON.stringify(input) });
    }
  }
  return {
    text: texts.join("\n"),
    toolCalls,
    usage: { input_tokens: data.usage?.input_tokens ?? 0, output_tokens: data.usage?.output_tokens ?? 0 },
  };
}

export function anthropicProvider(opts: AnthropicOptions): Provider {
  if (opts.api_keys.length === 0) throw new ProviderError(opts.name, "config", "api_keys is empty");
  const url = endpointUrl("anthropic", opts.base_url);
  const stream = opts.stream ?? false;
  const timeouts: Timeouts = { ...defaultTimeouts(stream, opts.timeout_ms), ...(opts.timeouts ?? {}) };
  const redact = opts.redact ?? noRedaction;
  let next_key = 0;
  return {
    name: opts.name,
    async complete(req: CompletionRequest): Promise<Completion> {
      const body = {
        model: opts.model,
        max_tokens: opts.max_tokens,
        system: req.system,
        messages: toAnthropicMessages(req.messages),
        ...(req.tools.length > 0
          ? { tools: req.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.input_schema })) }
          : {}),
        ...(stream ? { stream: true } : {}),
      };
      const start = next_key++;
      return callWithRetries(
        (attempt) => {
          const key = keyFor(opts.api_keys, start, attempt, opts.cooldowns && ((k) => opts.cooldowns!.cooling(opts.name, k)))!;
          return { url, headers: { "x-api-key": key, "anthropic-version": ANTHROPIC_VERSION, ...(stream ? { accept: "text/event-stream" } : {}) }, body, key };
        },
        async (answer) => {
          if (stream) return assembleAnthropic(opts.name, sseFrames(opts.name, answer.chunks()), req.onText);
          return parseAnthropicResponse(opts.name, await answer.text(), redact);
        },
        retryOptions(opts, timeouts, opts.api_keys.length, req),
      );
    },
  };
}
