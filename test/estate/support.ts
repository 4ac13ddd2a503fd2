// Shared fixtures for the estate tests: a small company, a claims slot over real NATS KV,
// and a way to open an estate in a temp store dir.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { StorageType, type KV, type NatsConnection } from "nats";
import { systemClock } from "../../src/clock.ts";
import { companySchema, type Company } from "../../src/config/company.ts";
import { DEFAULT_OBJECTS_BUCKET, GRANTS, type NodeRole } from "../../src/config/tier-a.ts";
import { FileStore } from "../../src/objects/store.ts";
import { CasConflict, type KvEntry } from "../../src/coord/contract.ts";
import { createApp, type RouteGroup } from "../../src/api/app.ts";
import { TokenAuth } from "../../src/api/auth.ts";
import { estateRouteGroups } from "../../src/api/routes/estate.ts";
import { openEstate, type Estate, type EstateOptions } from "../../src/estate/estate.ts";
import type { WakeClaims } from "../../src/estate/wake.ts";
import { memoryLogger, silentLogger, type MemorySink } from "../../src/log.ts";

export function testCompany(): Company {
  return companySchema.parse({
    name: "Acme",
    roles: [
      { name: "Alice", handle: "alice", kind: "agent" },
      { name: "Bob", handle: "bob", kind: "agent" },
      { name: "Carol", handle: "carol", kind: "human" },
    ],
    units: [
      { name: "Engineering", id: "eng", project: "ENG", space: "eng-docs", channel: "eng", roles: ["alice", "bob", "carol"] },
      { name: "Sales", id: "sales", project: "SAL", roles: [] },
    ],
  });
}

/** The claims slot the wake feeds use, over a real JetStream KV bucket. */
export async function natsClaims(nc: NatsConnection, replicas = 1): Promise<WakeClaims & { kv: KV }> {
  const kv = await nc.jetstream().views.kv("crewlet_claims", { replicas, history: 1, storage: StorageType.File });
  return {
    kv,
    async get(key: string): Promise<KvEntry | null> {
      const e = await kv.get(key);
      if (!e || e.operation !== "PUT") return null;
      return { key, value: e.value, revision: e.revision, created: e.created.getTime(), operation: "put" };
    },
    async create(key: string, value: Uint8Array): Promise<number> {
      try {
        return await kv.create(key, value);
      } catch (err) {
        if (/wrong last sequence|key exists/i.test((err as Error).message)) throw new CasConflict(key, null);
        throw err;
      }
    },
  };
}

export interface TestEstate {
  /** The estate with the route groups an ingress node serves for it. */
  estate: Estate & { routeGroups: RouteGroup[]; files: FileStore };
  nodeId: string;
  dir: string;
  sink: MemorySink;
  nc: NatsConnection;
}

export const tempDirs: string[] = [];
export function tempDir(prefix = "crewlet-estate-"): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.push(d);
  return d;
}
export function removeTempDirs(): void {
  for (const d of tempDirs.splice(0)) rmSync(d, { recursive: true, force: true });
}

export async function startTestEstate(o: {
  nc: NatsConnection;
  nodeId: string;
  dir?: string;
  roles?: NodeRole[];
  replicas?: number;
  dataNodes: () => readonly string[];
  claims?: WakeClaims;
  retention?: EstateOptions["retention"];
  company?: Company;
  tuning?: EstateOptions["tuning"];
  /** The live nodes' lowest lease protocol, as the file routes judge it (none: not judged). */
  protocolFloor?: () => Promise<number | null>;
}): Promise<TestEstate> {
  const dir = o.dir ?? tempDir();
  const { log, sink } = memoryLogger("debug");
  const opened = openEstate({
    nc: o.nc,
    storeDir: dir,
    replicas: o.replicas ?? 1,
    nodeId: o.nodeId,
    roles: o.roles ?? ["data", "ingress", "seats", "workers"],
    company: o.company ?? testCompany(),
    clock: systemClock,
    log: log.child({ node: o.nodeId }),
    dataNodes: o.dataNodes,
    ...(o.claims ? { claims: o.claims } : {}),
    ...(o.retention ? { retention: o.retention } : {}),
    tuning: { check_interval_ms: 200, ...o.tuning },
  });
  // The fleet's file store on the same broker (a real object store bucket), as a node opens it.
  const files = new FileStore({ nc: o.nc, bucket: DEFAULT_OBJECTS_BUCKET, replicas: o.replicas ?? 1, creates: true });
  const estate = Object.assign(opened, { routeGroups: estateRouteGroups(opened, systemClock, { files, ...(o.protocolFloor ? { protocolFloor: o.protocolFloor } : {}) }), files });
  await estate.start();
  return { estate, nodeId: o.nodeId, dir, sink, nc: o.nc };
}

/** Polls `cond` until true or the deadline; generous, since CI machines are slow. */
export async function eventually(cond: () => boolean | Promise<boolean>, what: string, within_ms = 20_000): Promise<void> {
  const deadline = Date.now() + within_ms;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(25);
  }
}

/** The tokens an estate test's API knows: ops holds every grant, reader only reads. */
export const OPS_TOKEN = "ops-token-0123456789abcdefghij";
export const READER_TOKEN = "reader-token-0123456789abcdefg";

/** The API an ingress node serves over one test estate (and `extra` groups), knowing the two tokens above. */
export function estateApp(node: TestEstate, extra: RouteGroup[] = []): ReturnType<typeof createApp> {
  return createApp({
    auth: new TokenAuth([
      { id: "ops", token: OPS_TOKEN, grants: GRANTS },
      { id: "reader", token: READER_TOKEN, grants: ["state:read"] },
    ]),
    log: silentLogger,
    health: { health: () => ({ estate: node.estate.health() }), notReadyReason: () => null },
    groups: [...node.estate.routeGroups, ...extra],
  });
}
