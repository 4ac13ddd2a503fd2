// The estate as the node sees it: on a data node, the copy (estate.db + appliers + the
// soundness check), the rpc answerer, the wake feeds and the seeding; on every node, the
// router every tracker, knowledge and chat call goes through, and the API route groups.
import { join } from "node:path";
import type { NatsConnection } from "nats";
import { skipRecord, type SkipResult } from "./skip.ts";
import type { Clock } from "../clock.ts";
import type { Company } from "../config/company.ts";
import type { NodeRole } from "../config/tier-a.ts";
import type { Logger } from "../log.ts";
import { EstateCopy, type DomainHealth } from "./copy.ts";
import { RECORD_VERSION } from "./records.ts";
import { EstateRouter } from "./router.ts";
import type { Domain } from "./schema.ts";
import { seedRecords } from "./seed.ts";
import { SnapshotStore } from "./snapshot.ts";
import { releaseHold, retentionView, takeHold, type HoldResult, type RetentionView } from "./retention-records.ts";
import type { KvSlot } from "../coord/contract.ts";
import { EstateServer } from "./serve.ts";
import { StateLog } from "./statelog.ts";
import { WakeFeeds, type WakeClaims } from "./wake.ts";

export const ESTATE_DB_FILE = "estate.db";

export interface EstateOptions {
  nc: NatsConnection;
  /** The node's store dir; estate.db lives here on a data node. */
  storeDir: string;
  /** stream.replicas: the state logs' replica count when this node creates them. */
  replicas: number;
  nodeId: string;
  roles: readonly NodeRole[];
  company: Company;
  clock: Clock;
  log: Logger;
  /** Live data nodes (from presence leases); a test passes a fixed list. */
  dataNodes: () => readonly string[] | Promise<readonly string[]>;
  /** The `claims` coordination slot (coord.slot("claims")): wake de-duplication past the inbox window. */
  claims?: WakeClaims;
  /** The `estate` coordination slot: operator holds and the trim's conclusions (GET /estate, hold/release). */
  retention?: KvSlot;
  /** Tuning for tests and the bench; every default is the shipped number. */
  tuning?: {
    check_interval_ms?: number;
    undecodable_grace_ms?: number;
    stall_ms?: number;
    read_timeout_ms?: number;
    write_timeout_ms?: number;
    /** Newest record format this build reads (tests start an "older build" by lowering it). */
    reads_version?: number;
  };
}

export interface EstateHealth {
  data: boolean;
  in_service: boolean;
  domains: Record<Domain, DomainHealth> | null;
}

/** A data node's applied position per domain (its presence row publishes it), or null without a copy. */
export function appliedPositions(h: EstateHealth): Record<string, number> | null {
  if (!h.domains) return null;
  return Object.fromEntries(Object.entries(h.domains).map(([d, x]) => [d, x.applied]));
}

