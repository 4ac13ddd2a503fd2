// The composition root: builds one node from its config and roles, boots it in order
// (boot(): one line a step, each with its bound), drains it on the first signal and stops
// it, the sidecar last.
import { DEFAULT_SOFT_ALERT } from "../config/budgets.ts";
import { Database } from "bun:sqlite";
import { randomUUID } from "node:crypto";
import { AuditLog, startAuditTrim } from "../api/audit.ts";
import { AuditPublisher, fleetAuditReader } from "../api/audit-stream.ts";
import { auditGroup } from "../api/routes/audit.ts";
import { estateRouteGroups } from "../api/routes/estate.ts";
import { MAINTENANCE_TICK_MS } from "../duty/duties.ts";
import { PAUSE_HOLD, SeatControls } from "../seat/controls.ts";
import { SharedCooldowns } from "../spend/cooldowns.ts";
import { publishEventSink } from "../agent/index.ts";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { connect, type NatsConnection } from "nats";
import { systemClock, type Clock } from "../clock.ts";
import type { LoadedConfig } from "../config/load.ts";
import { brokerKind } from "../config/topology.ts";
import type { Logger } from "../log.ts";
import { CREWLET_VERSION } from "../version.ts";
import { LEASE_PROTOCOL } from "../coord/contract.ts";
import { startBroker, type RunningBroker } from "../broker/index.ts";
import { QUORUM_WAIT_MS_MAX, whileClusterForms } from "./quorum-wait.ts";
import { loadOrMintToken, TokenAuth, type ApiToken } from "../api/auth.ts";
import { createApp, type RouteGroup } from "../api/app.ts";
import { MAX_REQUEST_BODY_BYTES } from "../api/errors.ts";
import { budgetsGroup } from "../api/routes/budgets.ts";
import { deadLettersGroup } from "../api/routes/deadletters.ts";
import { fleetGroups } from "../api/routes/fleet.ts";
import { agentSeats, companySchema, type Company } from "../config/company.ts";
import { createCoordination, type CoordinationHandle } from "../coord/index.ts";
import { appliedPositions, openEstate, type Estate } from "../estate/estate.ts";
import { JetStreamQueue } from "../queue/jetstream.ts";
import { startLegacyMail } from "../queue/legacy-mail.ts";
import { ensureRegisteredMailboxes } from "../duty/mailbox-registry.ts";
import { SeatHost } from "../seat/host.ts";
import { Watchdog } from "../seat/watchdog.ts";
import type { MailboxWatch } from "../seat/mailbox-watch.ts";
import { watchHeldMailboxes } from "../seat/mailbox-wiring.ts";
import { withInboxReclaim } from "../seat/inbox-reclaim.ts";
import { mailbox } from "../queue/topics.ts";
import { brokerPlanFor } from "./broker-plan.ts";
import type { BrokerPlan } from "../broker/plan.ts";
import { handOffStreamLeaders } from "../broker/handoff.ts";
import { seedCompany } from "./company-seed.ts";
import { CompanyRevisions, currentRevisionReader, REVISION_ACTIVATED_SUBJECT, RevisionFollower, type ActiveRevision } from "../config/company-revisions.ts";
import { DataNodesView, feedingDataNodes } from "./data-nodes.ts";
import { judgePosture } from "./posture.ts";
import { NodeEngine } from "./engine.ts";
import { agentsGroup } from "../api/routes/agents.ts";
import { dashboardGroup } from "../api/dashboard/index.ts";
import { metricsGroup } from "../api/routes/metrics.ts";
import { orgGroup } from "../api/routes/org.ts";
import { NodeMetrics } from "../metrics/node-metrics.ts";
import { observedLogger } from "../metrics/observed-logger.ts";
import { eventsGroup } from "../api/routes/events.ts";
import { chatStreamGroup } from "../api/routes/chat-stream.ts";
import { listenForFailovers, seatEventTap } from "./seat-events.ts";
import { configGroup } from "../api/routes/config.ts";
import { lockStoreDir, type StoreLock } from "./store-lock.ts";
import { storeIdentity } from "./store-identity.ts";
import { mintOwner, predecessorsOf } from "../seat/incarnation.ts";
import { parsePresence, presenceKey } from "../seat/presence.ts";
import { NODE_DB_FILE } from "./engine.ts";
import { wipeScratchStore } from "./scratch.ts";
import { NodeRefusal } from "./refusal.ts";
import { openFiles } from "./files.ts";
import type { FileStore } from "../objects/store.ts";
import {
  API_CLOSE_WITHIN_MS,
  DUTIES_STOP_WITHIN_MS,
  ENGINE_STOP_WITHIN_MS,
  ESTATE_STOP_WITHIN_MS,
  NATS_CLOSE_WITHIN_MS,
  NATS_DRAIN_WITHIN_MS,
  QUEUE_CLOSE_WITHIN_MS,
  QUEUE_LEADERS_WITHIN_MS,
  runStopSteps,
  SEAT_DRAIN_REPORT_MS,
  SEAT_DRAIN_WITHIN_MS,
  SEAT_LOOPS_WITHIN_MS,
  SIDECAR_STOP_WITHIN_MS,
  STOP_DRAIN_BUDGET_MS,
  STOP_FINAL_BUDGET_MS,
  STOP_STEP_WITHIN_MS,
  STREAM_LEADERS_WITHIN_MS,
  type StopStep,
} from "./shutdown.ts";
import { JetStreamChangelog } from "../memory/changelog.ts";
import { MemoryReads } from "../agent/holder-reads.ts";
import { memoryGroup } from "../api/routes/memory.ts";
import { Integrations } from "../integrations/index.ts";
import { startDuties, type NodeDuties } from "./duties.ts";
import { schedulesGroup } from "../api/routes/schedules.ts";
import { runsGroup } from "../api/routes/runs.ts";
import { dutyHoldings } from "../duty/view.ts";
import { supervisorCredential } from "../sandbox/credential.ts";
import { RunStore } from "../sandbox/runs.ts";
import { ApprovalStore } from "../approvals/records.ts";
import { ApprovalDesk } from "../approvals/desk.ts";
import { CompletionLedger } from "../agent/ledger.ts";
import type { ApprovalAudit } from "../approvals/gate.ts";
import { approvalsGroup } from "../api/routes/approvals.ts";
import { SLOT_BUCKETS } from "../coord/buckets.ts";
import { PING_SUBJECT_PREFIX, SUPERVISOR_PING_TIMEOUT_MS } from "../duty/sandbox-waiter.ts";

