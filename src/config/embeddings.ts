// company.providers.embeddings: where the vectors on diary notes and episodes come from
// (src/agent/providers/embeddings.ts). Optional: without it, and whenever the endpoint
// fails, memory_search is lexical (FTS5) alone.
import { z } from "zod";

/**
 * One embeddings call's bound. A search waits for it (the query's vector, and a batch of
 * the seat's unembedded rows): a local model embeds 32 short texts in well under a second,
 * a hosted one in a few hundred ms; past 5 s the search answers lexically instead.
 */
export const DEFAULT_EMBEDDINGS_TIMEOUT_SECONDS = 5;

export const embeddingsSchema = z
  .strictObject({
    type: z.enum(["openai", "ollama"]).describe("openai: POST {base_url}/embeddings (OpenAI, vLLM, llama.cpp); ollama: POST {base_url}/api/embed"),
    base_url: z.string().url().describe("e.g. https://api.openai.com/v1 or http://127.0.0.1:11434"),
    model: z.string().min(1).max(200),
    api_keys: z.array(z.string().min(1)).default([]).describe("Bearer keys, tried in turn (openai wire); never logged"),
    timeout_seconds: z.number().min(0.1).max(60).default(DEFAULT_EMBEDDINGS_TIMEOUT_SECONDS),
  })
  .optional()
  .describe("Vectors on diary notes and episodes, blended with the lexical rank in memory_search");
export type EmbeddingsConfig = z.infer<typeof embeddingsSchema>;
