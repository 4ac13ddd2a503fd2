// The duties a `workers` node runs, assembled: one runner over the duty lease bucket, with
// the scheduler (and, as they land, the maintenance sweep and the trim) as its duties.
import { randomBytes } from "node:crypto";
import type { Clock } from "../clock.ts";
import type { Company } from "../config/company.ts";
import type { CoordinationHandle } from "../coord/index.ts";
import { DUTY_CLAIM_BOUND_MS, DutyRunner } from "../duty/runner.ts";
import { Scheduler } from "../duty/scheduler.ts";
import type { Logger } from "../log.ts";
import type { Queue } from "../queue/contract.ts";
import type { Watchdog } from "../seat/watchdog.ts";

export interface NodeDutiesOptions {
  nodeId: string;
  coord: CoordinationHandle;
  queue: Queue;
  company: () => Company | null;
  clock: Clock;
  log: Logger;
  watchdog: Watchdog | null;
}

export interface NodeDuties {
  runner: DutyRunner;
  /** An applied revision: the scheduler re-reads its schedules at once. */
  companyChanged(): void;
  stop(): Promise<void>;
}

export function startDuties(o: NodeDutiesOptions): NodeDuties {
  const log = o.log.child({ component: "duty" });
  // One owner per incarnation, for the duty leases and every record a duty writes.
  const owner = `${o.nodeId}:${randomBytes(4).toString("hex")}`;
  const scheduler = new Scheduler({ owner, fires: o.coord.slot("fires"), queue: o.queue, company: o.company, clock: o.clock, log });
  const runner = new DutyRunner({
    node_id: o.nodeId,
    owner,
    store: o.coord.duties,
    clock: o.clock,
    log,
    // This incarnation holds the store-dir lock, which proves its predecessor dead.
    takeover: true,
    // A third of the watchdog's threshold (the seat lease TTL), like a seat heartbeat's
    // bound: a hung claim is answered unknown well before the loop would read as wedged.
    claim_bound_ms: () => Math.min(DUTY_CLAIM_BOUND_MS, Math.floor(o.coord.lease_ttl_ms / 3)),
    ...(o.watchdog ? { watchdog: o.watchdog } : {}),
    duties: [scheduler],
  });
  runner.start();
  return {
    runner,
    companyChanged: () => runner.poke(scheduler.name),
    stop: () => runner.stop(),
  };
}
