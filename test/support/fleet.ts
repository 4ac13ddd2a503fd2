// Real `crewlet run` processes on 127.0.0.1 for fleet tests: each node its own store dir,
// ports and log file; members cluster with each other, leaves join a member's leaf port.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { stringify } from "yaml";
import { freePort } from "./ports.ts";
import { replicatedLeaseTtlFloorMs } from "../../src/coord/ttl.ts";

const MAIN = resolve(import.meta.dir, "../../src/main.ts");
/** Test token: fixed so the tests can call every route; ≥ 24 chars like any token. */
/**
 * CREWLET_FLEET_CPU_PROF=DIR runs each node from source under Bun's sampling profiler, one
 * profile (and its markdown digest) per node start in DIR, written when the process exits
 * on its own — including the watchdog's exit 75, which is what it is for: finding the work
 * that kept an event loop from turning. A node killed (SIGKILL, or a stop that outlasted
 * its bound) leaves none. Sampled every 10 ms, coarse enough for a loaded 2-core box.
 */
function profileFlags(id: string, start: number): string[] {
  const dir = process.env.CREWLET_FLEET_CPU_PROF;
  if (!dir) return [];
  return ["--cpu-prof", "--cpu-prof-md", `--cpu-prof-dir=${dir}`, `--cpu-prof-name=${id}-${start}.cpuprofile`, "--cpu-prof-interval=10000"];
}

export const TEST_TOKEN = "test-token-0123456789abcdef";

export interface NodeSpec {
  id: string;
  kind: "member" | "leaf";
  roles?: string[];
  labels?: Record<string, string>;
  /** This node's own company seed (else the fleet's). */
  company?: unknown;
}

export interface FleetNode {
  id: string;
  dir: string;
  configFile: string;
  apiUrl: string;
  apiPort: number;
  clientPort: number;
  monitorPort: number;
  clusterPort: number;
  leafPort: number;
  proc: ReturnType<typeof Bun.spawn> | null;
  logFile: string;
  start(): Promise<void>;
  waitReady(timeout_ms?: number): Promise<void>;
  /** SIGTERM and wait for the exit code. */
  stop(): Promise<number>;
  kill(signal?: NodeJS.Signals): void;
  exited(): Promise<number>;
  get(path: string): Promise<Response>;
  post(path: string, body: unknown): Promise<Response>;
  /** This incarnation's log (a restart starts a fresh one). */
  log(): string;
  events(name: string): Record<string, unknown>[];
  /** Every incarnation's log lines with this event, oldest incarnation first. */
  eventsEver(name: string): Record<string, unknown>[];
  /** How many times start() has run. */
  incarnations(): number;
  /** The log of incarnation `inc` (1-based; the last is the current node.log). */
  logOf(inc: number): string;
  /** The client credential of the sidecar's current boot, read from the config it was
   * given (a 0600 file in the node's store, readable by the user running the node). */
  natsAuth(): { user: string; pass: string };
}

export interface FleetOptions {
  nodes: NodeSpec[];
  leaseTtlSeconds?: number;
  company?: unknown;
  replicas?: number;
  env?: Record<string, string>;
  /**
   * The port peers dial for a member's cluster or leaf listener, in place of the listener
   * itself (a proxy the test owns, to cut connections). The member advertises it too, so
   * route and leaf gossip never hands out the listener behind it.
   */
  via?: (kind: "cluster" | "leaf", memberId: string, listenerPort: number) => Promise<number>;
  /** The nodes' log level (debug unless told: a 2,000-seat bench logs at info). */
  logLevel?: "debug" | "info";
  /** Tier A `testing` block (test-only shortenings); CREWLET_TESTING=1 is set with it. */
  testing?: Record<string, number>;
  /** A compiled crewlet binary to run (build.ts buildArch) instead of src/main.ts under bun. */
  binary?: string;
  /** API tokens beside the test token (e.g. one with fewer grants). */
  tokens?: { id: string; token: string; grants?: string[] }[];
  /** Leases in JetStream KV even on one node (a fleet of several always has them there). */
  kvCoordination?: boolean;
}

export interface Fleet {
  root: string;
  nodes: FleetNode[];
  node(id: string): FleetNode;
  stop(): Promise<void>;
}