export interface NodeOptions {
  loaded: LoadedConfig;
  log: Logger;
  clock?: Clock;
  /** Called once with the boot summary lines (URL, minted token) meant for a person. */
  announce?: (lines: string[]) => void;
}

/** A node whose fleet has no company yet runs with none: no seats, an empty estate. */
const EMPTY_COMPANY: Company = companySchema.parse({ name: "Crewlet" });

/** Posture is judged once a second: a copy's state moves on its own check, and a claim
 * withheld for a second longer than needed costs nothing. */
const POSTURE_CHECK_MS = 1_000;

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
/** The operator's setup, like a bad config: a supervisor must not restart into it. */
export const EXIT_REFUSED = 2;
export { QUORUM_WAIT_MS_MAX };


/** A stop waits this long for the audit's last entries to reach the fleet's stream (what
 *  misses it stays in node.db and is published at the next start). */
const AUDIT_STOP_FLUSH_MS = 3_000;

/** What the store step proved: the dir, this process's owner id and whose leases it may take over. */
interface BootStore {
  dir: string;
  owner: string;
  takeover: (owner: string) => boolean;
}
interface BootApi {
  auth: TokenAuth;
  /** The token minted at first boot (announced once), or null. */
  minted: ApiToken | null;
}
interface BootStreams {
  queue: JetStreamQueue;
  changelog: JetStreamChangelog;
}
interface BootCompany {
  revisions: CompanyRevisions;
  /** The fleet's active revision at boot, or null when it has none. */
  active: ActiveRevision | null;
}
interface BootEstate {
  estate: Estate;
  dataNodes: DataNodesView;
}
/** Approvals' records, and the audit lines they write (shared once the API step starts). */
interface BootApprovals {
  store: ApprovalStore;
  audit: (e: ApprovalAudit) => void;
  /** Publishes unpublished audit lines now; null until the API step starts the publisher. */
  share: (() => void) | null;
}
interface BootSeats {
  seats: SeatHost;
  controls: SeatControls;
  memoryReads: MemoryReads;
}

export class CrewletNode {
  readonly nodeId: string;
  private readonly clock: Clock;
  private readonly log: Logger;
  /** This node's Prometheus metrics, fed from its log lines (GET /metrics). */
  readonly metrics: NodeMetrics;
  private readonly startedAt: number;
  private lock: StoreLock | null = null;
  private broker: RunningBroker | null = null;
  private nc: NatsConnection | null = null;
  private server: ReturnType<typeof Bun.serve> | null = null;
  private fetchHandler: (req: Request) => Response | Promise<Response> = () => new Response("booting", { status: 503 });
  private queue: JetStreamQueue | null = null;
  private coord: CoordinationHandle | null = null;
  private revisions: RevisionFollower | null = null;
  private estate: Estate | null = null;
  private seats: SeatHost | null = null;
  private engine: NodeEngine | null = null;
  private watchdog: Watchdog | null = null;
  private duties: NodeDuties | null = null;
  private mailboxWatch: MailboxWatch | null = null;
  private company: Company | null = null;
  private bootStep = "starting";
  private readyFlag = false;
  private stopping: Promise<number> | null = null;
  private readonly stopSteps: StopStep[] = [];
  /** Republishes the seat host's claims and releases as events (src/node/seat-events.ts), once the queue exists. */
  private seatEvents: ((event: string, fields: Record<string, unknown>) => void) | null = null;
  private resolveStopped!: (code: number) => void;
  /** Resolves with the exit code once the node has stopped, for whatever reason. */
  readonly stopped: Promise<number>;

  private constructor(private readonly opts: NodeOptions) {
    this.nodeId = opts.loaded.nodeId;
    this.clock = opts.clock ?? systemClock;
    this.metrics = new NodeMetrics(this.nodeId, this.clock);
    this.log = observedLogger(opts.log, (event, fields) => {
      this.metrics.observe(event, fields);
      this.seatEvents?.(event, fields);
    });
    this.startedAt = this.clock.now();
    this.stopped = new Promise((r) => (this.resolveStopped = r));
  }

  static async start(opts: NodeOptions): Promise<CrewletNode> {
    const node = new CrewletNode(opts);
    try {
      await node.boot();
    } catch (err) {
      if (err instanceof NodeRefusal) node.log.error(err.event, { ...err.fields, message: err.message });
      node.log.error("node_boot_failed", { step: node.bootStep, error: err as Error });
      await node.stop(EXIT_FAILURE, "boot failed");
      throw err;
    }
    return node;
  }

  get config() {
    return this.opts.loaded.config;
  }

  get apiUrl(): string {
    const port = this.server?.port ?? this.config.api.port;
    return `http://${this.config.api.host.includes(":") ? `[${this.config.api.host}]` : this.config.api.host}:${port}`;
  }

  /** Why routes answer 503 right now: booting (routes not mounted yet) or stopping. */
  private apiUnavailable(): { code: "starting" | "stopping"; message: string } | null {
    if (this.stopping) return { code: "stopping", message: `node ${this.nodeId} is stopping (draining its seats); ask another node or retry` };
    if (!this.readyFlag) return { code: "starting", message: `node ${this.nodeId} is starting (${this.bootStep}); retry shortly` };
    return null;
  }

  notReadyReason(): string | null {
    if (this.stopping) return "stopping";
    if (this.readyFlag) {
      // A node holding seats its broker no longer delivers to is not serving them.
      const deaf = this.mailboxWatch?.deaf() ?? [];
      return deaf.length > 0 ? `seat_mailbox_deaf: ${deaf.join(", ")}` : null;
    }
    const broker = this.broker?.notReadyReason();
    return broker ? `booting: ${this.bootStep}: ${broker}` : `booting: ${this.bootStep}`;
  }

  health(): Record<string, unknown> {
    const seats = this.seats?.health();
    const { unproven_seconds, ...seatFacts } = seats ?? { unproven_seconds: undefined };
    return {
      node: this.nodeId,
      roles: this.config.node.roles,
      version: CREWLET_VERSION,
      protocol: LEASE_PROTOCOL,
      broker: brokerKind(this.config),
      uptime_seconds: Math.round((this.clock.now() - this.startedAt) / 1000),
      ready: this.readyFlag,
      company_epoch: this.revisions?.epoch ?? null,
      ...(seats ? { seats: seatFacts } : {}),
      ...(unproven_seconds ? { unproven_seconds } : {}),
      ...(this.estate ? { estate: this.estate.health() } : {}),
    };
  }

