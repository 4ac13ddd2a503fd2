// A local model endpoint for provider tests: Bun.serve on 127.0.0.1, answering from a
// queue of scripted responses and recording every request it got (path, headers, body).
export interface Recorded {
  /** Date.now() when the request arrived. */
  at: number;
  path: string;
  headers: Record<string, string>;
  body: any;
}

export type Reply = {
  status?: number;
  headers?: Record<string, string>;
  json?: unknown;
  text?: string;
  /** Wait this long before the status line. */
  delay_ms?: number;
  /** Never answer (until the client gives up or the server stops): a hung endpoint. */
  hang?: boolean;
  /** Answer 200 as server-sent events, one frame per entry (`data:` lines; `event` when given). */
  sse?: { event?: string; data: string }[];
  /** Between SSE frames; after the last frame, `stall_after` frames stop coming altogether. */
  chunk_delay_ms?: number;
  stall_after?: number;
};

export interface ModelServer {
  url: string;
  requests: Recorded[];
  /** Replies served in order; the last one repeats. */
  script(replies: Reply[]): void;
  stop(): void;
}

export function startModelServer(): ModelServer {
  let replies: Reply[] = [{ status: 500, text: "no script" }];
  const hung = new Set<() => void>();
  const requests: Recorded[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const at = Date.now();
      const body = await req.json().catch(() => null);
      requests.push({ at, path: new URL(req.url).pathname, headers: Object.fromEntries(req.headers.entries()), body });
      const r = replies.length > 1 ? replies.shift()! : replies[0]!;
      if (r.hang) {
        await new Promise<void>((resolve) => {
          hung.add(resolve);
          req.signal.addEventListener("abort", () => resolve(), { once: true });
        });
        return new Response("gone", { status: 599 });
      }
      if (r.delay_ms) await Bun.sleep(r.delay_ms);
      if (r.sse) {
        const frames = r.sse;
        const enc = new TextEncoder();
        const stream = new ReadableStream<Uint8Array>({
          async start(ctl) {
            for (const [i, f] of frames.entries()) {
              if (r.stall_after !== undefined && i >= r.stall_after) {
                await new Promise<void>((resolve) => {
                  hung.add(resolve);
                  req.signal.addEventListener("abort", () => resolve(), { once: true });
                });
                try {
                  ctl.close();
                } catch {}
                return;
              }
              ctl.enqueue(enc.encode(`${f.event ? `event: ${f.event}\n` : ""}data: ${f.data}\n\n`));
              if (r.chunk_delay_ms) await Bun.sleep(r.chunk_delay_ms);
            }
            ctl.close();
          },
        });
        return new Response(stream, { status: r.status ?? 200, headers: { "content-type": "text/event-stream", ...(r.headers ?? {}) } });
      }
      const text = r.text ?? JSON.stringify(r.json ?? {});
      return new Response(text, { status: r.status ?? 200, headers: { "content-type": "application/json", ...(r.headers ?? {}) } });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}`,
    requests,
    script: (r) => {
      replies = [...r];
      requests.length = 0;
    },
    stop: () => {
      for (const h of hung) h();
      void server.stop(true);
    },
  };
}

export function openAiToolReply(calls: { id: string; name: string; args: unknown }[], content: string | null = null) {
  return {
    json: {
      id: "chatcmpl-1",
      object: "chat.completion",
      choices: [
        {
          index: 0,
          finish_reason: calls.length ? "tool_calls" : "stop",
          message: {
            role: "assistant",
            content,
            ...(calls.length
              ? { tool_calls: calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: JSON.stringify(c.args) } })) }
              : {}),
          },
        },
      ],
      usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 },
    },
  };
}

export function openAiTextReply(text: string) {
  return openAiToolReply([], text);
}

export function anthropicTextReply(text: string) {
  return {
    json: { id: "msg_1", type: "message", role: "assistant", content: [{ type: "text", text }], stop_reason: "end_turn", usage: { input_tokens: 5, output_tokens: 3 } },
  };
}

/** An OpenAI-wire stream: text in pieces, then tool calls split across chunks, usage, [DONE]. */
export function openAiStream(pieces: string[], calls: { id: string; name: string; args: unknown }[] = []): Reply {
  const frames: { data: string }[] = pieces.map((p) => ({ data: JSON.stringify({ choices: [{ index: 0, delta: { content: p } }] }) }));
  calls.forEach((c, index) => {
    const args = JSON.stringify(c.args);
    const half = Math.floor(args.length / 2);
    frames.push({ data: JSON.stringify({ choices: [{ index: 0, delta: { tool_calls: [{ index, id: c.id, type: "function", function: { name: c.name, arguments: args.slice(0, half) } }] } }] }) });
    frames.push({ data: JSON.stringify({ choices: [{ index: 0, delta: { tool_calls: [{ index, function: { arguments: args.slice(half) } }] } }] }) });
  });
  frames.push({ data: JSON.stringify({ choices: [], usage: { prompt_tokens: 11, completion_tokens: 7 } }) });
  frames.push({ data: "[DONE]" });
  return { sse: frames };
}

/** An Anthropic-wire stream: message_start, text deltas, tool_use with input_json deltas, stop. */
export function anthropicStream(pieces: string[], calls: { id: string; name: string; args: unknown }[] = []): Reply {
  const ev = (o: Record<string, unknown>) => ({ event: String(o.type), data: JSON.stringify(o) });
  const frames = [ev({ type: "message_start", message: { id: "msg_1", usage: { input_tokens: 20, output_tokens: 1 } } }), ev({ type: "ping" })];
  frames.push(ev({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }));
  for (const p of pieces) frames.push(ev({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: p } }));
  frames.push(ev({ type: "content_block_stop", index: 0 }));
  calls.forEach((c, i) => {
    const index = i + 1;
    const args = JSON.stringify(c.args);
    const half = Math.floor(args.length / 2);
    frames.push(ev({ type: "content_block_start", index, content_block: { type: "tool_use", id: c.id, name: c.name, input: {} } }));
    frames.push(ev({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: args.slice(0, half) } }));
    frames.push(ev({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: args.slice(half) } }));
    frames.push(ev({ type: "content_block_stop", index }));
  });
  frames.push(ev({ type: "message_delta", delta: { stop_reason: calls.length ? "tool_use" : "end_turn" }, usage: { output_tokens: 9 } }));
  frames.push(ev({ type: "message_stop" }));
  return { sse: frames };
}
