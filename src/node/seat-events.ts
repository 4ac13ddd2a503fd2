// The seat host's lifecycle, told on CREWLET_EVENTS as well as in the log: a claim, a
// release (with its reason and mode), an orphan's release, and a person's stop reaching a
// running turn (logged once, by the node running it; pauses are mirrored by every node,
// so they stay in the log and the audit log). The seat host knows nothing
// of the event stream (it only logs); the node republishes these lines, named as logged,
// with its id, so the dashboard's Events can say "seat cto moved from node-a to node-b".
import type { NatsConnection } from "nats";
import type { EventSink } from "../agent/events.ts";
import type { Clock } from "../clock.ts";
import type { Fields, Logger } from "../log.ts";
import { eventSubject } from "../queue/topics.ts";

/** Log lines that are also events; everything else the seat host logs stays in the log. */
export const SEAT_EVENTS: ReadonlySet<string> = new Set(["seat_claimed", "seat_detached", "seat_orphan_released", "seat_failover", "turn_stop_requested"]);

/** An observer of log lines (src/metrics/observed-logger.ts) that republishes SEAT_EVENTS. */
export function seatEventTap(events: EventSink, node: string): (event: string, fields: Fields) => void {
  return (event, fields) => {
    if (!SEAT_EVENTS.has(event)) return;
    // Published only: the line is already in the log.
    const extra: Record<string, unknown> = {};
    for (const k of ["epoch", "from", "reason", "mode", "by", "turns"]) if (fields[k] !== undefined) extra[k] = fields[k];
    events.emit(event, { seat: fields.seat, node, ...extra }, { log: false });
  };
}

/** Seats whose last claim a node remembers; past it the oldest is forgotten (an org has
 *  at most a few thousand seats, bench/scale.ts sizes for 2,000). */
export const FAILOVER_SEATS_MAX = 10_000;

/**
 * How long a claim that replaced an unreleased tenure waits for that tenure's release to be
 * heard before it is judged a failover. The holder's release event and the claimant's claim
 * event reach a node through different servers (the holder's sidecar's route, the lease
 * store's leader), so the claim can arrive first — by a route's flush, milliseconds; CI saw
 * it on a drain. Five seconds is far beyond any route's delay short of a partition, and far
 * below how often a real failover happens (a TTL at least); the count is only that late.
 */
export const FAILOVER_GRACE_MS = 5_000;

/** How often a node asks the watch for judged failovers: a count a second late is on time. */
export const FAILOVER_JUDGE_INTERVAL_MS = 1_000;

export interface Failover {
  seat: string;
  /** The claimant. */
  node: string;
  /** The holder that never let the seat go. */
  from: string;
  /** The claimant's epoch. */
  epoch: unknown;
}

interface Tenure {
  node: string;
  epoch: unknown;
  released: boolean;
}

/**
 * Which seat claims were failovers — the seat claimed while its previous holder had not let
 * it go (no voluntary seat_detached or seat_orphan_released for that tenure). A fenced
 * detach (the holder found its lease lost) is no letting go. Pure: fed the fleet's seat
 * events as they arrive (node.ts subscribes to them) with the time, it answers from due()
 * the claims whose predecessor's release did not arrive within FAILOVER_GRACE_MS. What a
 * node did not see (claims made before it started) it does not judge: a claim with no known
 * previous holder is no failover, so the count is a floor, never a guess.
 */
export class FailoverWatch {
  private readonly last = new Map<string, Tenure>();
  /** Claims awaiting their predecessor's release, by seat and predecessor. */
  private readonly pending = new Map<string, Failover & { from_epoch: unknown; due_ms: number }>();

  see(event: string, fields: Record<string, unknown>, now_ms: number): void {
    const seat = fields.seat;
    const node = fields.node;
    if (typeof seat !== "string" || typeof node !== "string") return;
    if (event === "seat_detached" || event === "seat_orphan_released") {
      // A fenced detach is a lease lost, not given: the next claim is still a failover.
      if (fields.mode === "fenced") return;
      const l = this.last.get(seat);
      if (l && l.node === node && sameTenure(l.epoch, fields.epoch)) l.released = true;
      // Heard after the claim that replaced it: that claim was a handover after all.
      const p = this.pending.get(pendingKey(seat, node));
      if (p && sameTenure(p.from_epoch, fields.epoch)) this.pending.delete(pendingKey(seat, node));
      return;
    }
    if (event !== "seat_claimed") return;
    const before = this.last.get(seat);
    this.last.delete(seat);
    this.last.set(seat, { node, epoch: fields.epoch, released: false });
    if (this.last.size > FAILOVER_SEATS_MAX) this.last.delete(this.last.keys().next().value!);
    if (!before || before.node === node || before.released) return;
    this.pending.set(pendingKey(seat, before.node), { seat, node, from: before.node, epoch: fields.epoch, from_epoch: before.epoch, due_ms: now_ms + FAILOVER_GRACE_MS });
    if (this.pending.size > FAILOVER_SEATS_MAX) this.pending.delete(this.pending.keys().next().value!);
  }

  /** The claims whose grace has passed with no release heard: failovers, each told once. */
  due(now_ms: number): Failover[] {
    const out: Failover[] = [];
    for (const [k, p] of this.pending) {
      if (p.due_ms > now_ms) continue;
      this.pending.delete(k);
      out.push({ seat: p.seat, node: p.node, from: p.from, epoch: p.epoch });
    }
    return out;
  }
}

function pendingKey(seat: string, from: string): string {
  return `${seat}\u0000${from}`;
}

/** A release names the tenure it ends; one without an epoch (an older build) ends whichever. */
function sameTenure(claimed: unknown, released: unknown): boolean {
  return typeof claimed !== "number" || typeof released !== "number" || claimed === released;
}

/**
 * Failovers (crewlet_seat_failovers_total): the fleet's seat events, heard from now on; a
 * claim of this node's whose previous holder never let the seat go is logged as
 * seat_failover once the grace for a late release has passed. Returns the stop.
 */
export function listenForFailovers(o: { nc: NatsConnection; node: string; clock: Clock; log: Logger }): () => void {
  const failovers = new FailoverWatch();
  const seatLines = ["seat_claimed", "seat_detached", "seat_orphan_released"].map((name) =>
    o.nc.subscribe(eventSubject(name), {
      callback: (_err, m) => {
        try {
          failovers.see(name, JSON.parse(new TextDecoder().decode(m.data)) as Record<string, unknown>, o.clock.now());
        } catch {
          // an unreadable event is the events view's to show; nothing is counted
        }
      },
    }),
  );
  // Judged once the grace for a late release has passed (FAILOVER_GRACE_MS).
  const judging = o.clock.setInterval(() => {
    for (const f of failovers.due(o.clock.now())) if (f.node === o.node) o.log.info("seat_failover", { seat: f.seat, from: f.from, epoch: f.epoch });
  }, FAILOVER_JUDGE_INTERVAL_MS);
  return () => {
    judging.cancel();
    for (const s of seatLines) {
      try {
        s.unsubscribe();
      } catch {
        // the connection closed first: nothing left to end
      }
    }
  };
}
