// The `approvals` singleton duty: once a minute, a request nobody decided in time is
// rejected as expired (the person told in the thread, the seat by its trigger), a decision
// written but never told to its seat is told, one whose turn ended without settling it is
// closed (the person told), and settled requests a week old are deleted.
// One node does it: two would race to expire one request (the first decision wins, so it
// would be safe, but each loser would re-read for nothing).
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import type { ApprovalDesk } from "../approvals/desk.ts";
import { bounded } from "./bound.ts";
import { DUTY_CLAIM_BOUND_MS, type DutyContext, type DutyWork } from "./runner.ts";

/** A request expires within a minute of its time: expiries are hours long, a minute is noise. */
export const APPROVALS_TICK_MS = 60_000;
/** The lease is three ticks: one slow claim never moves the duty. */
const TTL_TICKS = 3;

export class ApprovalsDuty implements DutyWork {
  readonly name = "approvals";
  readonly ttl_ms: number;

  constructor(private readonly o: { desk: Pick<ApprovalDesk, "sweep">; clock: Clock; log: Logger; call_bound_ms?: () => number; tick_ms?: number }) {
    // A shortened tick (tests) keeps the maintenance duty's 30 s floor: the lease outlasts
    // a claim's own bound.
    this.ttl_ms = o.tick_ms === undefined ? TTL_TICKS * APPROVALS_TICK_MS : Math.max(30_000, TTL_TICKS * o.tick_ms);
  }

  nextTickIn(): number {
    return this.o.tick_ms ?? APPROVALS_TICK_MS;
  }

  async tick(ctx: DutyContext): Promise<string> {
    // The sweep is a listing and a few writes per request it acts on. Each unit stamps the
    // watchdog and is bounded by the duty's call bound (under the watchdog's threshold), so a
    // hung broker is a failed tick rather than a wedged loop, however many requests wait.
    const done = await this.o.desk.sweep((what, unit) => {
      ctx.beat();
      return bounded(unit(), this.o.call_bound_ms?.() ?? DUTY_CLAIM_BOUND_MS, this.o.clock, what);
    });
    if (done.expired > 0) this.o.log.info("approvals_expired", { count: done.expired });
    return `approvals: ${done.expired} expired, ${done.retold} retold, ${done.closed} closed, ${done.forgotten} forgotten`;
  }
}
