// Behind or wrong (Seat Ownership § "A copy that is behind, and a copy that is wrong").
// Pure: the facts one check gathered about one domain in, a judgement out. Lag is never
// wrong at any size; wrong is a fact about the rows that more applying will not fix.
import type { ApplierStatus } from "./applier.ts";

/** A stall: the position has not moved for a minute while records wait (the spec's bound). */
export const STALL_MS = 60_000;
/**
 * How long an undecodable record is held before the copy is declared wrong. Long enough
 * for a rolling upgrade to reach this node (its new build reads the record), short enough
 * that seats do not act for long on a copy that has stopped moving.
 */
export const UNDECODABLE_GRACE_MS = 30_000;

export interface CopyFacts {
  applier: ApplierStatus;
  applied_seq: number;
  /** The log's state, or null when the log did not answer this time. */
  log: { first_seq: number; last_seq: number } | null;
  /** Clock ms when the applied position last moved. */
  last_moved_ms: number;
  now_ms: number;
  stall_ms?: number;
  undecodable_grace_ms?: number;
}

export type Judgement =
  | { state: "level"; lag: number }
  | { state: "behind"; lag: number }
  | { state: "wrong"; lag: number | null; reason: string }
  /** The log did not answer and nothing local says wrong: keep what we last knew. */
  | { state: "unknown"; lag: null };

export function judgeCopy(f: CopyFacts): Judgement {
  const grace_ms = f.undecodable_grace_ms ?? UNDECODABLE_GRACE_MS;
  const stall_ms = f.stall_ms ?? STALL_MS;
  const lag = f.log === null ? null : Math.max(0, f.log.last_seq - f.applied_seq);
  const a = f.applier;
  if (a.kind === "foreign_checkpoint") return { state: "wrong", lag, reason: a.error };
  if (a.kind === "stopped") return { state: "wrong", lag, reason: `applier stopped at record ${a.seq}: ${a.error}` };
  if (a.kind === "held" && f.now_ms - a.since_ms >= grace_ms) {
    return { state: "wrong", lag, reason: `record ${a.seq} undecodable for ${Math.round((f.now_ms - a.since_ms) / 1000)} s: ${a.error}` };
  }
  if (f.log === null || lag === null) return { state: "unknown", lag: null };
  // Records this copy never applied are gone from the log: the hole will never fill.
  if (f.log.first_seq > f.applied_seq + 1 && f.log.last_seq > f.applied_seq) {
    return { state: "wrong", lag, reason: `log starts at ${f.log.first_seq}, copy applied only to ${f.applied_seq}` };
  }
  if (lag > 0 && f.now_ms - f.last_moved_ms >= stall_ms) {
    return { state: "wrong", lag, reason: `applied position stalled at ${f.applied_seq} for ${Math.round((f.now_ms - f.last_moved_ms) / 1000)} s with ${lag} records waiting` };
  }
  return lag > 0 ? { state: "behind", lag } : { state: "level", lag };
}