  private step(name: string): void {
    this.bootStep = name;
    this.log.debug("node_boot_step", { step: name });
  }

  /**
   * The boot, in order: each line a step (the name /ready shows), and whether it waits for a
   * forming cluster ("quorum") or touches only this process ("local"). The store is proved ours
   * before anything in it is touched, every mailbox exists before anything publishes, and the
   * estate comes before the engine, the engine before the seats, the routes last.
   */
  private async boot(): Promise<void> {
    const roles = this.config.node.roles;
    this.watchFromTheStart(); // local
    const store = this.at("store", () => this.openStore()); // local: lock, identity, scratch wipe
    const api = this.at("api", () => this.serveProbes(store)); // local: /health and /ready only
    const plan = await this.at("broker", () => this.startSidecar(store)); // the sidecar's spawn
    await this.at("broker_ready", () => this.broker!.ready); // the sidecar's readiness bound
    const nc = await this.at("nats", () => this.dial()); // reconnects for ever; closed → exit 1
    const streams = await this.at("streams", () => this.ensureStreams(nc)); // quorum
    const coord = await this.at("coordination", () => this.openCoordination(nc)); // quorum
    await this.at("identity", () => this.refuseIfNodeIdInUse(coord, store.takeover)); // quorum
    const files = await this.at("objects", () => openFiles({ config: this.config, nc, slot: coord.slot("objects"), nodeId: this.nodeId, decidesStreams: this.decidesStreams, clock: this.clock, log: this.log, wait: (fn) => this.whileClusterForms("objects", fn) })); // quorum
    const company = await this.at("company", () => this.loadCompany(coord, store.dir, nc)); // quorum
    const integrations = await this.at("mailboxes", () => this.ensureMailboxes(nc, streams.queue, coord)); // quorum
    const estate = await this.at("estate", () => this.openEstate(nc, coord, store.dir)); // quorum
    const { engine, approvals } = await this.at("engine", () => this.startEngine({ store, plan, streams, coord, company, estate, integrations, files })); // local
    const seats = await this.at("seats", () => this.startSeats({ store, plan, nc, coord, estate, engine, integrations })); // the first heartbeat's store bound
    if (roles.includes("workers")) this.at("duties", () => this.startWorkerDuties({ store, nc, coord, company, estate, approvals, streams, files })); // local
    await this.at("revisions", () => this.followRevisions(nc, company)); // quorum
    await this.at("api", () => this.mountRoutes({ store, api, nc, coord, company, estate, engine, seats, integrations, approvals, files })); // local
    this.at("ready", () => this.announceReady(store.dir, api.minted)); // local
  }

  /** One boot step: named for /ready and the log, then run. */
  private at<T>(name: string, run: () => T): T {
    this.step(name);
    return run();
  }

  /**
   * The watchdog from the first moment, with the process itself as its one resting beat
   * (src/seat/watchdog.ts): a process frozen past the lease TTL exits whatever phase it is
   * in, a boot waiting at a step included. Until the coordination store says which TTL is
   * in force, the configured one is.
   */
  private watchFromTheStart(): void {
    const c = this.config;
    const watchdog = new Watchdog({ clock: this.clock, threshold_ms: () => this.coord?.lease_ttl_ms ?? c.coordination.lease_ttl_seconds * 1000 });
    this.watchdog = watchdog;
    watchdog.watch("process");
    watchdog.arm();
  }

  /** The store is proved this process's own before anything in it is touched. */
  private openStore(): BootStore {
    const c = this.config;
    const dir = resolve(c.store.dir);
    // The lock first: nothing in a store is touched, a scratch wipe least of all, until this
    // process has proved the store is its own.
    this.lock = lockStoreDir(dir);
    // Read before a scratch wipe: node.db beside a store without an id means an older
    // build ran here, whose owners carried no store id (see predecessorsOf).
    const identity = storeIdentity(dir);
    const legacy = identity.minted && existsSync(join(dir, NODE_DB_FILE));
    const owner = mintOwner(this.nodeId, identity.id);
    const takeover = predecessorsOf(owner, { legacy });
    if (c.store.scratch) {
      const removed = wipeScratchStore(dir);
      this.log.info("store_scratch_wiped", { dir, entries: removed.length });
    }
    return { dir, owner, takeover };
  }

  /** The API comes up first with only /health and /ready, so a supervisor sees the boot. */
  private serveProbes(store: BootStore): BootApi {
    const { tokens, minted } = this.apiTokens(store.dir);
    const auth = new TokenAuth(tokens);
    this.serveApi();
    this.mountApi(auth, []);
    return { auth, minted };
  }

  private async startSidecar(store: BootStore): Promise<BrokerPlan> {
    const plan = brokerPlanFor(this.config, this.nodeId);
    // Coding runs' supervisors outlive this process: they get a credential that outlives its boot.
    if (plan.kind !== "none") plan.supervisor = supervisorCredential(store.dir);
    this.broker = await startBroker(plan, { log: this.log, clock: this.clock });
    void this.broker.died.then(() => {
      // The broker logged the death in its own words; the node must not run deaf.
      if (!this.stopping) void this.stop(EXIT_FAILURE, "the NATS sidecar died");
    });
    return plan;
  }

  /** The ONE connection both halves of shared state ride, so "reachable" is one fact. */
  private async dial(): Promise<NatsConnection> {
    this.nc = await connect({
      servers: this.broker!.clientUrls,
      ...this.broker!.connectAuth,
      name: `crewlet:${this.nodeId}`,
      // The sidecar is ours and local: a lost connection is retried for ever, and
      // "reachable" is judged by the leases riding this connection, not by giving up.
      reconnect: true,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
    });
    this.watchConnection(this.nc);
    return this.nc;
  }

  /** The members decide the fleet's streams; a leaf only adopts them (its replicas are refused at validation). */
  private get decidesStreams(): boolean {
    return brokerKind(this.config) !== "leaf";
  }

