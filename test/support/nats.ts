// Real nats-servers (JetStream on) on 127.0.0.1 for tests, each in its own temp dir: one
// member, or an N-member cluster. The sidecar code in src/broker/ is what a node uses; this
// is the plain harness the contract suites run on, so a broker bug and a contract bug fail
// different tests.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type ConnectionOptions, type NatsConnection } from "nats";
import { binaryFromSource } from "../../src/broker/binary.ts";
import { boundsConcurrentIo, liftsConsumerCap, MAX_CONCURRENT_IO } from "../../src/broker/nats-config.ts";
import { freePort } from "./ports.ts";

/** The same server a node run from source uses: CREWLET_NATS_SERVER, else the pinned build. */
export function natsServerBinary(): string {
  return binaryFromSource().path;
}

/** Generous: a 3-member cluster elects its meta leader in about a second on 2 cores. */
const HEALTHY_WITHIN_MS = 20_000;

export interface TestMember {
  name: string;
  url: string;
  port: number;
  monitor: number;
  dir: string;
  proc: ReturnType<typeof Bun.spawn>;
  /** SIGKILL this member (the rest of the cluster carries on). */
  kill(): Promise<void>;
  /** Start it again on the same ports and store. */
  restart(): Promise<void>;
}

export interface TestNats {
  /** Client URL of the first member (all members for cluster: see urls). */
  url: string;
  urls: string[];
  port: number;
  dir: string;
  members: TestMember[];
  connect(opts?: Partial<ConnectionOptions>): Promise<NatsConnection>;
  stop(): Promise<void>;
}

async function waitHealthy(monitor: number, what: string): Promise<void> {
  const deadline = Date.now() + HEALTHY_WITHIN_MS;
  for (;;) {
    try {
      const res = await fetch(`http://127.0.0.1:${monitor}/healthz`);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${what} did not become healthy in ${HEALTHY_WITHIN_MS} ms`);
    await Bun.sleep(25);
  }
}

/**
 * Waits until the cluster's meta leader sees every other member current. /healthz answers
 * ok before the routes have all formed, and an R3 stream created then is refused "no
 * suitable peers for placement, peer offline" (a coordination conformance setup, 1 run in
 * 80 on a loaded box).
 */
async function waitFormed(monitors: number[], size: number): Promise<void> {
  type Meta = { meta_cluster?: { leader?: string; cluster_size?: number; replicas?: { name: string; current: boolean; offline?: boolean }[] } };
  const deadline = Date.now() + HEALTHY_WITHIN_MS;
  for (;;) {
    for (const monitor of monitors) {
      try {
        const jsz = (await (await fetch(`http://127.0.0.1:${monitor}/jsz`)).json()) as Meta;
        const meta = jsz.meta_cluster;
        const peers = (meta?.replicas ?? []).filter((r) => r.current && !r.offline);
        if (meta?.leader && meta.cluster_size === size && peers.length === size - 1) return;
      } catch {
        // not answering yet
      }
    }
    if (Date.now() > deadline) throw new Error(`nats cluster of ${size} did not form in ${HEALTHY_WITHIN_MS} ms`);
    await Bun.sleep(25);
  }
}

interface MemberPlan {
  name: string;
  port: number;
  monitor: number;
  clusterPort: number | null;
  dir: string;
}

function renderConf(m: MemberPlan, routes: number[], serverVersion: string | null): string {
  // The same consumer cap lift and disk-call bound as the node's own config (see
  // liftsConsumerCap, boundsConcurrentIo): a bench walking thousands of mailboxes here
  // measures the broker the node runs.
  const limits = liftsConsumerCap(serverVersion) ? ", limits: { default_max_consumers: -1 }" : "";
  const io = boundsConcurrentIo(serverVersion) ? `, max_concurrent_io: ${MAX_CONCURRENT_IO}` : "";
  const lines = [
    `server_name: "${m.name}"`,
    `listen: "127.0.0.1:${m.port}"`,
    `http: "127.0.0.1:${m.monitor}"`,
    `jetstream { store_dir: "${join(m.dir, "js")}", max_mem: 256MB, max_file: 1GB${limits}${io} }`,
  ];
  if (m.clusterPort !== null) {
    const r = routes.filter((p) => p !== m.clusterPort).map((p) => `"nats-route://127.0.0.1:${p}"`);
    lines.push(`cluster { name: "crewlet-test", listen: "127.0.0.1:${m.clusterPort}", routes: [${r.join(", ")}] }`);
  }
  return lines.join("\n") + "\n";
}

function spawnMember(m: MemberPlan): ReturnType<typeof Bun.spawn> {
  return Bun.spawn([natsServerBinary(), "-c", join(m.dir, "nats.conf")], { stdout: "ignore", stderr: "ignore" });
}

/** Starts `size` members (1 = a single server, no cluster block). */
export async function startNats(size = 1): Promise<TestNats> {
  const root = mkdtempSync(join(tmpdir(), "crewlet-nats-"));
  const plans: MemberPlan[] = [];
  for (let i = 0; i < size; i++) {
    plans.push({
      name: `m${i + 1}`,
      port: await freePort(),
      monitor: await freePort(),
      clusterPort: size > 1 ? await freePort() : null,
      dir: join(root, `m${i + 1}`),
    });
  }
  const routes = plans.map((p) => p.clusterPort ?? 0);
  const serverVersion = binaryFromSource().version;
  const members: TestMember[] = plans.map((plan) => {
    Bun.spawnSync(["mkdir", "-p", plan.dir]);
    writeFileSync(join(plan.dir, "nats.conf"), renderConf(plan, routes, serverVersion));
    const member: TestMember = {
      name: plan.name,
      url: `nats://127.0.0.1:${plan.port}`,
      port: plan.port,
      monitor: plan.monitor,
      dir: plan.dir,
      proc: spawnMember(plan),
      async kill() {
        member.proc.kill("SIGKILL");
        await member.proc.exited;
      },
      async restart() {
        member.proc = spawnMember(plan);
        await waitHealthy(plan.monitor, `nats member ${plan.name}`);
      },
    };
    return member;
  });
  try {
    await Promise.all(members.map((m) => waitHealthy(m.monitor, `nats member ${m.name}`)));
    if (size > 1) await waitFormed(members.map((m) => m.monitor), size);
  } catch (err) {
    for (const m of members) m.proc.kill("SIGKILL");
    rmSync(root, { recursive: true, force: true });
    throw err;
  }
  const urls = members.map((m) => m.url);
  return {
    url: urls[0]!,
    urls,
    port: members[0]!.port,
    dir: root,
    members,
    connect: (opts) => connect({ servers: urls, reconnect: size > 1, maxReconnectAttempts: -1, reconnectTimeWait: 100, ...opts }),
    async stop() {
      for (const m of members) m.proc.kill("SIGKILL");
      await Promise.all(members.map((m) => m.proc.exited));
      rmSync(root, { recursive: true, force: true });
    },
  };
}
