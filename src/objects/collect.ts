// The object collector's decision (Seat Ownership § Singleton duties, `object-collector`):
// which objects to delete and which unfinished uploads to abandon. Pure: the store's
// listing, the names the estate's rows hold and whether that copy is whole, in; the
// deletions and the reason for each refusal, out. The duty (duty/object-collector.ts) reads
// and deletes; every rule here is a row of test/objects/collect.test.ts.
import type { StoredObject, UnfinishedUpload } from "./store.ts";

const HOUR_MS = 60 * 60 * 1000;

/**
 * An object unnamed for this long is garbage. A key is named only by the write that
 * uploaded it, right after the upload, so a day covers any write that can still land: a
 * pending write retried for minutes, a node stopped between its upload and its row.
 */
export const OBJECT_KEEP_MS = 24 * HOUR_MS;
/**
 * Chunks no object names, whose newest chunk is this old, are an upload that never
 * finished. An upload under way adds a chunk every few milliseconds; an hour is no upload.
 */
export const UNFINISHED_AFTER_MS = 1 * HOUR_MS;
/** Deletions one pass makes at most: a bounded pass, the rest go at the next tick. */
export const DELETES_PER_PASS_MAX = 1_000;

/** Whether the rows this node read are every row the fleet has (estate/copy.ts health). */
export type CopyState = { whole: true } | { whole: false; reason: string };

export interface CollectFacts {
  objects: readonly StoredObject[];
  /** Every object id a row of this node's copy names, read AFTER the listing (what must not go). */
  named: ReadonlySet<string>;
  /**
   * The names read BEFORE the listing: each one's object was stored before its row was
   * written, so it must be in the listing — one that is not is missing (the audit). Names
   * read after the listing may be of objects stored since, and prove nothing.
   */
  namedBefore?: ReadonlySet<string>;
  copy: CopyState;
  unfinished: readonly UnfinishedUpload[];
  now_ms: number;
  keep_ms?: number;
  unfinished_after_ms?: number;
  max_deletes?: number;
}

export interface CollectPlan {
  delete: string[];
  abandon: string[];
  /** Unnamed but younger than the keep: left for a later pass. */
  young: number;
  /** Set when deleting was stopped (the copy is not whole): why. */
  held: string | null;
  /** Past the per-pass bound: left for the next pass. */
  deferred: number;
  /** Objects a row names that the store does not hold (the audit; none while the copy is not whole). */
  missing: string[];
}

/**
 * The pass's plan. No object is deleted unless the copy is whole: a copy behind, being
 * restored or wrong may lack the row that names an object, and a deleted object cannot be
 * brought back. Abandoning chunks no object names is safe whatever the copy says — no row
 * can name an upload that never finished.
 */
export function planCollection(f: CollectFacts): CollectPlan {
  const keep_ms = f.keep_ms ?? OBJECT_KEEP_MS;
  const max = f.max_deletes ?? DELETES_PER_PASS_MAX;
  const after_ms = f.unfinished_after_ms ?? UNFINISHED_AFTER_MS;
  const abandon = f.unfinished.filter((u) => f.now_ms - u.last_chunk_ms >= after_ms).map((u) => u.nuid);
  if (!f.copy.whole) return { delete: [], abandon, young: 0, held: f.copy.reason, deferred: 0, missing: [] };
  const stored = new Set(f.objects.map((o) => o.key));
  const missing = [...(f.namedBefore ?? [])].filter((k) => !stored.has(k)).sort();
  const unnamed = f.objects.filter((o) => !f.named.has(o.key));
  const old = unnamed.filter((o) => f.now_ms - o.stored_at_ms >= keep_ms).sort((a, b) => a.stored_at_ms - b.stored_at_ms);
  return {
    delete: old.slice(0, max).map((o) => o.key),
    abandon,
    young: unnamed.length - old.length,
    held: null,
    deferred: Math.max(0, old.length - max),
    missing,
  };
}

/** Is a copy with these domain judgements whole? Every domain level and in service. Pure. */
export function copyState(domains: Record<string, { state: string; in_service: boolean; reason?: string }> | null): CopyState {
  if (!domains) return { whole: false, reason: "this node holds no copy of the estate" };
  for (const [domain, d] of Object.entries(domains)) {
    if (!d.in_service) return { whole: false, reason: `the ${domain} copy is out of service${d.reason ? `: ${d.reason}` : ""}` };
    if (d.state !== "level") return { whole: false, reason: `the ${domain} copy is ${d.state}` };
  }
  return { whole: true };
}
