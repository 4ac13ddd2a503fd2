// memory_vectors as changelog records: the statements the store runs for a vector set by
// the holder (stamped with a fresh change sequence), for a flush's pending vectors, and for
// a carried one taken under mergeVector. SQL and conversion only; the rules are the store's
// and vector-merge.ts's.
import type { Database } from "bun:sqlite";
import { bytesToBase64 } from "./vector-codec.ts";
import { VECTOR_TABLE, type MemoryRecord, type VectorKind, type VectorRow } from "./records.ts";
import type { VectorStamp } from "./vector-merge.ts";

export interface VectorDb {
  handle: string;
  kind: VectorKind;
  id: string;
  model: string;
  dims: number;
  vector: Uint8Array;
  embedded_at: number;
  seq: number;
}

export function vectorStatements(sqlite: Database) {
  return {
    put: sqlite.query(
      `INSERT INTO memory_vectors (handle, kind, id, model, dims, vector, embedded_at, seq) VALUES ($handle, $kind, $id, $model, $dims, $vector, $embedded_at, $seq)
       ON CONFLICT (handle, kind, id) DO UPDATE SET model = excluded.model, dims = excluded.dims, vector = excluded.vector, embedded_at = excluded.embedded_at, seq = excluded.seq`,
    ),
    stamp: sqlite.query<VectorStamp, { $handle: string; $kind: VectorKind; $id: string }>(
      "SELECT model, dims, embedded_at FROM memory_vectors WHERE handle = $handle AND kind = $kind AND id = $id",
    ),
    pending: sqlite.query<VectorDb, { $handle: string; $after: number }>("SELECT * FROM memory_vectors WHERE handle = $handle AND seq > $after"),
    all: sqlite.query<VectorDb, { $handle: string }>("SELECT * FROM memory_vectors WHERE handle = $handle"),
    // A vector is only kept beside its row: one whose row is not here (dropped by the cap,
    // or never carried) would be an orphan that no row's delete ever removes.
    diaryHas: sqlite.query<{ id: string }, { $handle: string; $id: string }>("SELECT id FROM memory_diary WHERE handle = $handle AND id = $id"),
    episodeHas: sqlite.query<{ id: string }, { $handle: string; $id: string }>("SELECT id FROM memory_episodes WHERE handle = $handle AND id = $id"),
  };
}
export type VectorStatements = ReturnType<typeof vectorStatements>;

/** A stored vector as its changelog record. */
export function vectorRecordOf(r: VectorDb): MemoryRecord {
  const row: VectorRow = { id: r.id, handle: r.handle, model: r.model, dims: r.dims, embedded_at: r.embedded_at, vector: bytesToBase64(r.vector) };
  return { table: VECTOR_TABLE[r.kind], row };
}

/** The statement's parameters for a decoded vector row of `kind`, stamped `seq`. */
export function vectorParams(kind: VectorKind, row: VectorRow, bytes: Uint8Array, seq: number) {
  return { $handle: row.handle, $kind: kind, $id: row.id, $model: row.model, $dims: row.dims, $vector: bytes, $embedded_at: row.embedded_at, $seq: seq };
}
