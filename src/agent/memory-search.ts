// memory_search's answer: lexical (FTS5) alone, or blended with vectors when the company
// names an embeddings endpoint. The one embeddings call a search makes carries the query
// AND a batch of the seat's rows that have no vector yet under the configured model — the
// holder filling its rows' vectors as it uses them (Seat Ownership). Any failure answers
// lexically and logs one `memory_search_lexical_only`: search never fails for want of a vector.
import type { Logger } from "../log.ts";
import type { MemoryStore, SearchHit } from "../memory/store.ts";
import { blendedSearch, FILL_BATCH, unembedded } from "../memory/vectors.ts";
import type { Embedder } from "./providers/embeddings.ts";

export interface MemorySearchDeps {
  store: MemoryStore;
  /** The embedder of the company in force, or null (no endpoint configured). */
  embedder: () => Embedder | null;
  log: Logger;
}

export interface MemorySearchAnswer {
  hits: SearchHit[];
  /** lexical: FTS alone (no endpoint, or it failed); blended: FTS and vectors. */
  mode: "lexical" | "blended";
}

export async function searchMemory(d: MemorySearchDeps, handle: string, text: string, limit: number, signal?: AbortSignal): Promise<MemorySearchAnswer> {
  const embedder = d.embedder();
  if (embedder === null) return { hits: d.store.search(handle, text, limit), mode: "lexical" };
  try {
    const missing = unembedded(d.store.sqlite, handle, embedder.model, null, FILL_BATCH);
    const out = await embedder.embed([text, ...missing.map((m) => m.text)], signal);
    const [query, ...rows] = out.vectors;
    // Stamped for the changelog: the next flush carries them, and the next holder ranks with them.
    d.store.setVectors(handle, out.model, missing.map((m, i) => ({ kind: m.kind, id: m.id, vector: rows[i]! })));
    return { hits: blendedSearch(d.store, handle, text, out.model, query!, limit), mode: "blended" };
  } catch (err) {
    d.log.warn("memory_search_lexical_only", { seat: handle, model: embedder.model, reason: (err as Error).message });
    return { hits: d.store.search(handle, text, limit), mode: "lexical" };
  }
}
