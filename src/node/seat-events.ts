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
