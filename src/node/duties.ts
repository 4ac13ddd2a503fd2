// The duties a `workers` node runs, assembled: one runner over the duty lease bucket, with
// the scheduler, the maintenance sweep (removed-seat mailbox retirement, removal markers),
// the learning passes and the state-log trim (`retention`, on a node holding a copy) as its duties.
import { randomBytes } from "node:crypto";
import type { Clock } from "../clock.ts";
import type { Company } from "../config/company.ts";
import type { CoordinationHandle } from "../coord/index.ts";
import { DUTY_CLAIM_BOUND_MS, DutyRunner } from "../duty/runner.ts";
import { Scheduler, type CurrentRevision } from "../duty/scheduler.ts";
import type { Logger } from "../log.ts";
import type { Queue } from "../queue/contract.ts";
import type { Watchdog } from "../seat/watchdog.ts";
import type { TierA } from "../config/tier-a.ts";
import { Maintenance } from "../duty/maintenance.ts";
import { MailboxSweep, type Roster } from "../duty/retirement.ts";
import { TrimDuty } from "../duty/trim.ts";
import type { Estate } from "../estate/estate.ts";
import { publishEventSink } from "../agent/events.ts";
import { RunStore } from "../sandbox/runs.ts";
import { SandboxWaiter } from "../duty/sandbox-waiter.ts";
import { ApprovalsDuty } from "../duty/approvals.ts";
import type { ApprovalDesk } from "../approvals/desk.ts";
import { LearningDuty } from "../duty/learning.ts";
import type { Changelog } from "../memory/changelog.ts";
import { buildOrg } from "../org/org.ts";
import { ObjectCollector } from "../duty/object-collector.ts";
import { copyState } from "../objects/collect.ts";
import type { FileStore } from "../objects/store.ts";
import { namedFileIds } from "../estate/attachments.ts";