  /** The queue's streams, the seat-event taps, and the seats' memory changelog. */
  private async ensureStreams(nc: NatsConnection): Promise<BootStreams> {
    const replicas = this.config.stream.replicas;
    const decidesStreams = this.decidesStreams;
    this.queue = new JetStreamQueue({ nc, replicas, clock: this.clock, log: this.log, decidesStreams });
    const queue = this.queue;
    this.tapSeatEvents(nc, queue);
    await this.whileClusterForms("streams", () => queue.ensureStreams());
    // Registered first, so it runs last of the components: after the seats are handed
    // over, the last pulls must end before the connection does (see JetStreamQueue.close).
    this.onStop("queue_close", async () => {
      const out = queue.pullsOut;
      const started = this.clock.now();
      await queue.close();
      if (out > 0) this.log.info("queue_pulls_settled", { pulls: out, waited_ms: this.clock.now() - started });
    }, QUEUE_CLOSE_WITHIN_MS);

    // The seats' memory changelog: every node hydrates seats from it and publishes to it.
    const changelog = new JetStreamChangelog(nc, replicas, undefined, decidesStreams);
    await this.whileClusterForms("memory", () => changelog.ensure());
    return { queue, changelog };
  }

  /**
   * The seat host's claims and releases republished as events, and failovers
   * (crewlet_seat_failovers_total): the fleet's seat events, heard from now on; a claim of
   * ours whose previous holder never let the seat go is logged as seat_failover.
   */
  private tapSeatEvents(nc: NatsConnection, queue: JetStreamQueue): void {
    this.seatEvents = seatEventTap(publishEventSink(queue, this.log, () => this.clock.now()), this.nodeId);
    const stopListening = listenForFailovers({ nc, node: this.nodeId, clock: this.clock, log: this.log });
    this.onStop("seat_event_taps", () => stopListening());
  }

  private async openCoordination(nc: NatsConnection): Promise<CoordinationHandle> {
    const c = this.config;
    this.coord = await this.whileClusterForms("coordination", () =>
      createCoordination({ type: c.coordination.type, nc, replicas: c.stream.replicas, decidesStreams: this.decidesStreams, lease_ttl_ms: c.coordination.lease_ttl_seconds * 1000, clock: this.clock, log: this.log }),
    );
    const coord = this.coord;
    this.onStop("coordination", () => coord.close());
    return coord;
  }

  /** The fleet's active company (the file seeds it: seedCompany); none is an empty company. */
  private async loadCompany(coord: CoordinationHandle, storeDir: string, nc: NatsConnection): Promise<BootCompany> {
    const revisions = new CompanyRevisions(coord.slot("config"), coord.slot("status"), this.nodeId, this.clock, this.log);
    const fileCompany = this.config.company;
    if (fileCompany) await seedCompany({ fileCompany, revisions, storeDir, nc, clock: this.clock, log: this.log, wait: (fn) => this.whileClusterForms("company", fn) });
    const active = await this.whileClusterForms("company", () => revisions.active());
    this.company = active?.company ?? null;
    return { revisions, active };
  }

  /** Every seat's mailbox exists before anything publishes to it. */
  private async ensureMailboxes(nc: NatsConnection, queue: JetStreamQueue, coord: CoordinationHandle): Promise<Integrations> {
    const company = this.company;
    if (company) await this.whileClusterForms("mailboxes", () => ensureRegisteredMailboxes(queue, coord.slot("mailboxes"), agentSeats(company).map((s) => s.handle), this.clock, this.log));
    // Webhooks in and out; the notifications group's consumer exists before any ingress publishes.
    const integrations = new Integrations({
      nodeId: this.nodeId,
      company: () => this.company ?? EMPTY_COMPANY,
      queue,
      claims: coord.slot("claims"),
      rate: coord.slot("rate"),
      clock: this.clock,
      log: this.log,
    });
    await this.whileClusterForms("mailboxes", () => integrations.ensureMailbox());
    // Mail an older build left in the stream before the shards moves to the seats' sharded
    // mailboxes once no older node is alive (queue/legacy-mail.ts); after the walk, so every
    // seat's sharded mailbox is there to take it. The members do it; a leaf decides no stream.
    if (this.decidesStreams) {
      const legacy = startLegacyMail({
        nc,
        queue,
        olderNodeAlive: async () => ((await coord.leases.protocolFloor()) ?? LEASE_PROTOCOL) < LEASE_PROTOCOL,
        ...(this.config.testing?.legacy_pass_seconds !== undefined ? { every_ms: this.config.testing.legacy_pass_seconds * 1000 } : {}),
        clock: this.clock,
        log: this.log,
      });
      this.onStop("legacy_mail", () => legacy.stop());
    }
    return integrations;
  }

  private async openEstate(nc: NatsConnection, coord: CoordinationHandle, storeDir: string): Promise<BootEstate> {
    const c = this.config;
    const dataNodes = new DataNodesView(coord.leases, this.clock);
    this.estate = openEstate({
      nc,
      storeDir,
      replicas: c.stream.replicas,
      nodeId: this.nodeId,
      roles: c.node.roles,
      company: this.company ?? EMPTY_COMPANY,
      clock: this.clock,
      log: this.log,
      dataNodes: dataNodes.list,
      claims: coord.slot("claims"),
      retention: coord.slot("estate"),
    });
    const estate = this.estate;
    // Registered before the start, so a boot that fails part-way still stops what started.
    this.onStop("estate", () => estate.stop(), ESTATE_STOP_WITHIN_MS);
    await this.whileClusterForms("estate", () => estate.start());
    return { estate, dataNodes };
  }

  /**
   * Approvals' fleet records, and the audit lines they write (an agent's request, an
   * expiry): to this node's audit table in node.db from the engine's start, shared with
   * the fleet once the API step starts the publisher (it publishes whatever is unpublished).
   */
  private openApprovals(coord: CoordinationHandle, storeDir: string): BootApprovals {
    const store = new ApprovalStore(coord.slot("approvals"), this.clock);
    const db = new Database(join(storeDir, NODE_DB_FILE), { create: true, strict: true });
    db.exec("PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000;");
    this.onStop("approval-audit", () => db.close());
    const log = new AuditLog(db);
    const kit: BootApprovals = {
      store,
      share: null,
      audit: (e) => {
        try {
          log.append({ at: this.clock.now(), token_id: null, method: "AGENT", path: `/approvals/${e.id}`, status: 200, action: e.action, detail: e.detail });
          kit.share?.();
        } catch (err) {
          this.log.error("audit_append_failed", { action: e.action, id: e.id, error: err as Error });
        }
      },
    };
    return kit;
  }

