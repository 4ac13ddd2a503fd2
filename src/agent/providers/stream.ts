// Streamed answers (`stream: true`): server-sent events split into frames, and one
// assembler per wire that folds the frames — text deltas and tool-call deltas — into the
// same Completion a non-streamed answer parses to. Splitting and folding are pure; the
// only I/O is the chunk iterator the caller hands in (http.ts reads it under its timers).
import { z } from "zod";
import { ProviderError, parseArguments, type Completion, type ToolCall } from "./contract.ts";
import { parseProviderValue } from "./http.ts";

export interface SseFrame {
  event: string;
  data: string;
}

/** A frame bigger than this is not a model's delta: the stream is wrong, not slow. */
export const MAX_FRAME_CHARS = 1024 * 1024;
/** Tool calls one streamed answer may open (the engine runs at most 16 per answer). */
const MAX_STREAM_TOOL_CALLS = 64;

/** Splits SSE text chunks into frames (event name + joined data lines). */
export async function* sseFrames(provider: string, chunks: AsyncIterable<string>): AsyncIterable<SseFrame> {
  let buf = "";
  for await (const chunk of chunks) {
    buf += chunk.replace(/\r\n?/g, "\n");
    for (;;) {
      const end = buf.indexOf("\n\n");
      if (end < 0) break;
      const raw = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const frame = parseFrame(raw);
      if (frame) yield frame;
    }
    if (buf.length > MAX_FRAME_CHARS) throw new ProviderError(provider, "bad_response", `stream frame over ${MAX_FRAME_CHARS} characters`);
  }
  const frame = parseFrame(buf);
  if (frame) yield frame;
}

function parseFrame(raw: string): SseFrame | null {
  let event = "message";
  const data: string[] = [];
  for (const line of raw.split("\n")) {
    if (line.startsWith(":") || line === "") continue;
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i);
    const value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  if (data.length === 0) return null;
  return { event, data: data.join("\n") };
}

function frameJson(provider: string, data: string): unknown {
  try {
    return JSON.parse(data);
  } catch {
    throw new ProviderError(provider, "bad_response", `stream frame is not JSON: ${data.slice(0, 120)}`);
  }
}

// ---- OpenAI chat completions chunks ------------------------------------------------------

const openAiChunk = z.object({
  choices: z
    .array(
      z.object({
        delta: z
          .object({
            content: z.string().nullish(),
            tool_calls: z
              .array(
                z.object({
                  index: z.number().int().nonnegative(),
                  id: z.string().nullish(),
                  function: z.object({ name: z.string().nullish(), arguments: z.string().nullish() }).nullish(),
                }),
              )
              .nullish(),
          })
          .nullish(),
      }),
    )
    .default([]),
  usage: z.object({ prompt_tokens: z.number().int().nonnegative(), completion_tokens: z.number().int().nonnegative() }).nullish(),
});

/** Folds an OpenAI stream (`data: {chunk}` … `data: [DONE]`) into a Completion. */
export async function assembleOpenAi(provider: string, frames: AsyncIterable<SseFrame>, onText?: (d: string) => void): Promise<Completion> {
  let text = "";
  const calls = new Map<number, { id: string; name: string; args: string }>();
  const usage = { input_tokens: 0, output_tokens: 0 };
  let done = false;
  let any = false;
  for await (const f of frames) {
    if (f.data.trim() === "[DONE]") {
      done = true;
      break;
    }
    const json = frameJson(provider, f.data) as { error?: { message?: string } };
    if (json && typeof json === "object" && json.error) {
      // An error after the 200: the server broke mid-answer.
      throw new ProviderError(provider, "http", `stream error: ${String(json.error.message ?? "unknown")}`, 500);
    }
    const chunk = parseProviderValue(provider, json, openAiChunk);
    any = true;
    if (chunk.usage) {
      usage.input_tokens = chunk.usage.prompt_tokens;
      usage.output_tokens = chunk.usage.completion_tokens;
    }
    const delta = chunk.choices[0]?.delta;
    if (!delta) continue;
    if (delta.content) {
      text += delta.content;
      onText?.(delta.content);
    }
    for (const tc of delta.tool_calls ?? []) {
      let c = calls.get(tc.index);
      if (!c) {
        if (calls.size >= MAX_STREAM_TOOL_CALLS) throw new ProviderError(provider, "bad_response", `stream opened more than ${MAX_STREAM_TOOL_CALLS} tool calls`);
        c = { id: "", name: "", args: "" };
        calls.set(tc.index, c);
      }
      if (tc.id) c.id = tc.id;
      if (tc.function?.name) c.name += tc.function.name;
      if (tc.function?.arguments) c.args += tc.function.arguments;
    }
  }
  if (!done && !any) throw new ProviderError(provider, "bad_response", "the stream ended before any chunk");
  if (!done) throw new ProviderError(provider, "network", "the stream ended before [DONE]");
  const toolCalls: ToolCall[] = [...calls.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([i, c]) => {
      if (c.name === "") throw new ProviderError(provider, "bad_response", `streamed tool call ${i} has no name`);
      return { id: c.id || `call_${i}`, name: c.name, arguments: parseArguments(c.args), raw_arguments: c.args };
    });
  return { text, toolCalls, usage };
}

