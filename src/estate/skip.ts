// The operator's way back for a log holding a record no copy can apply (`crewlet estate
// skip <domain> <position> --reason …`): append a skip marker naming the position, which
// every copy stuck there honours identically (see DomainApplier.skipIfMarked), and wait for
// this node's copy to pass it. Refused unless this node's copy is stuck at exactly that
// position: a marker for a record some copy has applied would make the copies differ.
import type { Clock } from "../clock.ts";
import type { EstateCopy } from "./copy.ts";
import { makeRecord, skipOpId } from "./records.ts";
import type { Domain } from "./schema.ts";
import type { StateLog } from "./statelog.ts";

/**
 * How long the answer waits for this node's copy to pass the skipped record. The copy's
 * own check (every 5 s) retries a held or stopped applier, which then finds the marker;
 * two checks and the apply fit in 15 s.
 */
export const SKIP_APPLY_WAIT_MS = 15_000;

export type SkipResult =
  | { kind: "skipped"; domain: Domain; position: number; marker_position: number; applied: number }
  /** Appended; this copy had not passed the position within the wait. */
  | { kind: "pending"; domain: Domain; position: number; marker_position: number; applied: number }
  | { kind: "not_data" }
  | { kind: "not_stuck"; message: string }
  | { kind: "invalid"; message: string; field?: string }
  | { kind: "unknown"; error: string };

export async function skipRecord(
  o: { copy: EstateCopy | null; stateLog: StateLog; clock: Clock; nodeId: string },
  domain: Domain,
  position: number,
  reason: string,
  actor: string,
): Promise<SkipResult> {
  const copy = o.copy;
  if (!copy) return { kind: "not_data" };
  const applier = copy.appliers[domain];
  const status = applier.status;
  const stuckAt = status.kind === "held" || status.kind === "stopped" ? status.seq : null;
  if (stuckAt !== position) {
    const where = stuckAt === null ? `${status.kind}, applied to ${applier.applied}` : `stuck at ${stuckAt}`;
    return { kind: "not_stuck", message: `this node's ${domain} copy is not stuck at ${position} (it is ${where}); skip only the record a copy is stuck on` };
  }
  const record = makeRecord(domain, { op: "log.skip", position, reason, actor } as never, o.clock.now(), o.nodeId, skipOpId(domain, position));
  const appended = await o.stateLog.append(record);
  if (!appended.ok) {
    if ("refused" in appended) return { kind: "invalid", message: appended.error, ...(appended.refused.field ? { field: appended.refused.field } : {}) };
    return { kind: "unknown", error: `the ${domain} log did not answer: ${appended.error}` };
  }
  // The repair attempt at once rather than at the next check.
  applier.retry();
  const passed = await applier.waitApplied(position, SKIP_APPLY_WAIT_MS);
  const out = { domain, position, marker_position: appended.seq, applied: applier.applied };
  return passed ? { kind: "skipped", ...out } : { kind: "pending", ...out };
}