  private async startEngine(b: { store: BootStore; plan: BrokerPlan; streams: BootStreams; coord: CoordinationHandle; company: BootCompany; estate: BootEstate; integrations: Integrations; files: FileStore }): Promise<{ engine: NodeEngine; approvals: BootApprovals }> {
    const c = this.config;
    const { coord, plan, integrations } = b;
    const queue = b.streams.queue;
    const { revisions } = b.company;
    const approvals = this.openApprovals(coord, b.store.dir);
    // A 429 on one node rests that key on every node (crewlet_cooldowns, mirrored here).
    const cooldowns = new SharedCooldowns({ slot: coord.slot("cooldowns"), clock: this.clock, log: this.log, events: publishEventSink(queue, this.log, () => this.clock.now()), node_id: this.nodeId });
    await cooldowns.start();
    this.onStop("cooldowns", () => cooldowns.stop());
    this.engine = new NodeEngine({
      cooldowns,
      nodeId: this.nodeId,
      storeDir: b.store.dir,
      company: this.company ?? EMPTY_COMPANY,
      estate: b.estate.estate.router,
      queue,
      ledger: coord.slot("ledger"),
      budgets: coord.slot("budgets"),
      changelog: b.streams.changelog,
      claims: coord.slot("claims"),
      max_concurrent: c.node.max_concurrent,
      clock: this.clock,
      log: this.log,
      extraTools: integrations.toolsFor,
      answerBack: integrations.answerBack,
      runs: {
        store: new RunStore(coord.slot("runs"), this.clock),
        owner: b.store.owner,
        runs_bucket: SLOT_BUCKETS.runs.name,
        broker: () => (plan.kind !== "none" && plan.supervisor ? { servers: this.broker!.clientUrls, user: plan.supervisor.user, pass: plan.supervisor.password } : null),
        files: b.files,
      },
      approvals: {
        store: approvals.store,
        owner: b.store.owner,
        audit: approvals.audit,
        // An approved company change is a revision like POST /config/revisions makes.
        companyChanges: {
          current: async () => (await revisions.active())?.company ?? null,
          activate: async (company) => {
            const r = await revisions.activate(company);
            if (r.changed) this.nc?.publish(REVISION_ACTIVATED_SUBJECT);
            return { digest: r.active.digest, epoch: r.active.epoch, changed: r.changed };
          },
        },
      },
      secrets: [...c.api.tokens.map((t) => t.token), ...[c.stream.cluster?.secret, c.stream.leaf?.secret].filter((x): x is string => x !== undefined)],
    });
    const engine = this.engine;
    this.onStop("engine", () => engine.stop(), ENGINE_STOP_WITHIN_MS);
    return { engine, approvals };
  }

  /** Every node holds a presence lease (the fleet is counted from them); only a seats node
   * claims. The order: controls, host, memory reads (before the first claim), the first
   * heartbeat and sweep, the mailbox watch, notifications, the stop steps, the posture check. */
  private async startSeats(b: { store: BootStore; plan: BrokerPlan; nc: NatsConnection; coord: CoordinationHandle; estate: BootEstate; engine: NodeEngine; integrations: Integrations }): Promise<BootSeats> {
    const c = this.config;
    const { coord, engine, integrations, nc } = b;
    const { estate, dataNodes } = b.estate;
    const queue = this.queue!;
    const controls = new SeatControls({ slot: coord.slot("controls"), log: this.log });
    this.seats = new SeatHost({
      node_id: this.nodeId,
      roles: c.node.roles,
      labels: c.node.labels,
      broker: brokerKind(c),
      // Its sweep's presence listing is the data-node view's read too (data-nodes.ts).
      leases: feedingDataNodes(coord.leases, dataNodes),
      queue,
      clock: this.clock,
      log: this.log,
      lease_ttl_ms: () => coord.lease_ttl_ms,
      owner: b.store.owner,
      takeover: b.store.takeover,
      // Two processes booting at once under one node id both pass the boot check; the
      // presence row's compare-and-set lets one through, and the other stops here.
      onNodeIdInUse: (holder) => {
        this.log.error("node_id_in_use", { node: this.nodeId, holder, action: "stopping" });
        void this.stop(EXIT_REFUSED, "node_id_in_use");
      },
      // Drains: a seat that was busy or moving runs its backlog as one turn per conversation.
      batchHandler: engine.inbox.batchHandler,
      hooks: withInboxReclaim(engine.hooks(), queue, this.log),
      watchdog: this.watchdog!,
      deafSeats: () => this.mailboxWatch?.deaf() ?? [],
      onProbe: (h, id) => this.mailboxWatch?.heard(h, id),
      estateApplied: () => appliedPositions(estate.health()),
    });
    const seats = this.seats;
    // A person's controls: pauses mirrored (the held seats' inboxes on hold), stops heard.
    await controls.start({
      paused: (h, ctl) => {
        this.log.info("seat_paused", { seat: h, by: ctl.by });
        seats.setHold(h, PAUSE_HOLD, true);
      },
      resumed: (h) => {
        this.log.info("seat_resumed", { seat: h });
        seats.setHold(h, PAUSE_HOLD, false);
      },
      stopped: (h, ctl) => {
        const turns = engine.turns.stopSeat(h, ctl.by);
        if (turns.length > 0) this.log.info("turn_stop_requested", { seat: h, by: ctl.by, turns });
      },
    });
    this.onStop("controls", () => controls.stop());
    // Every node answers memory reads for the seats it holds (leaf nodes too), from before
    // its first claim, so a seat is never held here without an answer for it.
    const memoryReads = new MemoryReads({
      store: engine.memoryStore,
      sync: engine.memorySync,
      queue,
      holder: { node_id: this.nodeId, owner: seats.owner, held: () => seats.held(), leases: async () => (await seats.fleet()).leases },
      log: this.log,
      transcripts: engine.transcripts,
      tools: (h) => engine.turns.toolsFor(h).map((t) => t.name),
    });
    await memoryReads.serve();
    this.onStop("memory_reads", () => memoryReads.stop());
    await seats.start(this.company ? agentSeats(this.company) : []);
    // Each held seat's inbox is checked against the broker (deaf seats: alarm and heal).
    const seconds = (x: number | undefined) => (x === undefined ? undefined : x * 1000);
    const watch = watchHeldMailboxes({
      queue,
      seats,
      busy: (h) => engine.status(h).busy,
      clock: this.clock,
      log: this.log,
      every_ms: seconds(c.testing?.mailbox_check_seconds),
      probe_every_ms: seconds(c.testing?.mailbox_probe_seconds),
      probe_heard_within_ms: seconds(c.testing?.mailbox_probe_heard_seconds),
    });
    this.mailboxWatch = watch;
    watch.start();
    this.onStop("mailbox_watch", () => watch.stop());
    // Inbound notifications: the one fleet-wide group a stateless (leaf) node takes a share of.
    if (c.node.roles.includes("seats")) {
      await integrations.startHandler();
      this.onStop("integrations", () => integrations.stop());
    }
    this.handOverOnStop(b.plan, nc, queue, seats);
    this.judgePostureEvery(estate, dataNodes, seats);
    return { seats, controls, memoryReads };
  }

