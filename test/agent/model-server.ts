// A local model endpoint for provider tests: Bun.serve on 127.0.0.1, answering from a
// queue of scripted responses and recording every request it got (path, headers, body).
export interface Recorded {
  path: string;
  headers: Record<string, string>;
  body: any;
}

export type Reply = { status?: number; headers?: Record<string, string>; json?: unknown; text?: string; delay_ms?: number };

export interface ModelServer {
  url: string;
  requests: Recorded[];
  /** Replies served in order; the last one repeats. */
  script(replies: Reply[]): void;
  stop(): void;
}

export function startModelServer(): ModelServer {
  let replies: Reply[] = [{ status: 500, text: "no script" }];
  const requests: Recorded[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const body = await req.json().catch(() => null);
      requests.push({ path: new URL(req.url).pathname, headers: Object.fromEntries(req.headers.entries()), body });
      const r = replies.length > 1 ? replies.shift()! : replies[0]!;
      if (r.delay_ms) await Bun.sleep(r.delay_ms);
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
    stop: () => void server.stop(true),
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
