// A graceful stop as a list of named steps, each bounded, the drain within one total
// budget that fits under the supervisor's stop timeout (appliance/crewlet.service,
// TimeoutStopSec). A step that needs the broker can wait on it for minutes when the broker
// has no quorum — every member of a fleet stopped at once leaves the last one's writes with
// no one to replicate to (seen: the estate's chat applier re-creating its consumer, 30
// attempts × the 10 s API timeout, 306 s) — so no step is awaited past its bound: it is
// left to run, logged as node_stop_step_abandoned, and the stop goes on. What a step leaves
// undone is safe to leave: a lease it did not give back lapses at its TTL (unknown
// ownership is never ownership; a lapsed lease is claimable by peers, and this node's own
// restart takes it over at once), an unsettled delivery comes back to the seat's next
// holder (its inbox is reset to the ack floor on acquire), node.db keeps what did not reach
// the streams.
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import { STOP_GRACE_MS } from "../broker/sidecar.ts";
import { STREAM_HANDOFF_WITHIN_MS } from "../broker/handoff.ts";
import { PULL_LOST_AFTER_MS } from "../queue/jetstream.ts";
import { PULL_EXPIRES_MS } from "../queue/attachment.ts";
import { CANCEL_SETTLE_WAIT_MS, DRAIN_TURN_WAIT_MS } from "../seat/host.ts";

// ---- the drain's steps, in the order they run ---------------------------------------------

/** A step with no bound of its own (unsubscribes, timers, a handler's delivery in flight):
 * milliseconds; this only keeps a surprise from eating the budget. */
export const STOP_STEP_WITHIN_MS = 2_000;
/** The duty runner's stop: the tick under way ends at its stop signal, then each duty is
 * given back (one store call each). One not given back lapses at its TTL (≥ 30 s) and a
 * peer's next tick takes it: a tick late, nothing lost. */
export const DUTIES_STOP_WITHIN_MS = 3_000;
/**
 * The mailboxes' consumer leaderships handed to peers before the drain (so its NAKs land on
 * a leader that stays): a stepdown and its election take ~250 ms–1 s, 16 at once. A member
 * leading more than fit in this hands the rest over by election at its exit (a few seconds
 * of refused pulls on those mailboxes, nothing lost); without quorum no peer can be elected
 * at all, and the whole LEADER_HANDOFF_WITHIN_MS (10 s) would be waited for nothing.
 */
export const QUEUE_LEADERS_WITHIN_MS = 3_000;
/**
 * The seat drain (presence given up, every seat released voluntarily): a running turn's
 * bounded wait and its cancel's settle (DRAIN_TURN_WAIT_MS + CANCEL_SETTLE_WAIT_MS = 15 s,
 * so a turn in flight is handed back, NAK, whenever the broker can take it), then 3 s for
 * the releases' store calls (milliseconds with quorum). With quorum the steps before this
 * one take milliseconds, so the drain has all of it; without, the host gives up at this
 * bound and names each seat it could not give back (seat_release_abandoned).
 */
export const SEAT_DRAIN_WITHIN_MS = DRAIN_TURN_WAIT_MS + CANCEL_SETTLE_WAIT_MS + 3_000;
/** The seat host is told to end its drain this much before the step's bound, so its report
 * of what it leaves (seat_release_abandoned, seat_drain_finished) is written before the
 * node moves on. */
export const SEAT_DRAIN_REPORT_MS = 500;
/** The seat host's loops end after the tick under way: one store call (opTimeoutFor, at
 * most 5 s at the shipped TTL). */
export const SEAT_LOOPS_WITHIN_MS = 5_000;
/** The streams' leaderships handed to peers: the hand-off's own window for all of them
 * (STREAM_HANDOFF_WITHIN_MS), plus its listing call. */
export const STREAM_LEADERS_WITHIN_MS = STREAM_HANDOFF_WITHIN_MS + 1_000;
/** The engine's stop: the last memory flush of seats still held (none after a drain that
 * gave them back; a row that misses it stays in node.db), MCP children, node.db closed. */
export const ENGINE_STOP_WITHIN_MS = 3_000;
/** The estate's appliers and wake feeds end their pulls: milliseconds, unless one is
 * re-creating its consumer against a log without quorum (then minutes, see above). */
export const ESTATE_STOP_WITHIN_MS = 2_000;
/** The queue's last pulls end at their expiry, or are counted lost PULL_LOST_AFTER_MS after
 * it (src/queue/jetstream.ts): its own bound. */
export const QUEUE_CLOSE_WITHIN_MS = PULL_EXPIRES_MS + PULL_LOST_AFTER_MS;

