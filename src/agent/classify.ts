// What a turn's end means for its delivery (spec: Seat Ownership § "A turn that broke
// halfway", § "Fencing"; ARCHITECTURE.md § "failures that reach people"). A PURE function of
// what the turn's own record proves — how it ended, whether it reached outside, what kind
// of failure broke it, how often its message has been delivered — table-tested in
// test/agent/classify.test.ts; the turn engine is a thin caller.
import type { FailureClass } from "./providers/failure.ts";

export type TurnEndKind =
  /** The model gave its final answer. */
  | "completed"
  /** The model was still calling tools when the round cap was reached. */
  | "round_limit"
  /** The seat fence failed (the seat moved): the turn stopped at a round or tool boundary. */
  | "fenced"
  /** The seat host stopped waiting (a drain, a release): cancelled at its next await. */
  | "cancelled"
  /** An expected failure: a provider that never answered, the estate unreachable for context. */
  | "broken"
  /** An unexpected exception: a defect in the engine. */
  | "panicked"
  /** A model call would have started over a hard spend cap (src/spend): not made. */
  | "budget_exhausted"
  /** A person stopped the turn (POST /agents/{handle}/stop), seen at its next fence check. */
  | "stopped";

export type Settle = "ack" | "nak" | "defer" | "reject";

export interface Disposition {
  /** ack; nak (with `delayed`: backing off, else handed back at once); defer; reject (dead letter now). */
  settle: Settle;
  /** A NAK that waits (redeliveryDelayMs) rather than coming straight back. */
  delayed: boolean;
  /** Write the constituents to the completion ledger (after the effects shipped). */
  record: boolean;
  /** What turn_completed says. */
  outcome: "completed" | "round_limit" | "failed" | "deferred" | "retry" | "handed_back" | "budget_exhausted" | "stopped";
  /** Publish turn.guard_breach (kind unhandled_exception). */
  guard_breach: boolean;
  /** Publish turn_trigger_skipped beside a failed turn: its trigger will not come back. */
  gave_up: boolean;
  /** Tell the person in their thread: this message will get no answer (notice.ts). */
  tell: boolean;
}

/**
 * Deliveries a message may fail transiently before it is given up on. Each failed delivery
 * spent up to the provider's retry budget (2 min by default) inside its turn, and waited
 * out a growing NAK delay before the next (REDELIVERY_BASE_MS doubling): five deliveries
 * are ~10 min of trying over ~17 min. An endpoint down that long is an outage an operator
 * must hear about, and the person who asked must not wait the 25 deliveries (hours) the
 * queue's budget would allow — that budget is sized for handoffs.
 */
export const FAILED_DELIVERIES_MAX = 5;
/** The first failed delivery's NAK delay; doubled per delivery. Long enough that a retry
 * is not a hammering (the turn itself already retried inside its budget). */
export const REDELIVERY_BASE_MS = 30_000;
/** The NAK delay ceiling: a recovered endpoint is used within this long. */
export const REDELIVERY_MAX_MS = 10 * 60_000;

export interface RedeliveryPolicy {
  base_ms: number;
  max_ms: number;
  give_up_after: number;
}
export const DEFAULT_REDELIVERY: RedeliveryPolicy = { base_ms: REDELIVERY_BASE_MS, max_ms: REDELIVERY_MAX_MS, give_up_after: FAILED_DELIVERIES_MAX };

/** The delay before a failed delivery comes back: grows with the delivery count, never 0. */
export function redeliveryDelayMs(delivery_count: number, p: RedeliveryPolicy = DEFAULT_REDELIVERY): number {
  const n = Math.max(1, Math.floor(delivery_count));
  return Math.min(p.max_ms, p.base_ms * 2 ** (n - 1));
}

export interface TurnEndFacts {
  end: TurnEndKind;
  reached_outside: boolean;
  /** For a broken turn: what kind of failure (null: not a provider's — the estate, a missing provider). */
  failure?: FailureClass | null;
  /** The highest delivery count among the turn's deliveries (1 on first delivery). */
  delivery_count?: number;
  give_up_after?: number;
}

const D = (settle: Settle, outcome: Disposition["outcome"], o: Partial<Disposition> = {}): Disposition => ({
  settle,
  delayed: false,
  record: false,
  outcome,
  guard_breach: false,
  gave_up: false,
  tell: false,
  ...o,
});

export function dispose(f: TurnEndFacts): Disposition {
  const reached = f.reached_outside;
  switch (f.end) {
    case "completed":
      return D("ack", "completed", { record: true });
    case "round_limit":
      // Its effects shipped like a finished turn's; a re-run would repeat them and stop
      // at the same cap.
      return D("ack", "round_limit", { record: true });
    case "panicked":
      // A defect runs again on a redelivery and repeats whatever came before it, and the
      // panicking round's own record is lost, so "nothing reached" cannot be established.
      return D("ack", "failed", { record: true, guard_breach: true, gave_up: true, tell: true });
    case "fenced":
      // The seat's new owner is entitled to the delivery — unless this turn already wrote
      // outside, when a successor would repeat the write.
      return reached ? D("ack", "failed", { record: true, gave_up: true, tell: true }) : D("defer", "deferred");
    case "cancelled":
      // A drain: nothing written → the successor runs it at once; written → it would
      // repeat the writes, so the person hears what was done and that it stopped.
      return reached ? D("ack", "failed", { record: true, gave_up: true, tell: true }) : D("nak", "handed_back");
    case "budget_exhausted":
      // Asking again in this window is refused again: settled now, and the person told
      // which cap and when it resets. Nothing written: a dead letter an operator replays
      // once the window reset or the cap was raised. Written: it would repeat the writes.
      return reached
        ? D("ack", "budget_exhausted", { record: true, gave_up: true, tell: true })
        : D("reject", "budget_exhausted", { gave_up: true, tell: true });
    case "stopped":
      // A person's word: recorded (a redelivery must not run it again) and acked, no retry.
      return D("ack", "stopped", { record: true, gave_up: true, tell: true });
    case "broken": {
      if (reached) return D("ack", "failed", { record: true, gave_up: true, tell: true });
      // Not recorded as done: a dead letter replayed after the operator's fix must run.
      if (f.failure === "permanent" || f.failure === "context_too_long") return D("reject", "failed", { gave_up: true, tell: true });
      if ((f.delivery_count ?? 1) >= (f.give_up_after ?? FAILED_DELIVERIES_MAX)) return D("reject", "failed", { gave_up: true, tell: true });
      return D("nak", "retry", { delayed: true });
    }
  }
}
