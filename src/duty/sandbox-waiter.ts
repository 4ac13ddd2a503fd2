// The `sandbox-waiter` singleton duty (spec: Singleton duties): asks each live run's
// supervisor whether it is there, ends a run silent for SILENT_MAX_MS by publishing its failed
// result to the seat's control subject (the holder collects it under its own epoch), and
// forgets runs told long ago. One node does it, or N waiters would each end the same run.
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import type { Queue } from "../queue/contract.ts";
import { mailbox } from "../queue/topics.ts";
import { controlMsgId, encodeControl } from "../sandbox/control.ts";
import type { RunRecord, RunStore } from "../sandbox/runs.ts";
import { bounded } from "./bound.ts";
import type { DutyContext, DutyWork } from "./runner.ts";

const MINUTE_MS = 60_000;
/** The waiter's tick: a run's supervisor is asked once a minute, a few messages a tick. */
export const SANDBOX_WAITER_TICK_MS = MINUTE_MS;
/** Three ticks: one slow claim never moves the duty. */
export const SANDBOX_WAITER_TTL_MS = 3 * SANDBOX_WAITER_TICK_MS;
/**
 * A supervisor silent this long is gone. Long enough for its node's restart or binary swap
 * (its broker is back in seconds) and a member's election many times over; past it a seat
 * would wait for ever on a box that no longer exists.
 */
export const SILENT_MAX_MS = 10 * MINUTE_MS;
/** A run told this long ago is only history: its record goes (the completion ledger's 7 days). */
export const RUN_KEEP_MS = 7 * 24 * 60 * MINUTE_MS;
/** One ask's wait: a supervisor answers from its own loop at once. */
export const SUPERVISOR_PING_TIMEOUT_MS = 2_000;
/** Runs asked per tick: the oldest first, the rest next minute. */
const PINGS_PER_TICK_MAX = 200;

export type WaiterAction = { kind: "none" } | { kind: "ask" } | { kind: "end"; silent_ms: number } | { kind: "forget" };

/** One run's action this tick. `silent_since` is when its supervisor first did not answer
 *  (null: it answered last time, or was never asked). Pure. */
export function judgeRun(r: Pick<RunRecord, "state" | "reported" | "updated_at" | "pid">, silent_since: number | null, now_ms: number): WaiterAction {
  if (r.state === "done") return r.reported && now_ms - r.updated_at >= RUN_KEEP_MS ? { kind: "forget" } : { kind: "none" };
  // A run not yet launched has no supervisor to ask; the seat's recovery ends it.
  if (r.state === "starting" || r.pid === null) return { kind: "none" };
  if (silent_since !== null && now_ms - silent_since >= SILENT_MAX_MS) return { kind: "end", silent_ms: now_ms - silent_since };
  return { kind: "ask" };
}

export interface SandboxWaiterOptions {
  store: Pick<RunStore, "list" | "forget">;
  queue: Pick<Queue, "publish">;
  /** Whether the run's supervisor answers (core request on crewlet.sandbox.ping.{run}). */
  ping: (run_id: string) => Promise<boolean>;
  clock: Clock;
  log: Logger;
  call_bound_ms?: () => number;
}

export const PING_SUBJECT_PREFIX = "crewlet.sandbox.ping.";

export class SandboxWaiter implements DutyWork {
  readonly name = "sandbox-waiter";
  readonly ttl_ms = SANDBOX_WAITER_TTL_MS;
  /** When each run's supervisor first went silent, as this holder saw it. A new holder
   *  starts counting afresh: a run is ended late, never early. */
  private readonly silentSince = new Map<string, number>();

  constructor(private readonly o: SandboxWaiterOptions) {}

  nextTickIn(): number {
    return SANDBOX_WAITER_TICK_MS;
  }

  async tick(ctx: DutyContext): Promise<string> {
    const call = <T>(what: string, p: Promise<T>) => {
      ctx.beat();
      return bounded(p, this.o.call_bound_ms?.() ?? 10_000, this.o.clock, what);
    };
    const { runs } = await call("runs listing", this.o.store.list());
    const counts = { asked: 0, silent: 0, ended: 0, forgotten: 0 };
    const live = new Set(runs.map((r) => r.id));
    for (const id of this.silentSince.keys()) if (!live.has(id)) this.silentSince.delete(id);
    for (const r of runs) {
      if (ctx.signal.aborted) break;
      const action = judgeRun(r, this.silentSince.get(r.id) ?? null, this.o.clock.now());
      if (action.kind === "forget") {
        if (await call(`forget ${r.id}`, this.o.store.forget(r.seat, r.id))) counts.forgotten++;
      } else if (action.kind === "end") {
        await call(`end ${r.id}`, this.endSilent(r, action.silent_ms));
        this.silentSince.delete(r.id);
        counts.ended++;
      } else if (action.kind === "ask" && counts.asked < PINGS_PER_TICK_MAX) {
        counts.asked++;
        const here = await this.o.ping(r.id).catch(() => false);
        if (here) this.silentSince.delete(r.id);
        else {
          counts.silent++;
          if (!this.silentSince.has(r.id)) this.silentSince.set(r.id, this.o.clock.now());
        }
      }
    }
    return `runs: ${counts.asked} asked, ${counts.silent} silent, ${counts.ended} ended, ${counts.forgotten} forgotten`;
  }

  /** The result the supervisor would have sent, had it lived: the seat's holder collects it. */
  private async endSilent(r: RunRecord, silent_ms: number): Promise<void> {
    const reason = `its supervisor on ${r.node} stopped answering ${Math.round(silent_ms / MINUTE_MS)} min ago (the machine restarted, or the process was killed) — start the run again`;
    const e = { kind: "finished" as const, run_id: r.id, seat: r.seat, result: { outcome: "failed" as const, exit_code: null, reason, output_tail: "", output_bytes: 0, diff: "", commits: [], summary: "" } };
    await this.o.queue.publish(mailbox(r.seat, "control").subject, encodeControl(e), { msgId: controlMsgId(e) });
    this.o.log.warn("sandbox_run_lost", { seat: r.seat, run: r.id, node: r.node, silent_ms });
  }
}