/**
 * The drain's steps together (everything before the API, the connection and the sidecar
 * stop): 25 s. Fits a drain with quorum many times over (a few hundred ms of hand-offs and
 * releases, plus a running turn's SEAT_DRAIN_WITHIN_MS), and leaves the final steps their
 * STOP_FINAL_BUDGET_MS under the unit's stop timeout (see STOP_TOTAL_BUDGET_MS). Without
 * quorum the steps after the seat drain mostly go unrun (node_stop_step_skipped): what
 * they would have waited for cannot happen anyway.
 */
export const STOP_DRAIN_BUDGET_MS = 25_000;

// ---- the final steps, always run ----------------------------------------------------------

/** Bun's server.stop(true) closes its sockets at once: this only bounds a wedged one. */
export const API_CLOSE_WITHIN_MS = 1_000;
/**
 * The connection's drain (pending publishes flushed, subscriptions ended) gets this long,
 * then it is closed outright: a drain is local work plus a flush round trip to the node's
 * own sidecar, milliseconds whatever the fleet's quorum.
 */
export const NATS_DRAIN_WITHIN_MS = 3_000;
/** The drain's bound and the close after it. */
export const NATS_CLOSE_WITHIN_MS = NATS_DRAIN_WITHIN_MS + 1_000;
/** The sidecar's own bounded stop (SIGTERM, STOP_GRACE_MS, then SIGKILL) and its reaping. */
export const SIDECAR_STOP_WITHIN_MS = STOP_GRACE_MS + 2_000;
/** The final steps (API, connection, sidecar), each within its own bound: 17 s. */
export const STOP_FINAL_BUDGET_MS = API_CLOSE_WITHIN_MS + NATS_CLOSE_WITHIN_MS + SIDECAR_STOP_WITHIN_MS;
/**
 * A graceful stop's whole bound: 25 + 17 = 42 s, under appliance/crewlet.service's
 * TimeoutStopSec=45 (systemd SIGKILLs the unit past it; test/node/shutdown.test.ts reads
 * the unit and holds this under it), and under systemd's 90 s default for a unit without one.
 */
export const STOP_TOTAL_BUDGET_MS = STOP_DRAIN_BUDGET_MS + STOP_FINAL_BUDGET_MS;

// ---- running them ---------------------------------------------------------------------------

export interface StopStep {
  name: string;
  /** Told how long it will be awaited, so a step that can report what it leaves undone
   * (the seat drain) does so before it is abandoned. */
  run: (within_ms: number) => Promise<unknown> | unknown;
  /** This step's own bound (cut to what is left of the budget); none: STOP_STEP_WITHIN_MS. */
  within_ms?: number;
}

/** How long a step may be awaited: its own bound, cut to what is left of the budget. */
export function stepBound(now_ms: number, deadline_ms: number, within_ms: number | undefined): number {
  const left = Math.max(0, deadline_ms - now_ms);
  return Math.min(within_ms ?? STOP_STEP_WITHIN_MS, left);
}

export type StepOutcome = "done" | "failed" | "abandoned" | "skipped";

export interface StepReport {
  name: string;
  outcome: StepOutcome;
  took_ms: number;
}

/**
 * Runs `steps` in order, each awaited at most stepBound(...) ms: a step past its bound is
 * abandoned (logged, left running) and the next one starts; once the budget is spent the
 * rest are skipped (logged each). Never throws. Returns each step's outcome, in order.
 */
export async function runStopSteps(steps: readonly StopStep[], o: { budget_ms: number; clock: Clock; log: Logger; phase: string }): Promise<StepReport[]> {
  const deadline = o.clock.now() + o.budget_ms;
  const out: StepReport[] = [];
  for (const s of steps) {
    const at = o.clock.now();
    const bound = stepBound(at, deadline, s.within_ms);
    if (bound <= 0) {
      o.log.warn("node_stop_step_skipped", { phase: o.phase, step: s.name, budget_ms: o.budget_ms });
      out.push({ name: s.name, outcome: "skipped", took_ms: 0 });
      continue;
    }
    const timeUp = new AbortController();
    // A step that fails after it was abandoned is still logged (and never an unhandled rejection).
    const work = Promise.resolve()
      .then(() => s.run(bound))
      .then(
        () => "done" as const,
        (err: unknown) => {
          o.log.warn("node_stop_step_failed", { phase: o.phase, step: s.name, error: err as Error });
          return "failed" as const;
        },
      );
    const late = o.clock.sleep(bound, timeUp.signal).then(
      () => "abandoned" as const,
      () => "done" as const, // cancelled: the work won the race
    );
    const outcome: StepOutcome = await Promise.race([work, late]);
    timeUp.abort();
    const took_ms = o.clock.now() - at;
    if (outcome === "abandoned") o.log.warn("node_stop_step_abandoned", { phase: o.phase, step: s.name, within_ms: bound, budget_left_ms: Math.max(0, deadline - o.clock.now()) });
    else o.log.debug("node_stop_step", { phase: o.phase, step: s.name, outcome, took_ms });
    out.push({ name: s.name, outcome, took_ms });
  }
  return out;
}