// ---- Anthropic Messages events -------------------------------------------------------------

const anthropicEvent = z.discriminatedUnion("type", [
  z.object({ type: z.literal("message_start"), message: z.object({ usage: z.object({ input_tokens: z.number().int().nonnegative() }).loose().nullish() }).loose() }),
  z.object({
    type: z.literal("content_block_start"),
    index: z.number().int().nonnegative(),
    content_block: z.object({ type: z.string(), id: z.string().optional(), name: z.string().optional(), text: z.string().optional() }).loose(),
  }),
  z.object({
    type: z.literal("content_block_delta"),
    index: z.number().int().nonnegative(),
    delta: z.object({ type: z.string(), text: z.string().optional(), partial_json: z.string().optional() }).loose(),
  }),
  z.object({ type: z.literal("content_block_stop"), index: z.number().int().nonnegative() }),
  z.object({ type: z.literal("message_delta"), usage: z.object({ output_tokens: z.number().int().nonnegative() }).loose().nullish() }).loose(),
  z.object({ type: z.literal("message_stop") }),
  z.object({ type: z.literal("ping") }),
  z.object({ type: z.literal("error"), error: z.object({ type: z.string(), message: z.string() }).loose() }),
]);

/** Anthropic's in-stream error types, as the HTTP status the same error has unstreamed. */
const STREAM_ERROR_STATUS: Record<string, number> = { overloaded_error: 529, api_error: 500, rate_limit_error: 429, invalid_request_error: 400, authentication_error: 401, permission_error: 403, not_found_error: 404, request_too_large: 413 };

/** Folds an Anthropic stream (message_start … message_stop) into a Completion. */
export async function assembleAnthropic(provider: string, frames: AsyncIterable<SseFrame>, onText?: (d: string) => void): Promise<Completion> {
  const blocks = new Map<number, { type: string; id: string; name: string; text: string; json: string }>();
  const usage = { input_tokens: 0, output_tokens: 0 };
  let stopped = false;
  for await (const f of frames) {
    const ev = parseProviderValue(provider, frameJson(provider, f.data), anthropicEvent);
    switch (ev.type) {
      case "message_start":
        usage.input_tokens = ev.message.usage?.input_tokens ?? 0;
        break;
      case "content_block_start":
        if (blocks.size >= MAX_STREAM_TOOL_CALLS) throw new ProviderError(provider, "bad_response", `stream opened more than ${MAX_STREAM_TOOL_CALLS} blocks`);
        blocks.set(ev.index, { type: ev.content_block.type, id: ev.content_block.id ?? "", name: ev.content_block.name ?? "", text: ev.content_block.text ?? "", json: "" });
        break;
      case "content_block_delta": {
        const b = blocks.get(ev.index);
        if (!b) throw new ProviderError(provider, "bad_response", `delta for block ${ev.index} before its start`);
        if (ev.delta.type === "text_delta" && ev.delta.text !== undefined) {
          b.text += ev.delta.text;
          onText?.(ev.delta.text);
        } else if (ev.delta.type === "input_json_delta" && ev.delta.partial_json !== undefined) b.json += ev.delta.partial_json;
        break;
      }
      case "message_delta":
        if (ev.usage) usage.output_tokens = ev.usage.output_tokens;
        break;
      case "message_stop":
        stopped = true;
        break;
      case "error": {
        const status = STREAM_ERROR_STATUS[ev.error.type] ?? 500;
        throw new ProviderError(provider, "http", `stream error ${ev.error.type}: ${ev.error.message}`, status);
      }
      default:
        break;
    }
    if (stopped) break;
  }
  if (!stopped) throw new ProviderError(provider, "network", "the stream ended before message_stop");
  const ordered = [...blocks.entries()].sort((a, b) => a[0] - b[0]).map(([, b]) => b);
  const texts: string[] = [];
  const toolCalls: ToolCall[] = [];
  for (const b of ordered) {
    if (b.type === "text") texts.push(b.text);
    else if (b.type === "tool_use") {
      const args = parseArguments(b.json);
      toolCalls.push({ id: b.id, name: b.name, arguments: args, raw_arguments: b.json === "" ? "{}" : b.json });
    }
  }
  return { text: texts.join("\n"), toolCalls, usage };
}
