// A small real embeddings endpoint for tests: Bun.serve on 127.0.0.1 speaking the OpenAI
// wire (/v1/embeddings, answers out of order on purpose) and Ollama's (/api/embed), whose
// whole "model" is a word's synonym group hashed into DIMS — so "vendor" lands on
// "supplier" — and which records every call (path, bearer, how many texts).

/** Width of the server's vectors. */
export const DIMS = 64;
/** A word's meaning is its synonym group. */
const SYNONYMS: Record<string, string> = { vendor: "supplier", supplier: "supplier", provider: "supplier", thursday: "thursday", thursdays: "thursday", ships: "ship", delivers: "ship", shipping: "ship" };

export function embedText(text: string): number[] {
  const v = new Array<number>(DIMS).fill(0);
  for (const w of text.toLowerCase().match(/[a-z]+/g) ?? []) {
    const meaning = SYNONYMS[w] ?? w;
    let h = 2166136261;
    for (const ch of meaning) h = Math.imul(h ^ ch.charCodeAt(0), 16777619) >>> 0;
    v[h % DIMS]! += 1;
  }
  return v;
}

/** ok, or a failure to answer with: an error status, a slow answer, a wrong shape, one vector short. */
export type EmbeddingsMode = "ok" | "fail" | "slow" | "garbage" | "short";

export interface EmbeddingsServer {
  base: string;
  /** Every call, in order. */
  seen: { path: string; auth: string | null; inputs: number; texts: string[] }[];
  mode: EmbeddingsMode;
  stop(): void;
}

/** `failBody` is what a "fail" answer says (a test puts its key in it to check redaction). */
export function startEmbeddingsServer(failBody = '{"error":"overloaded"}'): EmbeddingsServer {
  const out: EmbeddingsServer = { base: "", seen: [], mode: "ok", stop: () => server.stop(true) };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      const body = (await req.json()) as { model: string; input: string[] };
      out.seen.push({ path: url.pathname, auth: req.headers.get("authorization"), inputs: body.input.length, texts: body.input });
      if (out.mode === "fail") return new Response(failBody, { status: 503 });
      if (out.mode === "slow") await Bun.sleep(2_000);
      if (out.mode === "garbage") return Response.json({ data: [{ index: 0, embedding: ["x"] }] });
      const vectors = body.input.map(embedText);
      if (out.mode === "short") vectors.pop();
      if (url.pathname === "/v1/embeddings") {
        // Out of order on purpose: the client must place each by its index.
        return Response.json({ object: "list", model: body.model, data: vectors.map((embedding, index) => ({ object: "embedding", index, embedding })).reverse() });
      }
      if (url.pathname === "/api/embed") return Response.json({ model: body.model, embeddings: vectors });
      return new Response("not found", { status: 404 });
    },
  });
  out.base = `http://127.0.0.1:${server.port}`;
  return out;
}