export async function makeFleet(opts: FleetOptions): Promise<Fleet> {
  const root = mkdtempSync(join(tmpdir(), "crewlet-fleet-"));
  const members = opts.nodes.filter((n) => n.kind === "member");
  const ports = new Map<string, { api: number; client: number; monitor: number; cluster: number; leaf: number }>();
  // The kernel may hand a just-closed port out again, so one fleet's ports are kept distinct.
  const taken = new Set<number>();
  const distinctPort = async (): Promise<number> => {
    for (let i = 0; i < 100; i++) {
      const p = await freePort();
      if (!taken.has(p)) {
        taken.add(p);
        return p;
      }
    }
    throw new Error("no distinct free port after 100 tries");
  };
  for (const n of opts.nodes) {
    ports.set(n.id, { api: await distinctPort(), client: await distinctPort(), monitor: await distinctPort(), cluster: await distinctPort(), leaf: await distinctPort() });
  }
  const dial = new Map<string, { cluster: number; leaf: number }>();
  for (const m of members) {
    const p = ports.get(m.id)!;
    dial.set(m.id, opts.via ? { cluster: await opts.via("cluster", m.id, p.cluster), leaf: await opts.via("leaf", m.id, p.leaf) } : { cluster: p.cluster, leaf: p.leaf });
  }
  const fleetShape = opts.nodes.length > 1;
  // Tests run TTLs of a few seconds so failovers are quick; on a replicated lease bucket that
  // is below the election floor production refuses (config/checks.ts leaseTtlProblems).
  const short_ttl = (opts.leaseTtlSeconds ?? 45) * 1000 < replicatedLeaseTtlFloorMs();
  const testing = short_ttl || opts.testing ? { ...(short_ttl ? { lease_ttl_floor_seconds: 1 } : {}), ...opts.testing } : undefined;
  const nodes = opts.nodes.map((spec): FleetNode => {
    const p = ports.get(spec.id)!;
    const dir = join(root, spec.id);
    mkdirSync(dir, { recursive: true });
    const stream: Record<string, unknown> = { client_port: p.client, monitor_port: p.monitor };
    if (spec.kind === "member") {
      if (members.length > 1) {
        stream.cluster = {
          port: p.cluster,
          peers: members.filter((m) => m.id !== spec.id).map((m) => `127.0.0.1:${dial.get(m.id)!.cluster}`),
          ...(opts.via ? { advertise: `127.0.0.1:${dial.get(spec.id)!.cluster}` } : {}),
        };
        stream.replicas = opts.replicas ?? Math.min(3, members.length);
      }
      if (opts.nodes.some((n) => n.kind === "leaf")) stream.leaf = { port: p.leaf, ...(opts.via ? { advertise: `127.0.0.1:${dial.get(spec.id)!.leaf}` } : {}) };
    } else {
      stream.leaf = { urls: members.map((m) => `nats://127.0.0.1:${dial.get(m.id)!.leaf}`) };
    }
    const config: Record<string, unknown> = {
      node: { id: spec.id, roles: spec.roles ?? (spec.kind === "leaf" ? ["seats"] : undefined), labels: spec.labels },
      store: { dir: join(dir, "store"), scratch: spec.kind === "leaf" },
      stream,
      coordination: { type: fleetShape || opts.kvCoordination ? "embedded-kv" : "local", lease_ttl_seconds: opts.leaseTtlSeconds ?? 45 },
      api: { port: p.api, tokens: [{ id: "test", token: TEST_TOKEN }, ...(opts.tokens ?? [])] },
      logging: { level: opts.logLevel ?? "debug", format: "json", stderr: true },
      ...((spec.company ?? opts.company) ? { company: spec.company ?? opts.company } : {}),
      ...(testing ? { testing } : {}),
    };
    const configFile = join(dir, "crewlet.yaml");
    writeFileSync(configFile, stringify(JSON.parse(JSON.stringify(config))));
    const logFile = join(dir, "node.log");
    let started = 0;
    // A restart writes a fresh node.log; earlier incarnations' logs are kept beside it.
    const pastLog = (k: number) => join(dir, `node.${k}.log`);
    const parseEvents = (text: string, name: string) =>
      text
        .split("\n")
        .filter((l) => l.includes(`"event":"${name}"`))
        .map((l) => {
          try {
            return JSON.parse(l) as Record<string, unknown>;
          } catch {
            return {};
          }
        });
    const apiUrl = `http://127.0.0.1:${p.api}`;
    const node: FleetNode = {
      id: spec.id,
      dir,
      configFile,
      apiUrl,
      apiPort: p.api,
      clientPort: p.client,
      monitorPort: p.monitor,
      clusterPort: p.cluster,
      leafPort: p.leaf,
      proc: null,
      logFile,
      async start() {
        if (started > 0 && existsSync(logFile) && statSync(logFile).size > 0) renameSync(logFile, pastLog(started));
        started++;
        const out = Bun.file(logFile);
        node.proc = Bun.spawn(opts.binary ? [opts.binary, "run", configFile] : [process.execPath, ...profileFlags(spec.id, started), MAIN, "run", configFile], {
          stdout: "ignore",
          stderr: out,
          env: { ...process.env, ...opts.env, ...(testing ? { CREWLET_TESTING: "1" } : {}) },
        });
      },
      async waitReady(timeout_ms = 30_000) {
        const deadline = Date.now() + timeout_ms;
        for (;;) {
          try {
            const res = await fetch(`${apiUrl}/ready`);
            if (res.ok) return;
          } catch {
            // not listening yet
          }
          if (node.proc && node.proc.exitCode !== null) throw new Error(`${spec.id} exited ${node.proc.exitCode} before ready:\n${node.log().slice(-3000)}`);
          if (Date.now() > deadline) throw new Error(`${spec.id} not ready within ${timeout_ms} ms:\n${node.log().slice(-3000)}`);
          await Bun.sleep(50);
        }
      },
      async stop() {
        if (!node.proc || node.proc.exitCode !== null) return node.proc?.exitCode ?? 0;
        node.proc.kill("SIGTERM");
        return node.proc.exited;
      },
      kill(signal = "SIGKILL") {
        node.proc?.kill(signal);
      },
      exited() {
        return node.proc ? node.proc.exited : Promise.resolve(0);
      },
      get: (path) => fetch(`${apiUrl}${path}`, { headers: { authorization: `Bearer ${TEST_TOKEN}` } }),
      post: (path, body) =>
        fetch(`${apiUrl}${path}`, {
          method: "POST",
          headers: { authorization: `Bearer ${TEST_TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify(body),
        }),
      log() {
        try {
          return readFileSync(logFile, "utf8");
        } catch {
          return "";
        }
      },
      events(name) {
        return parseEvents(node.log(), name);
      },
      eventsEver(name) {
        const out: Record<string, unknown>[] = [];
        for (let k = 1; k < started; k++) {
          if (existsSync(pastLog(k))) out.push(...parseEvents(readFileSync(pastLog(k), "utf8"), name));
        }
        return [...out, ...node.events(name)];
      },
      incarnations: () => started,
      logOf(inc) {
        if (inc === started) return node.log();
        try {
          return readFileSync(pastLog(inc), "utf8");
        } catch {
          return "";
        }
      },
      natsAuth() {
        const conf = readFileSync(join(dir, "store", "broker", "nats-server.conf"), "utf8");
        // The node's own user is the first listed (the supervisors' follows it, limited).
        const m = /users: \[\s*\{ user: "([^"]+)", password: "([^"]+)" \}/.exec(conf);
        if (!m) throw new Error(`${spec.id}: no client credential in its nats-server.conf`);
        return { user: m[1]!, pass: m[2]! };
      },
    };
    return node;
  });
  return {
    root,
    nodes,
    node: (id) => nodes.find((n) => n.id === id) ?? (() => { throw new Error(`no node ${id}`); })(),
    async stop() {
      for (const n of nodes) if (n.proc && n.proc.exitCode === null) n.proc.kill("SIGKILL");
      await Promise.all(nodes.map((n) => n.proc?.exited));
      // Coding runs' supervisors outlive their nodes by design; the fleet's own go with it.
      killSupervisorsUnder(root);
      // CREWLET_KEEP_FLEET=1 keeps the stores and logs of a failing run to read afterwards.
      if (process.env.CREWLET_KEEP_FLEET === "1") console.error(`fleet kept at ${root}`);
      else rmSync(root, { recursive: true, force: true });
    },
  };
}

/** SIGKILLs every `crewlet sandbox-supervise` whose run dir is under `root` (its box dies with it). */
export function killSupervisorsUnder(root: string): number {
  let killed = 0;
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const argv = readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0");
      const at = argv.indexOf("sandbox-supervise");
      if (at >= 0 && argv[at + 1]?.startsWith(root)) {
        process.kill(Number(d), "SIGKILL");
        killed++;
      }
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return killed;
}

/**
 * Polls `probe` every 100 ms until it returns a value (not null or undefined). A probe that
 * throws (a node mid-restart or mid-drain not answering this instant) counts as not yet.
 * Past `within_ms` it throws naming what it waited for, with `explain()` (e.g. a log tail).
 */
export async function waitFor<T>(what: string, probe: () => Promise<T | null | undefined>, within_ms: number, explain?: () => string): Promise<T> {
  const deadline = Date.now() + within_ms;
  for (;;) {
    const v = await probe().catch(() => null);
    if (v !== null && v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${within_ms} ms${explain ? `\n${explain()}` : ""}`);
    await Bun.sleep(100);
  }
}
