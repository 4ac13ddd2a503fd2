// What a turn's end means for its delivery (spec: Seat Ownership § "A turn that broke
// halfway", § "Fencing"). A PURE function of what the turn's own record proves, table-
// tested in test/agent/classify.test.ts; the turn engine is a thin caller.

export type TurnEndKind =
  /** The model gave its final answer. */
  | "completed"
  /** The model was still calling tools when the round cap was reached. */
  | "round_limit"
  /** The seat fence failed (the seat moved): the turn stopped at a round or tool boundary. */
  | "fenced"
  /** An expected failure: a provider that never answered, the estate unreachable for context. */
  | "broken"
  /** An unexpected exception: a defect in the engine. */
  | "panicked";

export type Settle = "ack" | "nak" | "defer";

export interface Disposition {
  settle: Settle;
  /** Write the constituents to the completion ledger (after the effects shipped). */
  record: boolean;
  /** What turn_completed says. */
  outcome: "completed" | "round_limit" | "failed" | "deferred" | "retry";
  /** Publish turn.guard_breach (kind unhandled_exception). */
  guard_breach: boolean;
  /** Publish turn_trigger_skipped beside a failed turn: its trigger will not come back. */
  gave_up: boolean;
}

export function dispose(end: TurnEndKind, reached_outside: boolean): Disposition {
  switch (end) {
    case "completed":
      return { settle: "ack", record: true, outcome: "completed", guard_breach: false, gave_up: false };
    case "round_limit":
      // Its effects shipped like a finished turn's; a re-run would repeat them and stop
      // at the same cap.
      return { settle: "ack", record: true, outcome: "round_limit", guard_breach: false, gave_up: false };
    case "panicked":
      // A defect runs again on a redelivery and repeats whatever came before it, and the
      // panicking round's own record is lost, so "nothing reached" cannot be established.
      return { settle: "ack", record: true, outcome: "failed", guard_breach: true, gave_up: true };
    case "fenced":
      // The seat's new owner is entitled to the delivery — unless this turn already wrote
      // outside, when a successor would repeat the write.
      return reached_outside
        ? { settle: "ack", record: true, outcome: "failed", guard_breach: false, gave_up: true }
        : { settle: "defer", record: false, outcome: "deferred", guard_breach: false, gave_up: false };
    case "broken":
      return reached_outside
        ? { settle: "ack", record: true, outcome: "failed", guard_breach: false, gave_up: true }
        : { settle: "nak", record: false, outcome: "retry", guard_breach: false, gave_up: false };
  }
}
