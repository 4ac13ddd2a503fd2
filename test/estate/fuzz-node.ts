// One node as the write-route fuzzer (test/estate/fuzz.ts) drives it, on real parts: its
// estate with the retention records, the fleet's company revisions, seat controls, the
// webhook ingress, the fleet routes and the dead letters — every route group with a write
// route, mounted as src/node/node.ts mounts them. Shared by test/estate/fuzz.test.ts (R1)
// and bench/estate-fuzz.ts (R3).
import type { Hono } from "hono";
import type { JetStreamManager, NatsConnection } from "nats";
import { createApp, type RouteGroup } from "../../src/api/app.ts";
import { TokenAuth, type AuthEnv } from "../../src/api/auth.ts";
import { agentsGroup } from "../../src/api/routes/agents.ts";
import { configGroup } from "../../src/api/routes/config.ts";
import { deadLettersGroup } from "../../src/api/routes/deadletters.ts";
import { fleetGroups } from "../../src/api/routes/fleet.ts";
import { systemClock } from "../../src/clock.ts";
import { GRANTS } from "../../src/config/tier-a.ts";
import { createCoordination, type CoordinationHandle } from "../../src/coord/index.ts";
import type { Estate } from "../../src/estate/estate.ts";
import { Integrations } from "../../src/integrations/index.ts";
import { silentLogger } from "../../src/log.ts";
import { CompanyRevisions, REVISION_ACTIVATED_SUBJECT } from "../../src/config/company-revisions.ts";
import { buildOrg } from "../../src/org/org.ts";
import type { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { SeatControls } from "../../src/seat/controls.ts";
import { FUZZ_HANDLES, FUZZ_RUN_ID, FUZZ_TOKEN, fuzzCompany } from "./fuzz.ts";
import { runsGroup } from "../../src/api/routes/runs.ts";
import { RunStore } from "../../src/sandbox/runs.ts";
import { startTestEstate, type TestEstate } from "./support.ts";

type App = Hono<AuthEnv>;

/** One node as the fuzzer drives it: the estate and every route group with a write route, on real parts. */
export interface FuzzNode {
  id: string;
  test: TestEstate;
  estate: Estate;
  app: App;
  coord: CoordinationHandle;
  controls: SeatControls;
  /** Drains the fleet routes were asked for (must stay 0: the fuzzer's drains are refusals). */
  readonly drains: number;
  jsm: JetStreamManager;
  stop(): Promise<void>;
}

/**
 * A node for the fuzzer: its estate (with the retention records), the fleet's company
 * revisions (the fuzz company seeded as a first boot does), seat controls, the webhook
 * ingress for the fuzz company's integration, the fleet routes and the dead letters —
 * mounted as src/node/node.ts mounts them. No seat runs here, so GET /agents shows no
 * holder and no turns, and a drain (which stops a node) is only counted.
 */
export async function startFuzzNode(o: { nc: NatsConnection; nodeId: string; replicas: number; dataNodes: () => readonly string[]; queue: JetStreamQueue }): Promise<FuzzNode> {
  const log = silentLogger;
  const coord = await createCoordination({ type: "local", nc: o.nc, replicas: o.replicas, clock: systemClock, log });
  const company = fuzzCompany();
  const test = await startTestEstate({ nc: o.nc, nodeId: o.nodeId, replicas: o.replicas, dataNodes: o.dataNodes, company, retention: coord.slot("estate") });
  const revisions = new CompanyRevisions(coord.slot("config"), coord.slot("status"), o.nodeId, systemClock, log);
  await revisions.activateIfNone(company);
  const controls = new SeatControls({ slot: coord.slot("controls"), log });
  await controls.start({});
  const integrations = new Integrations({ nodeId: o.nodeId, company: () => company, queue: o.queue, claims: coord.slot("claims"), rate: coord.slot("rate"), clock: systemClock, log });
  await integrations.ensureMailbox();
  const org = buildOrg(company);
  const drained = { count: 0 };
  // One running run, so a cancel can succeed (no box behind it: only its record).
  const runs = new RunStore(coord.slot("runs"), systemClock);
  const now = systemClock.now();
  await runs.create({ v: 1, id: FUZZ_RUN_ID, seat: FUZZ_HANDLES[0]!, engine: "e", task: "t", conversation: "work:FUZZ-1", from: "fuzz", owner: `${o.nodeId}:fuzz`, owner_epoch: 1, node: o.nodeId, pid: 1, state: "running", question: null, answer: null, cancel: null, result: null, reported: false, created_at: now, updated_at: now }).catch(() => undefined);
  const groups: RouteGroup[] = [
    ...test.estate.routeGroups,
    integrations.routeGroup(),
    agentsGroup({
      nodeId: o.nodeId,
      org: () => org,
      // Asked only of a seat held here, and no seat is.
      status: () => ({ busy: false, turns: 0, last_turn_at: null, last_outcome: null, last_error: null, last_error_at: null, input_tokens: 0, output_tokens: 0 }),
      leases: async () => ({ nodes: [], leases: [], unplaceable: [], unmanned_roles: [] }),
      controls: {
        paused: (h) => controls.pausedLocally(h),
        pause: (h, by) => controls.pause(h, by, systemClock.now()),
        resume: (h) => controls.resume(h),
        stop: (h, by) => controls.requestStop(h, by, systemClock.now(), crypto.randomUUID()),
      },
    }),
    ...fleetGroups({ fleet: () => null, drain: () => void (drained.count += 1) }),
    configGroup({ revisions, nudge: () => o.nc.publish(REVISION_ACTIVATED_SUBJECT) }),
    deadLettersGroup(o.queue),
    runsGroup({ store: runs }),
  ];
  const app = createApp({
    auth: new TokenAuth([{ id: "fuzz", token: FUZZ_TOKEN, grants: GRANTS }]),
    log,
    health: { health: () => ({}), notReadyReason: () => null },
    groups,
  });
  const jsm = await o.nc.jetstreamManager();
  return {
    id: o.nodeId,
    test,
    estate: test.estate,
    app,
    coord,
    controls,
    get drains() {
      return drained.count;
    },
    jsm,
    async stop() {
      controls.stop();
      await test.estate.stop();
      await coord.close();
    },
  };
}