export interface NodeDutiesOptions {
  nodeId: string;
  /** This incarnation's owner (seat/incarnation.ts mintOwner) and its takeover rule. */
  owner: string;
  takeover: (owner: string) => boolean;
  coord: CoordinationHandle;
  queue: Queue;
  /** Where requests for approval expire and untold decisions are told (the approvals duty). */
  approvals: ApprovalDesk;
  /** Whether a coding run's supervisor answers (the sandbox-waiter's ask). */
  pingSupervisor: (run_id: string) => Promise<boolean>;
  company: () => Company | null;
  /** The fleet's current revision (the scheduler judges each fire against it). */
  currentRevision: () => Promise<CurrentRevision | null>;
  roster: () => Promise<Roster>;
  /** The node's estate (a workers node holds data): the trim reads, snapshots and purges through it. */
  estate: Estate | null;
  /** The seats' memory changelog: the learning duty reads every seat's memory from it. */
  changelog: Changelog;
  /** The fleet's file store: the object collector deletes what no row names. */
  files: FileStore;
  /** Tier A `testing` (test-only shortenings; refused at load outside tests). */
  testing?: TierA["testing"];
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
  // The node's incarnation owns its duty leases and every record a duty writes.
  const owner = o.owner;
  const testing = o.testing ?? {};
  // A third of the watchdog's threshold (the seat lease TTL), like a seat heartbeat's
  // bound: one hung call is an error the tick handles, never a loop the watchdog ends the
  // process for.
  const callBound = () => Math.min(DUTY_CLAIM_BOUND_MS, Math.floor(o.coord.lease_ttl_ms / 3));
  const scheduler = new Scheduler({ owner, fires: o.coord.slot("fires"), cursors: o.coord.slot("schedules"), queue: o.queue, company: o.company, current: o.currentRevision, clock: o.clock, log, call_bound_ms: callBound });
  const sweep = new MailboxSweep({
    // The retirement's own owner: the seat lease it claims is never a seat host's, and its
    // lineage (`{node}:retire.`) is not this store's, so no seat host of this node — this
    // incarnation or the next — ever takes it over as a predecessor's.
    owner: `${o.nodeId}:retire.${randomBytes(4).toString("hex")}`,
    node_id: o.nodeId,
    registry: o.coord.slot("mailboxes"),
    leases: o.coord.leases,
    queue: o.queue,
    roster: o.roster,
    lease_ttl_ms: () => o.coord.lease_ttl_ms,
    call_bound_ms: callBound,
    runs: new RunStore(o.coord.slot("runs"), o.clock),
    events: publishEventSink(o.queue, log, () => o.clock.now()),
    ...(testing.mailbox_grace_seconds !== undefined ? { grace_ms: testing.mailbox_grace_seconds * 1000 } : {}),
    clock: o.clock,
    log,
  });
  const maintenance = new Maintenance({
    sweep,
    slot: (n) => o.coord.slot(n),
    call_bound_ms: callBound,
    clock: o.clock,
    log,
    ...(testing.maintenance_tick_seconds !== undefined ? { tick_ms: testing.maintenance_tick_seconds * 1000 } : {}),
  });
  const estate = o.estate;
  const trim =
    estate?.copy && estate.snapshots
      ? new TrimDuty({
          node_id: o.nodeId,
          slot: o.coord.slot("estate"),
          leases: o.coord.leases,
          stateLog: estate.stateLog,
          snapshots: estate.snapshots,
          copy: () => estate.copy,
          call_bound_ms: callBound,
          lease_ttl_ms: () => o.coord.lease_ttl_ms,
          clock: o.clock,
          log,
          ...(testing.retention_tick_seconds !== undefined ? { tick_ms: testing.retention_tick_seconds * 1000 } : {}),
          ...(testing.retention_margin_records !== undefined ? { margin: testing.retention_margin_records } : {}),
          ...(testing.retention_unheard_hold_seconds !== undefined ? { unheard_hold_ms: testing.retention_unheard_hold_seconds * 1000 } : {}),
          ...(testing.retention_snapshot_max_age_seconds !== undefined ? { snapshot_max_age_ms: testing.retention_snapshot_max_age_seconds * 1000 } : {}),
        })
      : null;
  const runs = new RunStore(o.coord.slot("runs"), o.clock);
  const waiter = new SandboxWaiter({ store: runs, queue: o.queue, ping: o.pingSupervisor, clock: o.clock, log, call_bound_ms: callBound });
  const approvals = new ApprovalsDuty({ desk: o.approvals, clock: o.clock, log, call_bound_ms: callBound, ...(testing.approvals_tick_seconds !== undefined ? { tick_ms: testing.approvals_tick_seconds * 1000 } : {}) });
  const learning = new LearningDuty({
    changelog: o.changelog,
    queue: o.queue,
    org: () => {
      const c = o.company();
      return c ? buildOrg(c) : null;
    },
    clock: o.clock,
    log,
    call_bound_ms: callBound,
    ...(testing.learning_tick_seconds !== undefined ? { tick_ms: testing.learning_tick_seconds * 1000 } : {}),
  });
  const copy = estate?.copy ?? null;
  // The collector needs this node's copy: the rows naming objects are read from it.
  const collector = copy
    ? new ObjectCollector({
        node_id: o.nodeId,
        files: o.files,
        named: () => namedFileIds(copy.sqlite),
        copy: () => copyState(estate!.health().domains),
        slot: o.coord.slot("objects"),
        clock: o.clock,
        log,
        call_bound_ms: callBound,
        ...(testing.objects_tick_seconds !== undefined ? { tick_ms: testing.objects_tick_seconds * 1000 } : {}),
        ...(testing.objects_keep_seconds !== undefined ? { keep_ms: testing.objects_keep_seconds * 1000 } : {}),
      })
    : null;
  const runner = new DutyRunner({
    node_id: o.nodeId,
    owner,
    store: o.coord.duties,
    clock: o.clock,
    log,
    // This incarnation holds the store-dir lock, which proves its predecessors dead.
    takeover: o.takeover,
    claim_bound_ms: callBound,
    ...(o.watchdog ? { watchdog: o.watchdog } : {}),
    duties: [scheduler, maintenance, waiter, approvals, learning, ...(trim ? [trim] : []), ...(collector ? [collector] : [])],
  });
  runner.start();
  return {
    runner,
    companyChanged: () => runner.poke(scheduler.name),
    stop: () => runner.stop(),
  };
}