  /** On a stopping member, mailbox leaderships go to peers first, so the mail the drain hands
   * back lands on a leader that survives; then the seats; then the streams' leaderships, once
   * the releases have landed. Each step has its own bound (shutdown.ts); registered last-first. */
  private handOverOnStop(plan: BrokerPlan, nc: NatsConnection, queue: JetStreamQueue, seats: SeatHost): void {
    const leavingServer = plan.kind === "member" && this.config.stream.replicas > 1 ? this.nodeId : null;
    if (leavingServer !== null) {
      this.onStop(
        "stream_leaders",
        async () => {
          const started = this.clock.now();
          const streams = await handOffStreamLeaders(nc, leavingServer, this.clock, this.log).catch((err) => {
            this.log.warn("broker_stream_handoff_failed", { error: err as Error });
            return { handedOff: 0, stillHere: [] as string[] };
          });
          this.log.info("broker_streams_handed_off", { streams: streams.handedOff, still_here: streams.stillHere.length, waited_ms: this.clock.now() - started });
        },
        STREAM_LEADERS_WITHIN_MS,
      );
    }
    this.onStop("seat_loops", () => seats.stop(), SEAT_LOOPS_WITHIN_MS);
    // The host is told the bound it is awaited for, less a moment to log what it leaves.
    this.onStop("seat_drain", (within_ms) => seats.drain(Math.max(0, within_ms - SEAT_DRAIN_REPORT_MS)), SEAT_DRAIN_WITHIN_MS);
    if (leavingServer !== null) {
      this.onStop(
        "queue_leaders",
        async (within_ms) => {
          const started = this.clock.now();
          const { handedOff, stillHere } = await queue.handOffLeaderships(leavingServer);
          this.log.info("queue_leaders_handed_off", { consumers: handedOff, still_here: stillHere.length, waited_ms: this.clock.now() - started, within_ms });
        },
        QUEUE_LEADERS_WITHIN_MS,
      );
    }
  }

  /** The estate's state decides whether this node may claim (behind: not until level)
   * and whether it can serve its seats at all (withdrawn: cannot route). */
  private judgePostureEvery(estate: Estate, dataNodes: DataNodesView, seats: SeatHost): void {
    const posture = this.clock.setInterval(() => {
      const h = estate.health();
      const servedLocally = h.data && h.in_service;
      if (!servedLocally) dataNodes.keepRead();
      const p = judgePosture({
        data: h.data,
        in_service: h.in_service,
        behind: Object.values(h.domains ?? {}).some((d) => d.state === "behind"),
        route_view_unread_ms: dataNodes.unreadMs(),
      });
      seats.setBehind(p.behind);
      seats.setWithdrawn(p.withdrawn);
    }, POSTURE_CHECK_MS);
    this.onStop("posture", () => posture.cancel());
  }

  /** The singleton duties, on a workers node; registered after the seats, so a graceful
   * stop gives them back (after their last tick) before the seats are drained. */
  private startWorkerDuties(b: { store: BootStore; nc: NatsConnection; coord: CoordinationHandle; company: BootCompany; estate: BootEstate; approvals: BootApprovals; streams: BootStreams; files: FileStore }): void {
    const { nc, coord } = b;
    const { revisions } = b.company;
    this.duties = startDuties({
      nodeId: this.nodeId,
      owner: b.store.owner,
      takeover: b.store.takeover,
      coord,
      queue: this.queue!,
      // Expiries and retellings; its audit lines are the approvals' own (node.db, shared).
      approvals: new ApprovalDesk({ store: b.approvals.store, queue: this.queue!, estate: b.estate.estate.router, clock: this.clock, log: this.log, audit: b.approvals.audit, ledger: new CompletionLedger(b.coord.slot("ledger"), this.clock, this.log) }),
      pingSupervisor: async (run) => {
        try {
          await nc.request(`${PING_SUBJECT_PREFIX}${run}`, new Uint8Array(), { timeout: SUPERVISOR_PING_TIMEOUT_MS });
          return true;
        } catch {
          return false;
        }
      },
      company: () => this.company,
      currentRevision: currentRevisionReader(revisions),
      // The roster the mailbox sweep judges by: the revision the fleet's pointer names,
      // and only once this node has applied it (unknown is never absent).
      roster: async () => {
        const pointer = await revisions.active();
        if (!pointer) return { ok: false, reason: "the fleet has no active revision" };
        const applied = this.revisions?.epoch ?? null;
        if (applied !== pointer.epoch) return { ok: false, reason: `this node has applied epoch ${applied ?? "none"}, the fleet is at ${pointer.epoch}` };
        return { ok: true, epoch: pointer.epoch, seats: new Set(agentSeats(pointer.company).map((s) => s.handle)) };
      },
      estate: b.estate.estate,
      changelog: b.streams.changelog,
      files: b.files,
      testing: this.config.testing,
      clock: this.clock,
      log: this.log,
      watchdog: this.watchdog,
    });
    const duties = this.duties;
    this.onStop("duties", () => duties.stop(), DUTIES_STOP_WITHIN_MS);
  }