export interface Estate {
  router: EstateRouter;
  /** The state logs (the trim reads and purges them). */
  stateLog: StateLog;
  /** Snapshots of copies: the trim uploads one before it purges; a copy below the log restores from it. Null without a copy. */
  snapshots: SnapshotStore | null;
  /** The company the chat routes check mentions against (replaced by setCompany). */
  company(): Company;
  /** Append a skip marker for the record this node's copy is stuck on (POST /estate/{domain}/skip). */
  skip(domain: Domain, position: number, reason: string, actor: string): Promise<SkipResult>;
  /** The operator's holds on the state-log trim, or null without a retention slot. */
  retention: RetentionAdmin | null;
  /** This node's copy, or null when it holds no data. */
  copy: EstateCopy | null;
  health(): EstateHealth;
  /** Replace the company (a config activation): reseeds, and wakes read the new seats. */
  setCompany(company: Company): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export function openEstate(o: EstateOptions): Estate {
  const log = o.log.child({ component: "estate" });
  const isData = o.roles.includes("data");
  const stateLog = new StateLog(o.nc, log, o.clock);
  let company = o.company;
  const snapshots = isData ? new SnapshotStore({ nc: o.nc, replicas: o.replicas, nodeId: o.nodeId, dir: o.storeDir, clock: o.clock, log }) : null;
  const copy = isData
    ? new EstateCopy({
        snapshots: snapshots!,
        path: join(o.storeDir, ESTATE_DB_FILE),
        stateLog,
        clock: o.clock,
        log,
        reads_version: o.tuning?.reads_version ?? RECORD_VERSION,
        ...(o.tuning?.check_interval_ms !== undefined ? { check_interval_ms: o.tuning.check_interval_ms } : {}),
        ...(o.tuning?.undecodable_grace_ms !== undefined ? { undecodable_grace_ms: o.tuning.undecodable_grace_ms } : {}),
        ...(o.tuning?.stall_ms !== undefined ? { stall_ms: o.tuning.stall_ms } : {}),
      })
    : null;
  const router = new EstateRouter({
    nc: o.nc,
    nodeId: o.nodeId,
    copy,
    dataNodes: o.dataNodes,
    clock: o.clock,
    log,
    ...(o.tuning?.read_timeout_ms !== undefined ? { read_timeout_ms: o.tuning.read_timeout_ms } : {}),
    ...(o.tuning?.write_timeout_ms !== undefined ? { write_timeout_ms: o.tuning.write_timeout_ms } : {}),
  });
  const server = copy ? new EstateServer(o.nc, o.nodeId, copy, log) : null;
  const wakes =
    copy && o.claims
      ? new WakeFeeds({
          js: stateLog.jetstream,
          jsm: () => o.nc.jetstreamManager({ checkAPI: false, timeout: 10_000 }),
          copy,
          claims: o.claims,
          company: () => company,
          clock: o.clock,
          log,
        })
      : null;

  const health = (): EstateHealth => {
    if (!copy) return { data: false, in_service: false, domains: null };
    const domains = copy.health();
    return { data: true, in_service: Object.values(domains).every((d) => d.in_service), domains };
  };

  const phases = { streams: false, copy: false, seeded: false, wakes: false };
  const seed = async () => {
    for (const record of seedRecords(company, o.nodeId)) {
      const out = await router.writeRecord(record);
      log.info("estate_seeded", { domain: record.domain, op_id: record.op_id, status: out.status, ...("position" in out ? { position: out.position } : {}) });
    }
  };

  return {
    router,
    copy,
    stateLog,
    snapshots,
    company: () => company,
    skip: (domain, position, reason, actor) => skipRecord({ copy, stateLog, clock: o.clock, nodeId: o.nodeId }, domain, position, reason, actor),
    retention: o.retention ? retentionAdmin(o.retention, stateLog, o.clock) : null,
    health,
    async setCompany(next) {
      company = next;
      if (copy) await seed();
    },
    // Safe to call again after a failure (the node's boot retries it while its cluster
    // has no quorum): each phase runs once, the ones that failed run again.
    async start() {
      if (!copy) return;
      if (!phases.streams) await stateLog.ensureStreams(o.replicas);
      phases.streams = true;
      if (!phases.copy) {
        copy.start();
        server!.start();
        phases.copy = true;
      }
      if (!phases.seeded) await seed();
      phases.seeded = true;
      if (!phases.wakes) {
        if (wakes) await wakes.start();
        else log.warn("estate_wakes_off", { reason: "no claims slot given" });
      }
      phases.wakes = true;
    },
    async stop() {
      await wakes?.stop();
      await server?.stop();
      await copy?.stop();
    },
  };
}

export interface RetentionAdmin {
  view(): Promise<Record<Domain, RetentionView>>;
  hold(domain: Domain, reason: string | null, actor: string): Promise<HoldResult>;
  release(domain: Domain): Promise<HoldResult>;
}

/** The operator's side of the trim: a hold keeps the log from where it starts now. */
function retentionAdmin(slot: KvSlot, stateLog: StateLog, clock: Clock): RetentionAdmin {
  return {
    view: () => retentionView(slot),
    async hold(domain, reason, actor) {
      const pos = await stateLog.position(domain);
      return takeHold(slot, domain, { position: Math.max(0, pos.first_seq - 1), by: actor, at: clock.now(), reason });
    },
    release: (domain) => releaseHold(slot, domain),
  };
}
