// The composition root: builds one node from its config and roles, boots it in order,
// drains it on the first signal and stops it (sidecar last).
//
// Boot order matters: the sidecar, then the ONE NATS connection both halves of shared
// state ride (so "reachable" is one fact), the streams and buckets, every seat's mailbox
// (before anything publishes: mail to a subject no mailbox covers is dropped), the
// estate, the seat host, and the API last but for /health and /ready, which answer from
// the first moment so a supervisor can watch the boot.
import { rmSync } from "node:fs";
import { resolve } from "node:path";
import { connect, type NatsConnection } from "nats";
import { systemClock, type Clock } from "../clock.ts";
import type { LoadedConfig } from "../config/load.ts";
import { brokerKind } from "../config/topology.ts";
import type { Logger } from "../log.ts";
import { CREWLET_VERSION, LEASE_PROTOCOL } from "../version.ts";
import { startBroker, type RunningBroker } from "../broker/index.ts";
import { loadOrMintToken, TokenAuth, type ApiToken } from "../api/auth.ts";
import { createApp, type RouteGroup } from "../api/app.ts";
import { brokerPlanFor } from "./broker-plan.ts";
import { lockStoreDir, type StoreLock } from "./store-lock.ts";

export interface NodeOptions {
  loaded: LoadedConfig;
  log: Logger;
  clock?: Clock;
  /** Called once with the boot summary lines (URL, minted token) meant for a person. */
  announce?: (lines: string[]) => void;
}

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;

/** A graceful stop that takes longer than this is cut short: a hung drain is a kill away anyway. */
const SHUTDOWN_BUDGET_MS = 30_000;

export class CrewletNode {
  readonly nodeId: string;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly startedAt: number;
  private lock: StoreLock | null = null;
  private broker: RunningBroker | null = null;
  private nc: NatsConnection | null = null;
  private server: ReturnType<typeof Bun.serve> | null = null;
  private bootStep = "starting";
  private readyFlag = false;
  private stopping: Promise<number> | null = null;
  private readonly stopCallbacks: (() => Promise<void> | void)[] = [];
  private resolveStopped!: (code: number) => void;
  /** Resolves with the exit code once the node has stopped, for whatever reason. */
  readonly stopped: Promise<number>;

  private constructor(private readonly opts: NodeOptions) {
    this.nodeId = opts.loaded.nodeId;
    this.clock = opts.clock ?? systemClock;
    this.log = opts.log;
    this.startedAt = this.clock.now();
    this.stopped = new Promise((r) => (this.resolveStopped = r));
  }

  static async start(opts: NodeOptions): Promise<CrewletNode> {
    const node = new CrewletNode(opts);
    try {
      await node.boot();
    } catch (err) {
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

  notReadyReason(): string | null {
    if (this.stopping) return "stopping";
    if (this.readyFlag) return null;
    const broker = this.broker?.notReadyReason();
    return broker ? `booting: ${this.bootStep}: ${broker}` : `booting: ${this.bootStep}`;
  }

  health(): Record<string, unknown> {
    return {
      node: this.nodeId,
      roles: this.config.node.roles,
      version: CREWLET_VERSION,
      protocol: LEASE_PROTOCOL,
      broker: brokerKind(this.config),
      uptime_seconds: Math.round((this.clock.now() - this.startedAt) / 1000),
      ready: this.readyFlag,
    };
  }

  private step(name: string): void {
    this.bootStep = name;
    this.log.debug("node_boot_step", { step: name });
  }

  private async boot(): Promise<void> {
    const c = this.config;
    const storeDir = resolve(c.store.dir);
    this.step("store");
    if (c.store.scratch) rmSync(storeDir, { recursive: true, force: true });
    this.lock = lockStoreDir(storeDir);

    // The API comes up first with only /health and /ready, so a supervisor sees the boot.
    this.step("api");
    const { tokens, minted } = this.apiTokens(storeDir);
    const auth = new TokenAuth(tokens);
    this.groups = [];
    this.serveApi(auth);

    this.step("broker");
    const plan = brokerPlanFor(c, this.nodeId);
    this.broker = await startBroker(plan, { log: this.log, clock: this.clock });
    void this.broker.died.then(() => {
      // The broker logged the death in its own words; the node must not run deaf.
      if (!this.stopping) void this.stop(EXIT_FAILURE, "the NATS sidecar died");
    });

    this.step("broker_ready");
    await this.broker.ready;

    this.step("nats");
    this.nc = await connect({
      servers: this.broker.clientUrls,
      ...this.broker.connectAuth,
      name: `crewlet:${this.nodeId}`,
      // The sidecar is ours and local: a lost connection is retried for ever, and
      // "reachable" is judged by the leases riding this connection, not by giving up.
      reconnect: true,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
    });
    this.watchConnection(this.nc);

    this.step("ready");
    this.readyFlag = true;
    this.log.info("node_ready", { node: this.nodeId, roles: c.node.roles, boot_ms: this.clock.now() - this.startedAt });
    const lines = [`crewlet ${CREWLET_VERSION} node ${this.nodeId} ready`, `  API:   ${this.apiUrl}`];
    if (minted) lines.push(`  token: ${minted.token}   (minted at first boot; kept in ${storeDir}/api-token)`);
    this.opts.announce?.(lines);
  }

  private groups: RouteGroup[] = [];

  private apiTokens(storeDir: string): { tokens: ApiToken[]; minted: ApiToken | null } {
    const configured = this.config.api.tokens;
    if (configured.length > 0) return { tokens: configured, minted: null };
    const { token, minted } = loadOrMintToken(storeDir);
    return { tokens: [token], minted: minted ? token : null };
  }

  private serveApi(auth: TokenAuth): void {
    const app = createApp({ auth, log: this.log, health: this, groups: this.groups });
    this.server = Bun.serve({ hostname: this.config.api.host, port: this.config.api.port, fetch: app.fetch });
    this.log.info("api_listening", { url: this.apiUrl });
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

  /** Registers teardown work run (in reverse order) before the connection and sidecar stop. */
  onStop(fn: () => Promise<void> | void): void {
    this.stopCallbacks.push(fn);
  }

  /** Graceful stop: drain what the node holds, then the connection, then the sidecar. */
  stop(code = EXIT_OK, reason = "requested"): Promise<number> {
    this.stopping ??= this.shutdown(code, reason);
    return this.stopping;
  }

  private async shutdown(code: number, reason: string): Promise<number> {
    this.log.info("node_stopping", { reason });
    const budget = new AbortController();
    const timer = this.clock.setTimeout(() => budget.abort(), SHUTDOWN_BUDGET_MS);
    const step = async (name: string, fn: () => Promise<unknown> | unknown) => {
      if (budget.signal.aborted) return;
      try {
        await fn();
      } catch (err) {
        this.log.warn("node_stop_step_failed", { step: name, error: err as Error });
      }
    };
    for (const fn of [...this.stopCallbacks].reverse()) await step("component", fn);
    await step("api", () => this.server?.stop(true));
    await step("nats", async () => {
      if (this.nc && !this.nc.isClosed()) await this.nc.drain();
    });
    await step("broker", () => this.broker?.stop());
    timer.cancel();
    this.lock?.release();
    this.log.info("node_stopped", { code, reason });
    this.resolveStopped(code);
    return code;
  }
}
