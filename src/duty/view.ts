// Who holds each duty and how its last tick went, read from the duty leases themselves
// (the holder stamps its last tick on the lease's meta), so any node answers for the fleet.
import type { LeaseStore } from "../coord/contract.ts";
import { ownerNodeId } from "../seat/placement.ts";
import { DUTY_PREFIX } from "./duties.ts";
import { lastTickSchema, type LastTick } from "./runner.ts";

export interface DutyHolding {
  duty: string;
  node: string;
  owner: string;
  epoch: number;
  /** Store clock, ms: when this tenure began. */
  since: number;
  expires_in_ms: number;
  last_tick: LastTick | null;
}

/** Live duty leases, by duty name. A peer's meta is input from outside: parsed, never trusted. */
export async function dutyHoldings(store: LeaseStore): Promise<DutyHolding[]> {
  const [views, now] = await Promise.all([store.list(DUTY_PREFIX), store.now()]);
  return views
    .filter((v) => v.live && v.epoch > 0)
    .map((v) => {
      const tick = lastTickSchema.safeParse((v.meta as { last_tick?: unknown } | undefined)?.last_tick);
      return {
        duty: v.key.slice(DUTY_PREFIX.length),
        node: ownerNodeId(v.owner),
        owner: v.owner,
        epoch: v.epoch,
        since: v.acquired_at,
        expires_in_ms: Math.max(0, v.expires_at - now),
        last_tick: tick.success ? tick.data : null,
      };
    })
    .sort((a, b) => a.duty.localeCompare(b.duty));
}
