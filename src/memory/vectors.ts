// Vectors on a seat's diary notes and episodes (Seat Ownership: "a diary note's or an
// episode's vector, which the holder fills after the insert for a row written without one
// or under a model the company has since left"), stored beside the rows in memory_vectors,
// and the blended search over them. No I/O beyond node.db: the embeddings themselves come
// from the caller (src/agent/providers/embeddings.ts), so this module is tested on files.
// Setting one is MemoryStore.setVectors: it is stamped for the changelog like a new row.
import type { Database } from "bun:sqlite";
import { blend, cosine } from "./blend.ts";
import type { VectorKind } from "./records.ts";
import type { MemoryStore, SearchHit } from "./store.ts";

/** Rows one fill embeds at most: one provider call's batch, so a search waits for one call. */
export const FILL_BATCH = 32;
/**
 * Rows one vector search compares at most, newest first. 5,000 × 1,536 floats is ~8 M
 * multiply-adds, a few ms in Bun; a seat's diary is capped well below it (store.ts), so
 * the bound only matters for a seat with years of episodes, whose oldest are then left to
 * the lexical half.
 */
export const VECTOR_SCAN_MAX = 5_000;
/** Lexical candidates a blended search starts from: more than it answers, so the vector half can reorder them. */
export const LEXICAL_CANDIDATES = 50;

type Kind = VectorKind;
export interface Unembedded {
  kind: Kind;
  id: string;
  text: string;
}

/** A seat's rows with no vector under `model` at `dims` (dims null: any width), newest first. */
export function unembedded(sqlite: Database, handle: string, model: string, dims: number | null, limit: number): Unembedded[] {
  return sqlite
    .query<Unembedded, { $h: string; $m: string; $d: number; $n: number }>(
      `SELECT kind, id, text FROM (
         SELECT 'diary' AS kind, id, content AS text, created_at FROM memory_diary WHERE handle = $h
         UNION ALL
         SELECT 'episode' AS kind, id, summary AS text, created_at FROM memory_episodes WHERE handle = $h
       ) r
       WHERE NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.handle = $h AND v.kind = r.kind AND v.id = r.id
                           AND v.model = $m AND ($d < 0 OR v.dims = $d))
       ORDER BY created_at DESC LIMIT $n`,
    )
    .all({ $h: handle, $m: model, $d: dims ?? -1, $n: limit });
}

/** The seat's rows most similar to `query` under `model`, best first. */
export function nearest(sqlite: Database, handle: string, model: string, query: Float32Array, limit: number): { kind: Kind; id: string; cosine: number }[] {
  const rows = sqlite
    .query<{ kind: Kind; id: string; vector: Uint8Array }, { $h: string; $m: string; $d: number; $n: number }>(
      "SELECT kind, id, vector FROM memory_vectors WHERE handle = $h AND model = $m AND dims = $d ORDER BY rowid DESC LIMIT $n",
    )
    .all({ $h: handle, $m: model, $d: query.length, $n: VECTOR_SCAN_MAX });
  const scored = rows.map((r) => ({ kind: r.kind, id: r.id, cosine: cosine(query, new Float32Array(r.vector.buffer, r.vector.byteOffset, r.vector.byteLength / 4)) }));
  scored.sort((a, b) => b.cosine - a.cosine);
  return scored.slice(0, limit);
}

const keyOf = (kind: Kind, id: string) => `${kind}:${id}`;

/**
 * memory_search with vectors: the lexical candidates and the nearest vectors, blended
 * (blend.ts). A row only the vector half found is read back for its text.
 */
export function blendedSearch(store: MemoryStore, handle: string, text: string, model: string, query: Float32Array, limit: number): SearchHit[] {
  const lexical = store.searchRanked(handle, text, LEXICAL_CANDIDATES);
  const near = nearest(store.sqlite, handle, model, query, LEXICAL_CANDIDATES);
  const texts = new Map(lexical.map((h) => [keyOf(h.kind, h.id), h.text]));
  const order = blend(
    lexical.map((h) => ({ key: keyOf(h.kind, h.id), bm25: h.bm25 })),
    near.map((n) => ({ key: keyOf(n.kind, n.id), cosine: n.cosine })),
    limit,
  );
  return order.map((b) => {
    const [kind, ...rest] = b.key.split(":");
    const id = rest.join(":");
    return { kind: kind as Kind, id, text: texts.get(b.key) ?? textOf(store.sqlite, handle, kind as Kind, id) };
  });
}

function textOf(sqlite: Database, handle: string, kind: Kind, id: string): string {
  const sql = kind === "diary" ? "SELECT content AS text FROM memory_diary WHERE handle = ? AND id = ?" : "SELECT summary AS text FROM memory_episodes WHERE handle = ? AND id = ?";
  return sqlite.query<{ text: string }, [string, string]>(sql).get(handle, id)?.text ?? "";
}
