// A graceful stop as a list of named steps, each bounded, the drain within one total
// budget that fits under the supervisor's stop timeout (appliance/crewlet.service,
// TimeoutStopSec). A step that needs the broker can wait on it for ever when the broker has
// no quorum (every member of a fleet stopped at once: the last one's writes have no one to
// replicate to), so no step is awaited past its bound: it is left to run, logged as
// node_stop_step_abandoned with what it was doing, and the stop goes on. What a step leaves
// undone is safe to leave: a lease it did not give back lapses at its TTL (unknown
// ownership is never ownership; a lapsed lease is claimable by peers), an unsettled
// delivery comes back after its ack wait, node.db keeps what did not reach the streams.
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import { STOP_GRACE_MS } from "../broker/sidecar.ts";

/**
 * The drain's steps together (everything before the API, the connection and the sidecar
 * stop): 25 s. Fits a drain with quorum many times over (a few hundred ms of hand-offs and
 * releases, plus a running turn's bounded wait, DRAIN_TURN_WAIT_MS + CANCEL_SETTLE_WAIT_MS
 * = 15 s, so a turn in flight is handed back whenever the broker can take it), and leaves
 * the final steps their STOP_FINAL_BUDGET_MS under the unit's stop timeout (see
 * STOP_TOTAL_BUDGET_MS).
 */
export const STOP_DRAIN_BUDGET_MS = 25_000;
/** Bun's server.stop(true) closes its sockets at once: this only bounds a wedged one. */
export const API_CLOSE_WITHIN_MS = 1_000;
/**
 * The connection's drain (pending publishes flushed, subscriptions ended) gets this long,
 * then it is closed outright: a drain is local work plus a flush round trip to the node's
 * own sidecar, milliseconds whatever the fleet's quorum.
 */
export const NATS_CLOSE_WITHIN_MS = 3_000;
/** The sidecar's own bounded stop (SIGTERM, STOP_GRACE_MS, then SIGKILL) and its reaping. */
export const SIDECAR_STOP_WITHIN_MS = STOP_GRACE_MS + 2_000;
/** The final steps (API, connection, sidecar), each within its own bound. */
export const STOP_FINAL_BUDGET_MS = API_CLOSE_WITHIN_MS + (NATS_CLOSE_WITHIN_MS + API_CLOSE_WITHIN_MS) + SIDECAR_STOP_WITHIN_MS;
/**
 * A graceful stop's whole bound: 25 + 17 = 42 s, under appliance/crewlet.service's
 * TimeoutStopSec=45 (systemd SIGKILLs the unit past it; test/node/shutdown.test.ts reads
 * the unit and holds this under it), and under systemd's 90 s default for a unit without one.
 */
export const STOP_TOTAL_BUDGET_MS = STOP_DRAIN_BUDGET_MS + STOP_FINAL_BUDGET_MS;

export interface StopStep {
  name: string;
  run: () => Promise<unknown> | unknown;
  /** This step's own bound (within what is left of the budget); none: the budget's rest. */
  within_ms?: number;
}

/** How long a step may be awaited: its own bound, cut to what is left of the budget. */
export function stepBound(now_ms: number, deadline_ms: number, within_ms: number | undefined): number {
  const left = Math.max(0, deadline_ms - now_ms);
  return within_ms === undefined ? left : Math.min(within_ms, left);
}

export type StepOutcome = "done" | "failed" | "abandoned" | "skipped";

/**
 * Runs `steps` in order, each awaited at most stepBound(...) ms: a step past its bound is
 * abandoned (logged, left running) and the next one starts; once the budget is spent the
 * rest are skipped (logged each). Never throws. Returns each step's outcome, in order.
 */
export async function runStopSteps(
  steps: readonly StopStep[],
  o: { budget_ms: number; clock: Clock; log: Logger; phase: string },
): Promise<{ name: string; outcome: StepOutcome; took_ms: number }[]> {
  const started = o.clock.now();
  const deadline = started + o.budget_ms;
  const out: { name: string; outcome: StepOutcome; took_ms: number }[] = [];
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
      .then(s.run)
      .then(
        () => "done" as const,
        (err: unknown) => {
          o.log.warn("node_stop_step_failed", { phase: o.phase, step: s.name, error: err as Error });
          return "failed" as const;
        },
      );
    const late = o.clock.sleep(bound, timeUp.signal).then(
      () => "abandoned" as const,
      () => "done" as const, // cancelled: the work won
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