  /** Follows the fleet's company revisions from here on; the boot applied the active one. */
  private async followRevisions(nc: NatsConnection, company: BootCompany): Promise<void> {
    const { revisions, active } = company;
    this.revisions = new RevisionFollower(revisions, (a) => this.applyRevision(a, revisions), this.clock, this.log);
    // The boot itself applied the active revision (the mailbox walk, the estate seed, the
    // seats); record it so the follower starts after it rather than doing it all again.
    if (active) {
      this.revisions.markApplied(active.epoch);
      await this.whileClusterForms("revisions", () => revisions.recordApplied(active, agentSeats(active.company).length));
      this.log.info("config_revision_applied", { digest: active.digest, epoch: active.epoch, seats: agentSeats(active.company).length });
    }
    this.revisions.start();
    const follower = this.revisions;
    const nudges = nc.subscribe(REVISION_ACTIVATED_SUBJECT, { callback: () => void follower.check() });
    this.onStop("revisions", () => {
      follower.stop();
      nudges.unsubscribe();
    });
  }

  /** Every route group this node serves (by its roles), with the audit log behind its writes. */
  private async mountRoutes(b: { store: BootStore; api: BootApi; nc: NatsConnection; coord: CoordinationHandle; company: BootCompany; estate: BootEstate; engine: NodeEngine; seats: BootSeats; integrations: Integrations; approvals: BootApprovals; files: FileStore }): Promise<void> {
    const { nc, coord, engine, integrations } = b;
    const { revisions } = b.company;
    const { estate } = b.estate;
    const { seats, controls, memoryReads } = b.seats;
    const queue = this.queue!;
    const roles = this.config.node.roles;
    const storeDir = b.store.dir;
    // The audit log: every write this node's API answered, in node.db first, then on the
    // fleet's CREWLET_AUDIT stream (what GET /audit reads on any node); node.db's rows are
    // trimmed past the stream's horizon on the maintenance tick.
    const auditDb = new Database(join(storeDir, NODE_DB_FILE), { create: true, strict: true });
    auditDb.exec("PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000;");
    const audit = new AuditLog(auditDb);
    const auditTrim = startAuditTrim({ audit, clock: this.clock, log: this.log, every_ms: MAINTENANCE_TICK_MS });
    const auditShare = new AuditPublisher({ audit, js: nc.jetstream(), node: this.nodeId, clock: this.clock, log: this.log });
    auditShare.start();
    b.approvals.share = () => void auditShare.flush();
    const auditReader = fleetAuditReader({ js: nc.jetstream(), jsm: await nc.jetstreamManager({ checkAPI: false }), publisher: auditShare });
    this.onStop("audit", async () => {
      auditTrim.cancel();
      auditShare.stop();
      // What this node's API answered last (a drain's own entry) reaches the fleet's log.
      await Promise.race([auditShare.flush(), this.clock.sleep(AUDIT_STOP_FLUSH_MS)]).catch(() => undefined);
      auditDb.close();
    }, AUDIT_STOP_FLUSH_MS + STOP_STEP_WITHIN_MS);
    this.mountApi(b.api.auth, [
      ...(roles.includes("ingress") ? estateRouteGroups(estate, this.clock, { files: b.files, protocolFloor: () => coord.leases.protocolFloor() }) : []),
      ...(roles.includes("ingress") ? [dashboardGroup(), eventsGroup({ nc, clock: this.clock, log: this.log }), chatStreamGroup({ nc, router: estate.router, clock: this.clock, log: this.log }), integrations.routeGroup()] : []),
      memoryGroup({ org: () => engine.currentOrg, reads: memoryReads }),
      agentsGroup({
        nodeId: this.nodeId,
        org: () => engine.currentOrg,
        status: (h) => engine.status(h),
        leases: () => seats.fleet(),
        controls: {
          paused: (h) => controls.pausedLocally(h),
          pause: (h, by) => controls.pause(h, by, this.clock.now()),
          resume: (h) => controls.resume(h),
          stop: (h, by) => controls.requestStop(h, by, this.clock.now(), randomUUID()),
        },
        model: (llm) => engine.modelOf(llm),
        tools: (h) => engine.turns.toolsFor(h).map((t) => t.name),
        holderTools: async (h) => (await memoryReads.tools(h)).tools,
      }),
      auditGroup(auditReader),
      orgGroup({ org: () => engine.currentOrg }),
      ...(roles.includes("ingress") && engine.budgets ? [budgetsGroup({ seats: () => (this.company ? agentSeats(this.company).map((s) => s.handle) : []), status: (h) => engine.budgets!.status(h), softAlert: () => this.company?.budgets.soft_alert ?? DEFAULT_SOFT_ALERT, history: (scope, days) => engine.budgets!.history(scope, days) })] : []),
      ...(roles.includes("ingress") ? [schedulesGroup({ company: () => this.company, cursors: coord.slot("schedules"), clock: this.clock })] : []),
      ...(roles.includes("ingress") ? [runsGroup({ store: new RunStore(coord.slot("runs"), this.clock) })] : []),
      ...(roles.includes("ingress") ? [approvalsGroup({ store: b.approvals.store, desk: new ApprovalDesk({ store: b.approvals.store, queue, estate: estate.router, clock: this.clock, log: this.log }) })] : []),
      ...fleetGroups({
        fleet: async () => ({ ...(await seats.fleet()), duties: await dutyHoldings(coord.duties).catch(() => null) }),
        drain: () => void this.stop(EXIT_OK, "drain requested"),
      }),
      configGroup({ revisions, nudge: () => nc.publish(REVISION_ACTIVATED_SUBJECT) }),
      deadLettersGroup(queue),
      metricsGroup(this.metrics),
    ], (e) => {
      audit.append(e);
      void auditShare.flush();
    });
    this.metrics.setSources({
      seatsHeld: () => seats.health().held,
      mailboxDepth: async (h) => (await queue.inspectMailbox(mailbox(h, "inbox").subject, mailbox(h, "inbox").group))?.num_pending ?? null,
      estate: () => estate.health().domains,
    });
  }

  private announceReady(storeDir: string, minted: ApiToken | null): void {
    this.readyFlag = true;
    this.log.info("node_ready", { node: this.nodeId, roles: this.config.node.roles, boot_ms: this.clock.now() - this.startedAt });
    const lines = [`crewlet ${CREWLET_VERSION} node ${this.nodeId} ready`, `  API:   ${this.apiUrl}`];
    if (minted) lines.push(`  token: ${minted.token}   (minted at first boot; kept in ${storeDir}/api-token)`);
    this.opts.announce?.(lines);
  }

