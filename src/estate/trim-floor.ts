// The state-log trim's rule (spec: Singleton duties, `retention`; Scaling Out — the trim
// reads the role off the presence lease). Pure: the facts one tick gathered about one
// domain in, a decision out — what may be purged, which term holds the log, or why the
// trim does nothing this tick. The duty (src/duty/trim.ts) gathers the facts and acts.
//
// The floor is the lowest of:
//   - every live data node's applied position (its presence row publishes it);
//   - every copy the fleet has heard from and no longer hears (its presence lapsed: stopped,
//     partitioned, restarting) at the last position it published, for UNHEARD_COPY_HOLD_MS —
//     it comes back replaying the tail rather than by snapshot; past that it is let go and
//     repairs from a snapshot when it returns;
//   - every operator hold (`crewlet estate hold`, for a backup);
//   - the domain's wake feed (a durable group on the log): records it has not settled wake
//     seats, and a purged one would wake nobody.
// Records at or below (floor − TRIM_MARGIN_RECORDS) may go. Unknown is never a floor: a
// fact that could not be read, or a live copy that does not say where it is, purges nothing.

const HOUR_MS = 60 * 60 * 1000;

/**
 * Records kept below the floor. Positions reach the duty from presence rows up to one
 * heartbeat old, which only errs low; the margin is for what the floor cannot see: a copy
 * restoring from a snapshot taken a moment ago just above the floor finds the records after
 * it even if a tick purges between its download and its replay, and an operator diagnosing
 * a copy finds the recent history still on the log. A thousand records of at most 1 MiB
 * (typically ~1 KiB) is noise against the logs' 8 GiB cap.
 */
export const TRIM_MARGIN_RECORDS = 1_000;

/**
 * How long a copy the fleet no longer hears from still holds the log at its last position.
 * A day covers a reboot, an upgrade window or a night's outage: the node returns by replaying
 * the tail, which costs nothing. Past that a dead or removed node would pin the log for ever,
 * so it is let go and repairs from a snapshot of a healthy copy when (if) it returns.
 */
export const UNHEARD_COPY_HOLD_MS = 24 * HOUR_MS;

export interface CopyFact {
  node: string;
  /** Its applied position for this domain; null when its row does not say (an older build). */
  applied: number | null;
  /** Live presence now (heard this tick) or only remembered from earlier ticks. */
  live: boolean;
  /** Store clock ms when its position was last heard. */
  heard_at: number;
}

export interface HoldFact {
  position: number;
  by: string;
  at: number;
  reason: string | null;
}

export interface TrimFacts {
  domain: string;
  now_ms: number;
  /** The log's state, or null when it did not answer. */
  log: { first_seq: number; last_seq: number } | null;
  /** Every copy known (live and remembered), or null when presence or the registry was unreadable. */
  copies: CopyFact[] | null;
  /** The operator's hold, null for none, "unknown" when the hold record was unreadable. */
  hold: HoldFact | null | "unknown";
  /** The wake feed's ack floor (last settled position), null when the feed has no consumer, "unknown" when unread. */
  wake_ack_floor: number | null | "unknown";
  margin?: number;
  unheard_hold_ms?: number;
  /** The term that held the log on the previous tick, and since when (for holding_since). */
  previous?: { holding: string | null; holding_since: number | null } | null;
}

export type TermKind = "copy" | "unheard_copy" | "hold" | "wake_feed";

export interface Term {
  kind: TermKind;
  /** A stable name for the term: `copy:b`, `hold`, `wake_feed`. */
  key: string;
  position: number;
  node?: string;
  /** For an unheard copy: when it was last heard; for a hold: when it was taken. */
  since?: number;
}

export interface TrimDecision {
  /** purge: records below `purge_below` go (it becomes the log's first position); nothing: the floor permits nothing more; skip: a fact was missing. */
  kind: "purge" | "nothing" | "skip";
  reason: string;
  floor: number | null;
  /** The new first position after a purge. */
  purge_below: number | null;
  terms: Term[];
  /** The lowest term (the one holding the log), with how long it has. */
  holding: string | null;
  holding_since: number | null;
  /** Copies no longer held for (unheard past the hold): they return by snapshot. */
  released: string[];
  margin: number;
}

export function decideTrim(f: TrimFacts): TrimDecision {
  const margin = f.margin ?? TRIM_MARGIN_RECORDS;
  const hold_ms = f.unheard_hold_ms ?? UNHEARD_COPY_HOLD_MS;
  const base = { floor: null, purge_below: null, terms: [] as Term[], holding: null, holding_since: null, released: [] as string[], margin };
  const skip = (reason: string, extra: Partial<TrimDecision> = {}): TrimDecision => ({ ...base, ...extra, kind: "skip", reason });

  if (f.log === null) return skip("the log did not answer");
  if (f.copies === null) return skip("presence or the copy registry could not be read: no copy's position is known");
  if (f.hold === "unknown") return skip("the hold record could not be read");
  if (f.wake_ack_floor === "unknown") return skip("the wake feed's position could not be read");

  const terms: Term[] = [];
  const released: string[] = [];
  for (const c of f.copies) {
    if (c.live) {
      if (c.applied === null) return skip(`data node ${c.node} does not publish its applied position (an older build?)`, { released });
      terms.push({ kind: "copy", key: `copy:${c.node}`, position: c.applied, node: c.node });
    } else if (f.now_ms - c.heard_at < hold_ms) {
      if (c.applied === null) return skip(`data node ${c.node} is unheard from and its last position is not known`, { released });
      terms.push({ kind: "unheard_copy", key: `copy:${c.node}`, position: c.applied, node: c.node, since: c.heard_at });
    } else {
      released.push(c.node);
    }
  }
  if (!terms.some((t) => t.kind === "copy")) return skip("no live data node publishes a copy: nobody vouches for the log's history", { terms, released });
  if (f.hold !== null) terms.push({ kind: "hold", key: "hold", position: f.hold.position, since: f.hold.at });
  if (f.wake_ack_floor !== null) terms.push({ kind: "wake_feed", key: "wake_feed", position: f.wake_ack_floor });
  terms.sort((a, b) => a.position - b.position || a.key.localeCompare(b.key));

  const lowest = terms[0]!;
  const floor = lowest.position;
  const holding = lowest.key;
  const holding_since = f.previous?.holding === holding && f.previous.holding_since !== null ? f.previous.holding_since : f.now_ms;
  const decided = { floor, terms, holding, holding_since, released, margin };

  // Everything at or below (floor − margin) may go: the first position kept is one past it.
  const purge_below = Math.min(floor - margin + 1, f.log.last_seq + 1);
  if (purge_below <= f.log.first_seq) {
    return { ...decided, kind: "nothing", purge_below: null, reason: `the log starts at ${f.log.first_seq}; floor ${floor} (${holding}) less the margin of ${margin} permits nothing more` };
  }
  return { ...decided, kind: "purge", purge_below, reason: `floor ${floor} (${holding}) less the margin of ${margin}: records ${f.log.first_seq}–${purge_below - 1} may go` };
}
