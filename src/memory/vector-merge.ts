// Which vector a node keeps when the changelog carries one for a note or an episode it
// already holds (Seat Ownership: "takes the carried vector over a stored one of no model,
// another model or another width — never the reverse, so a stale copy replayed later
// cannot erase a filled vector"). Pure: the table in test/memory/vector-merge.test.ts.

export interface VectorStamp {
  model: string;
  dims: number;
  /** When the filler embedded it (its clock): what tells a stale copy from a refill. */
  embedded_at: number;
}

export type VectorVerdict = "take_carried" | "keep_local";

/** A carried vector older than the local one is a stale copy replayed late: never taken, so a
 * filled vector is never erased. Otherwise another model or width (a refill under the company's
 * model) or a later refill of the same one is taken; none at all, always. */
export function mergeVector(local: VectorStamp | null, carried: VectorStamp): VectorVerdict {
  if (local === null) return "take_carried";
  if (carried.embedded_at < local.embedded_at) return "keep_local";
  if (carried.model !== local.model) return "take_carried";
  if (carried.dims !== local.dims) return "take_carried";
  return carried.embedded_at > local.embedded_at ? "take_carried" : "keep_local";
}
