// The maintenance duty (spec: Singleton duties, `maintenance`): every tick, the removed-seat
// mailbox sweep and the purge of removal markers three hours old from the buckets with no
// age — the fleet's shared records, which one node sweeps for all. Node-local retention is
// not here: every node sweeps its own node.db on its own tick (retention.ts
// startNodeRetention), since this duty runs on one node.
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import { dutyTiming, MAINTENANCE_TICK_MS, MAINTENANCE_TTL_MS } from "./duties.ts";
import type { MailboxSweep } from "./retirement.ts";
import type { KvSlot, SlotName } from "../coord/contract.ts";
import { purgeOldMarkers } from "./markers.ts";
import { bounded } from "./bound.ts";

/** Default per-call bound: a leader election (~4 s) twice over. */
const DEFAULT_CALL_BOUND_MS = 10_000;
import type { DutyContext, DutyWork } from "./runner.ts";

export interface MaintenanceOptions {
  sweep: MailboxSweep;
  /** The shared-state slots, for the removal-marker purge. */
  slot: (name: SlotName) => KvSlot;
  clock: Clock;
  log: Logger;
  /** Bound on each store call (see bound.ts); defaults to 10 s. */
  call_bound_ms?: () => number;
  /** Test-only shortening (Tier A `testing`); the shipped tick otherwise. */
  tick_ms?: number;
}

export class Maintenance implements DutyWork {
  readonly name = "maintenance";
  readonly ttl_ms: number;
  private readonly tick_ms: number;

  constructor(private readonly o: MaintenanceOptions) {
    // Three ticks, as shipped (duties.ts MAINTENANCE_TTL_MS), however short the tick.
    ({ tick_ms: this.tick_ms, ttl_ms: this.ttl_ms } = dutyTiming({ tick_ms: MAINTENANCE_TICK_MS, ttl_ms: MAINTENANCE_TTL_MS }, o.tick_ms));
  }

  nextTickIn(): number {
    return this.tick_ms;
  }

  async tick(ctx: DutyContext): Promise<string> {
    const parts: string[] = [];
    ctx.beat();
    const s = await this.o.sweep.tick(() => ctx.beat());
    if (s.skipped) parts.push(`mailboxes: skipped (${s.skipped})`);
    else parts.push(`mailboxes: ${s.stamped} absent, ${s.returned} returned, ${s.retired} retired, ${s.held} held, ${s.discovered} discovered, ${s.registered} registered${s.failed ? `, ${s.failed} failed` : ""}`);
    ctx.beat();
    const call = <T>(what: string, fn: () => Promise<T>): Promise<T> => {
      ctx.beat();
      return bounded(fn(), this.o.call_bound_ms?.() ?? DEFAULT_CALL_BOUND_MS, this.o.clock, what);
    };
    parts.push(`markers: ${await purgeOldMarkers(this.o.slot, this.o.clock, this.o.log, call)} purged`);
    return parts.join("; ");
  }
}