  /** A boot step's store calls, asked again while the cluster forms (quorum-wait.ts). */
  private whileClusterForms<T>(step: string, fn: () => Promise<T>): Promise<T> {
    return whileClusterForms(step, fn, {
      clock: this.clock,
      log: this.log,
      stopping: () => this.stopping !== null,
      waiting: (text) => (this.bootStep = text),
    });
  }

  private async refuseIfNodeIdInUse(coord: CoordinationHandle, takeover: (owner: string) => boolean): Promise<void> {
    const key = presenceKey(this.nodeId);
    const view = await this.whileClusterForms("identity", () => coord.leases.get(key));
    if (!view || !view.live || takeover(view.owner)) return;
    const row = parsePresence(view);
    throw new NodeRefusal(
      "node_id_in_use",
      `node.id "${this.nodeId}" is in use by a live process (${view.owner}, roles ${row.roles.join(",") || "?"}, up since ${new Date(row.started_at).toISOString()}) running on another store dir: ` +
        "give each process its own node.id (a process restarted on its own store takes its seats back at once)",
      { holder: view.owner, key },
    );
  }

  /** A newer company revision: mailboxes first, then the estate, then the seats. */
  private async applyRevision(active: ActiveRevision, revisions: CompanyRevisions): Promise<void> {
    const seats = agentSeats(active.company);
    if (this.queue && this.coord) await ensureRegisteredMailboxes(this.queue, this.coord.slot("mailboxes"), seats.map((s) => s.handle), this.clock, this.log);
    this.company = active.company;
    await this.estate?.setCompany(active.company);
    this.engine?.setCompany(active.company);
    this.seats?.setSeats(seats);
    this.duties?.companyChanged();
    await revisions.recordApplied(active, seats.length);
    this.log.info("config_revision_applied", { digest: active.digest, epoch: active.epoch, seats: seats.length });
  }

  private apiTokens(storeDir: string): { tokens: ApiToken[]; minted: ApiToken | null } {
    const configured = this.config.api.tokens;
    if (configured.length > 0) return { tokens: configured, minted: null };
    const { token, minted } = loadOrMintToken(storeDir);
    return { tokens: [token], minted: minted ? token : null };
  }

  private serveApi(): void {
    this.server = Bun.serve({ hostname: this.config.api.host, port: this.config.api.port, maxRequestBodySize: MAX_REQUEST_BODY_BYTES, fetch: (req) => this.fetchHandler(req) });
    this.log.info("api_listening", { url: this.apiUrl });
  }

  /** Swaps in an app with these route groups (probes are always there). */
  private mountApi(auth: TokenAuth, groups: RouteGroup[], audit?: (e: { at: number; token_id: string | null; method: string; path: string; status: number }) => void): void {
    const app = createApp({
      ...(audit ? { audit: (e: { token_id: string | null; method: string; path: string; status: number }) => audit({ ...e, at: this.clock.now() }) } : {}),
      auth,
      log: this.log,
      health: this,
      groups,
      unavailable: () => this.apiUnavailable(),
      idempotencySlot: this.coord?.slot("claims") ?? null,
    });
    this.fetchHandler = (req) => app.fetch(req);
  }

  private watchConnection(nc: NatsConnection): void {
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === "disconnect") this.log.warn("nats_disconnected", { server: s.data });
        else if (s.type === "reconnect") this.log.info("nats_reconnected", { server: s.data });
      }
    })();
    void nc.closed().then((err) => {
      if (this.stopping) return;
      this.log.error("nats_connection_closed", { error: err ?? undefined });
      void this.stop(EXIT_FAILURE, "the NATS connection closed");
    });
  }

  /** A named teardown step, run in reverse order of registration before the connection and
   * sidecar stop, awaited at most `within_ms` within what is left of the drain's budget, then
   * abandoned and logged (shutdown.ts). */
  onStop(name: string, fn: (within_ms: number) => Promise<void> | void, within_ms?: number): void {
    this.stopSteps.push({ name, run: fn, ...(within_ms !== undefined ? { within_ms } : {}) });
  }

  /** Graceful stop: drain what the node holds, then the connection, then the sidecar. */
  stop(code = EXIT_OK, reason = "requested"): Promise<number> {
    // Disarmed for the whole of a stop, a boot's failure included (see Watchdog.disarm).
    this.watchdog?.disarm();
    this.stopping ??= this.shutdown(code, reason);
    return this.stopping;
  }

  private async shutdown(code: number, reason: string): Promise<number> {
    this.log.info("node_stopping", { reason });
    const started = this.clock.now();
    const drain = await runStopSteps([...this.stopSteps].reverse(), { budget_ms: STOP_DRAIN_BUDGET_MS, clock: this.clock, log: this.log, phase: "drain" });
    // Always run, whatever the drain spent: each bounds itself, so the sidecar is stopped
    // by us (a clean JetStream shutdown) and never left to the parent-death signal.
    const final = await runStopSteps(
      [
        { name: "api", run: () => this.server?.stop(true), within_ms: API_CLOSE_WITHIN_MS },
        { name: "nats", run: () => this.closeConnection(), within_ms: NATS_CLOSE_WITHIN_MS },
        { name: "broker", run: () => this.broker?.stop(), within_ms: SIDECAR_STOP_WITHIN_MS },
      ],
      { budget_ms: STOP_FINAL_BUDGET_MS, clock: this.clock, log: this.log, phase: "final" },
    );
    const left = [...drain, ...final].filter((s) => s.outcome === "abandoned" || s.outcome === "skipped").map((s) => s.name);
    this.lock?.release();
    this.log.info("node_stopped", { code, reason, took_ms: this.clock.now() - started, ...(left.length > 0 ? { steps_abandoned: left } : {}) });
    this.resolveStopped(code);
    return code;
  }

  /** The connection's drain, bounded (NATS_DRAIN_WITHIN_MS); past it, closed outright. */
  private async closeConnection(): Promise<void> {
    const nc = this.nc;
    if (!nc || nc.isClosed()) return;
    const timeUp = new AbortController();
    const drained = await Promise.race([
      nc.drain().then(() => true),
      this.clock.sleep(NATS_DRAIN_WITHIN_MS, timeUp.signal).then(() => false, () => true),
    ]);
    timeUp.abort();
    if (!drained) {
      this.log.warn("nats_drain_abandoned", { within_ms: NATS_DRAIN_WITHIN_MS });
      await nc.close();
    }
  }
}
