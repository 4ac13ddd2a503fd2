// The openai provider: chat completions with tool calls over fetch, against any
// OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, llama.cpp server). Responses are
// zod-parsed: an endpoint that answers 200 with the wrong shape is an error naming the
// field, not a turn built on undefined.
import type { KeyCooldowns } from "./contract.ts";
import { z } from "zod";
import type { Clock } from "../../clock.ts";
import { ProviderError, parseArguments, type ChatMessage, type Completion, type CompletionRequest, type Provider } from "./contract.ts";
import { callWithRetries, defaultTimeouts, endpointUrl, keyFor, parseProviderJson, retryOptions, type Timeouts } from "./http.ts";
import { noRedaction, type Redact } from "./redact.ts";
import { assembleOpenAi, sseFrames } from "./stream.ts";

export interface OpenAiOptions {
  name: string;
  base_url: string;
  model: string;
  api_keys: readonly string[];
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
  choices: z
    .array(
      z.object({
        message: z.object({
          content: z.string().nullish(),
          tool_calls: z
            .array(
              z.object({
                id: z.string(),
                type: z.literal("function").optional(),
                function: z.object({ name: z.string().min(1), arguments: z.string().nullish() }),
              }),
            )
            .nullish(),
        }),
      }),
    )
    .min(1, "choices is empty"),
  usage: z.object({ prompt_tokens: z.number().int().nonnegative(), completion_tokens: z.number().int().nonnegative() }).nullish(),
});

export function toOpenAiMessages(system: string, messages: readonly ChatMessage[]): unknown[] {
  const out: unknown[] = [{ role: "system", content: system }];
  for (const m of messages) {
    if (m.role === "user") out.push({ role: "user", content: m.content });
    else if (m.role === "assistant") {
      out.push({
        role: "assistant",
        content: m.content === "" ? null : m.content,
        ...(m.tool_calls.length > 0
          ? {
              tool_calls: m.tool_calls.map((c) => ({
                id: c.id,
                type: "function",
                function: { name: c.name, arguments: c.arguments === null ? c.raw_arguments : JSON.stringify(c.arguments) },
              })),
            }
          : {}),
      });
    } else out.push({ role: "tool", tool_call_id: m.tool_call_id, content: m.content });
  }
  return out;
}

export function parseOpenAiResponse(provider: string, text: string, redact: Redact = noRedaction): Completion {
  const data = parseProviderJson(provider, text, responseSchema, redact);
  const message = data.choices[0]!.message;
  return {
    text: message.content ?? "",
    toolCalls: (message.tool_calls ?? []).map((c) => {
      const raw = c.function.arguments ?? "";
      return { id: c.id, name: c.function.name, arguments: parseArguments(raw), raw_arguments: raw };
    }),
    usage: {
      input_tokens: data.usage?.prompt_tokens ?? 0,
      output_tokens: data.usage?.completion_tokens ?? 0,
    },
  };
}

export function openAiProvider(opts: OpenAiOptions): Provider {
  const url = endpointUrl("openai", opts.base_url);
  const stream = opts.stream ?? false;
  const timeouts: Timeouts = { ...defaultTimeouts(stream, opts.timeout_ms), ...(opts.timeouts ?? {}) };
  const redact = opts.redact ?? noRedaction;
  // Each call starts on the next key, so load spreads across keys even without failures.
  let next_key = 0;
  return {
    name: opts.name,
    async complete(req: CompletionRequest): Promise<Completion> {
      const body = {
        model: opts.model,
        messages: toOpenAiMessages(req.system, req.messages),
        ...(req.tools.length > 0
          ? {
              tools: req.tools.map((t) => ({ type: "function", function: { name: t.name, description: t.description, parameters: t.input_schema } })),
              tool_choice: "auto",
            }
          : {}),
        stream,
        ...(stream ? { stream_options: { include_usage: true } } : {}),
      };
      const start = next_key++;
      return callWithRetries(
        (attempt) => {
          const key = keyFor(opts.api_keys, start, attempt, opts.cooldowns && ((k) => opts.cooldowns!.cooling(opts.name, k)));
          const headers: Record<string, string> = key === undefined ? {} : { authorization: `Bearer ${key}` };
          if (stream) headers.accept = "text/event-stream";
          return { url, headers, body, key };
        },
        async (answer) => {
          if (stream) return assembleOpenAi(opts.name, sseFrames(opts.name, answer.chunks()), req.onText);
          return parseOpenAiResponse(opts.name, await answer.text(), redact);
        },
        retryOptions(opts, timeouts, opts.api_keys.length, req),
      );
    },
  };
}
