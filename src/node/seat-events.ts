// The seat host's lifecycle, told on CREWLET_EVENTS as well as in the log: a claim, a
// release (with its reason and mode), an orphan's release, and a person's stop reaching a
// running turn (logged once, by the node running it; pauses are mirrored by every node,
// so they stay in the log and the audit log). The seat host knows nothing
// of the event stream (it only logs); the node republishes these lines, named as logged,
// with its id, so the dashboard's Events can say "seat cto moved from node-a to node-b".
import type { EventSink } from "../agent/events.ts";
import type { Fields } from "../log.ts";

/** Log lines that are also events; everything else the seat host logs stays in the log. */
export const SEAT_EVENTS: ReadonlySet<string> = new Set(["seat_claimed", "seat_detached", "seat_orphan_released", "turn_stop_requested"]);

/** An observer of log lines (src/metrics/observed-logger.ts) that republishes SEAT_EVENTS. */
export function seatEventTap(events: EventSink, node: string): (event: string, fields: Fields) => void {
  return (event, fields) => {
    if (!SEAT_EVENTS.has(event)) return;
    // Published only: the line is already in the log.
    const extra: Record<string, unknown> = {};
    for (const k of ["epoch", "reason", "mode", "by", "turns"]) if (fields[k] !== undefined) extra[k] = fields[k];
    events.emit(event, { seat: fields.seat, node, ...extra }, { log: false });
  };
}

/** Seats whose last claim a node remembers; past it the oldest is forgotten (an org has
 *  at most a few thousand seats, bench/scale.ts sizes for 2,000). */
export const FAILOVER_SEATS_MAX = 10_000;

/**
 * Which seat claims were failovers — the seat claimed while its previous holder had not let
 * it go (no voluntary seat_detached or seat_orphan_released from that node after its
 * claim) — the dashboard's Events rule (event-sentences.js), except that a fenced detach
 * (the holder found its lease lost) is no letting go. Pure: fed the fleet's
 * seat events in stream order by the node (node.ts subscribes to them), it answers, for a
 * claim, the node the seat failed over from, or null. What a node did not see (claims made
 * before it started) it does not judge: a claim with no known previous holder is no
 * failover, so the count is a floor, never a guess.
 */
export class FailoverWatch {
  private readonly last = new Map<string, { node: string; released: boolean }>();

  see(event: string, fields: Record<string, unknown>): { seat: string; node: string; from: string } | null {
    const seat = fields.seat;
    const node = fields.node;
    if (typeof seat !== "string" || typeof node !== "string") return null;
    if (event === "seat_detached" || event === "seat_orphan_released") {
      // A fenced detach is a lease lost, not given: the next claim is still a failover.
      if (fields.mode === "fenced") return null;
      const l = this.last.get(seat);
      if (l && l.node === node) l.released = true;
      return null;
    }
    if (event !== "seat_claimed") return null;
    const before = this.last.get(seat);
    this.last.delete(seat);
    this.last.set(seat, { node, released: false });
    if (this.last.size > FAILOVER_SEATS_MAX) this.last.delete(this.last.keys().next().value!);
    return before && before.node !== node && !before.released ? { seat, node, from: before.node } : null;
  }
}
