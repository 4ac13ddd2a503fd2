// The embeddings client: texts in, one vector each out, over the OpenAI wire
// (POST {base_url}/embeddings) or Ollama's (POST {base_url}/api/embed). One attempt under
// one timeout and no retries: its callers (memory_search) answer lexically when it fails,
// which is better than a turn waiting out a backoff. Answers are parsed with zod; an error
// names what was wrong and never carries a key (redacted like the model providers').
import { z } from "zod";
import type { Clock } from "../../clock.ts";
import type { EmbeddingsConfig } from "../../config/embeddings.ts";
import { redactor, type Redact } from "./redact.ts";

/** Texts one call sends at most: OpenAI takes 2,048 inputs, Ollama batches freely; 64 keeps one request small. */
export const MAX_BATCH = 64;
/**
 * Characters of one text sent at most. OpenAI's embedding models take 8,191 tokens an
 * input and refuse the whole call past it; at ~4 characters a token, 8,000 characters is
 * well inside, and a note or episode is far shorter (records.ts caps them in bytes).
 */
export const MAX_INPUT_CHARS = 8_000;
/** Error-body characters kept in a failure's message: enough for the endpoint's own words. */
const ERROR_BODY_CHARS = 200;

export class EmbeddingsFailed extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EmbeddingsFailed";
  }
}

export interface Embedded {
  /** The model that made the vectors (as configured: the key vectors are stored under). */
  model: string;
  vectors: Float32Array[];
}

export interface Embedder {
  readonly model: string;
  embed(texts: readonly string[], signal?: AbortSignal): Promise<Embedded>;
}

const finite = z.number().refine(Number.isFinite, "is not a finite number");
const openaiAnswer = z.object({ data: z.array(z.object({ index: z.number().int().min(0), embedding: z.array(finite).min(1) })) });
const ollamaAnswer = z.object({ embeddings: z.array(z.array(finite).min(1)) });

/** Vectors in input order from either wire's answer; an error message names the field. */
export function parseAnswer(type: NonNullable<EmbeddingsConfig>["type"], body: unknown, count: number): Float32Array[] {
  let rows: number[][];
  if (type === "openai") {
    const a = openaiAnswer.safeParse(body);
    if (!a.success) throw new EmbeddingsFailed(`answer ${issuePath(a.error)}`);
    rows = new Array<number[]>(count);
    for (const d of a.data.data) if (d.index < count) rows[d.index] = d.embedding;
  } else {
    const a = ollamaAnswer.safeParse(body);
    if (!a.success) throw new EmbeddingsFailed(`answer ${issuePath(a.error)}`);
    rows = a.data.embeddings;
  }
  // A loop, not some(): an index the answer skipped is a hole, which some() never visits.
  let have = 0;
  for (let i = 0; i < rows.length; i++) if (rows[i] !== undefined) have++;
  if (rows.length !== count || have !== count) throw new EmbeddingsFailed(`answer has ${have} vectors for ${count} texts`);
  const width = rows[0]!.length;
  if (rows.some((r) => r.length !== width)) throw new EmbeddingsFailed("answer's vectors differ in width");
  return rows.map((r) => Float32Array.from(r));
}

function issuePath(err: z.ZodError): string {
  const i = err.issues[0];
  return `${i?.path.join(".") || "body"}: ${i?.message ?? "invalid"}`;
}

export function embeddingsClient(cfg: NonNullable<EmbeddingsConfig>, clock: Clock): Embedder {
  const redact: Redact = redactor(cfg.api_keys);
  const base = cfg.base_url.replace(/\/+$/, "");
  const url = cfg.type === "openai" ? `${base}/embeddings` : `${base}/api/embed`;
  let next = 0;
  return {
    model: cfg.model,
    async embed(texts, signal) {
      if (texts.length === 0) return { model: cfg.model, vectors: [] };
      if (texts.length > MAX_BATCH) throw new EmbeddingsFailed(`${texts.length} texts in one call, at most ${MAX_BATCH}`);
      const input = texts.map((t) => t.slice(0, MAX_INPUT_CHARS));
      const headers: Record<string, string> = { "content-type": "application/json" };
      // Keys in turn across calls: one rate-limited key does not stop every search.
      const key = cfg.api_keys.length > 0 ? cfg.api_keys[next++ % cfg.api_keys.length] : undefined;
      if (key !== undefined) headers.authorization = `Bearer ${key}`;
      const abort = new AbortController();
      const onAbort = () => abort.abort(signal?.reason);
      signal?.addEventListener("abort", onAbort, { once: true });
      const timer = clock.setTimeout(() => abort.abort(new Error(`no answer within ${cfg.timeout_seconds} s`)), cfg.timeout_seconds * 1000);
      try {
        const res = await fetch(url, { method: "POST", headers, body: JSON.stringify({ model: cfg.model, input }), signal: abort.signal });
        const text = await res.text();
        if (!res.ok) throw new EmbeddingsFailed(`HTTP ${res.status} from ${url}: ${redact(text.slice(0, ERROR_BODY_CHARS))}`);
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          throw new EmbeddingsFailed(`answer from ${url} is not JSON`);
        }
        return { model: cfg.model, vectors: parseAnswer(cfg.type, body, texts.length) };
      } catch (err) {
        if (err instanceof EmbeddingsFailed) throw err;
        const why = abort.signal.aborted ? String((abort.signal.reason as Error)?.message ?? abort.signal.reason) : (err as Error).message;
        throw new EmbeddingsFailed(`${url}: ${redact(why)}`);
      } finally {
        timer.cancel();
        signal?.removeEventListener("abort", onAbort);
      }
    },
  };
}
