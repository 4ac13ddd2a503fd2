// The rolling upgrade: a 3-member fleet where one member still runs the previous sidecar
// release (appliance/sidecar.json `previous`, built the same way and cached by
// scripts/setup.sh --tests) joins, hosts its replicas and serves the queue and the lease
// store beside two members on the current release; then it is stopped and started again
// on the same store with the current release (the binary swap), and everything it held
// and served is still there, with nothing lost while it was away.
import { afterAll, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { connect, type NatsConnection } from "nats";
import { binaryFromSource } from "../../src/broker/binary.ts";
import { hostArch } from "../../src/broker/elf.ts";
import { startBroker, type MemberPlan, type RunningBroker } from "../../src/broker/index.ts";
import { cachedSidecarPath, sidecarManifest } from "../../src/broker/manifest.ts";
import { systemClock } from "../../src/clock.ts";
import { createCoordination, type CoordinationHandle } from "../../src/coord/index.ts";
import { memoryLogger, silentLogger } from "../../src/log.ts";
import { ack, type Delivery } from "../../src/queue/contract.ts";
import { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { mailbox, mailboxStream } from "../../src/queue/topics.ts";
import { clusterPlans, tempStore } from "./fixtures/plans.ts";
import { whileForming } from "../support/forming.ts";

/** Generous: real sidecars elect and catch up in seconds; a loaded 2-core box is slower. */
const WITHIN_MS = 30_000;
/** Lease TTL for the coordination store here: long enough that nothing lapses mid-test. */
const LEASE_TTL_MS = 30_000;

const root = tempStore("crewlet-mixed-");
const brokers = new Map<string, RunningBroker>();
const conns: NatsConnection[] = [];
const coords: CoordinationHandle[] = [];
const queues: JetStreamQueue[] = [];
afterAll(async () => {
  for (const c of coords) await c.close().catch(() => undefined);
  for (const q of queues) await q.close().catch(() => undefined);
  for (const nc of conns) await nc.close().catch(() => undefined);
  await Promise.all([...brokers.values()].map((b) => b.stop()));
  rmSync(root, { recursive: true, force: true });
});

function versionOf(bin: string): string {
  const m = /v?(\d+\.\d+\.\d+)/.exec(execFileSync(bin, ["--version"]).toString());
  if (!m) throw new Error(`${bin} --version printed no version`);
  return m[1]!;
}

async function eventually<T>(what: string, fn: () => Promise<T | null>): Promise<T> {
  const deadline = Date.now() + WITHIN_MS;
  let last: unknown = null;
  for (;;) {
    try {
      const v = await fn();
      if (v !== null) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${WITHIN_MS} ms${last ? ` (${String(last)})` : ""}`);
    await Bun.sleep(200);
  }
}

/** Starts one member on the given nats-server binary (CREWLET_NATS_SERVER is how a source run picks one). */
async function startMember(plan: MemberPlan, binary: string): Promise<RunningBroker> {
  const before = process.env.CREWLET_NATS_SERVER;
  process.env.CREWLET_NATS_SERVER = binary;
  try {
    const { log } = memoryLogger("info");
    const broker = await startBroker(plan, { log: log.child({ node: plan.nodeId }), clock: systemClock });
    brokers.set(plan.nodeId, broker);
    return broker;
  } finally {
    if (before === undefined) delete process.env.CREWLET_NATS_SERVER;
    else process.env.CREWLET_NATS_SERVER = before;
  }
}

async function varz(b: RunningBroker): Promise<{ version: string; server_name: string }> {
  return (await (await fetch(`${b.monitorUrl}/varz`)).json()) as { version: string; server_name: string };
}

async function nodeOn(b: RunningBroker, name: string): Promise<{ nc: NatsConnection; queue: JetStreamQueue; coord: CoordinationHandle }> {
  const nc = await connect({ servers: b.clientUrls, ...b.connectAuth, name });
  conns.push(nc);
  // Ready is this member's own JetStream; a forming cluster's meta leader may come a moment
  // later (a node treats those first refusals as retries, as here).
  await eventually(`JetStream through ${name}`, async () => ((await (await nc.jetstreamManager({ timeout: 2_000 })).getAccountInfo()) ? true : null));
  const queue = new JetStreamQueue({ nc, replicas: 3, clock: systemClock, log: silentLogger });
  queues.push(queue);
  const coord = await whileForming(() => createCoordination({ type: "embedded-kv", nc, replicas: 3, lease_ttl_ms: LEASE_TTL_MS, clock: systemClock, log: silentLogger }));
  coords.push(coord);
  return { nc, queue, coord };
}

/** Every replica of `stream` is current, the member `name` among them. */
async function replicaCurrentOn(nc: NatsConnection, stream: string, name: string): Promise<true | null> {
  const info = await (await nc.jetstreamManager({ timeout: 5_000 })).streams.info(stream);
  const c = info.cluster;
  if (!c?.leader) return null;
  if (c.leader === name) return true;
  return c.replicas?.some((r) => r.name === name && r.current) ? true : null;
}

test("a member on the previous release joins and serves, then is swapped to the current one", async () => {
  const manifest = sidecarManifest();
  const previous = cachedSidecarPath(manifest.previous.version, hostArch());
  expect(existsSync(previous)).toBe(true); // scripts/setup.sh --tests builds it
  expect(versionOf(previous)).toBe(manifest.previous.version);
  const current = binaryFromSource().path;
  const currentVersion = versionOf(current);
  expect(currentVersion).not.toBe(manifest.previous.version);

  const plans = await clusterPlans(root, 3, "mixed-cluster-secret", "mixed-leaf-secret");
  const [p1, p2, p3] = plans as [MemberPlan, MemberPlan, MemberPlan];
  const m1 = await startMember(p1, current);
  const m2 = await startMember(p2, current);
  let m3 = await startMember(p3, previous);
  await Promise.all([m1.ready, m2.ready, m3.ready]);
  expect((await varz(m3)).version).toBe(manifest.previous.version);
  expect((await varz(m1)).version).toBe(currentVersion);

  // A node on the old member sets up the queue's streams and the lease buckets, R3 across
  // all three; a node on a new member works the same stores.
  const old = await nodeOn(m3, "node-on-previous");
  await whileForming(() => old.queue.ensureStreams());
  const fresh = await nodeOn(m1, "node-on-current");
  for (const stream of [mailboxStream("mixed"), "KV_crewlet_leases"]) {
    await eventually(`${stream}'s replica on the previous-release member is current`, () => replicaCurrentOn(old.nc, stream, p3.nodeId));
  }

  // Mail published through the new member is consumed through the old one, and the reverse.
  const inbox = mailbox("mixed", "inbox");
  await old.queue.ensureMailbox(inbox.subject, inbox.group);
  const got: string[] = [];
  const attached = await old.queue.attach(inbox.subject, inbox.group, async (d: Delivery) => (got.push(new TextDecoder().decode(d.data)), ack()));
  await fresh.queue.publish(inbox.subject, new TextEncoder().encode("from-current"));
  await eventually("mail through the current member reaches the node on the previous one", async () => (got.includes("from-current") ? true : null));
  await attached.detach();

  // Leases: one claimed through the old member is refused to a claimant on a new member.
  const held = await old.coord.leases.acquire("seat:mixed", { owner: "old-node:a", preferred: "old-node", ttl_ms: old.coord.lease_ttl_ms });
  if (!held.ok) throw new Error(`claim through the previous-release member failed: ${JSON.stringify(held)}`);
  const refused = await fresh.coord.leases.acquire("seat:mixed", { owner: "new-node:b", preferred: "new-node", ttl_ms: fresh.coord.lease_ttl_ms });
  expect(refused).toMatchObject({ ok: false, rule: "held", holder: "old-node:a" });

  // The swap: the old member stops gracefully (its streams' leaderships handed off first,
  // as a draining node does) and comes back on the same store with the current release.
  await old.queue.handOffLeaderships(p3.nodeId);
  for (const c of coords.splice(coords.indexOf(old.coord), 1)) await c.close();
  for (const q of queues.splice(queues.indexOf(old.queue), 1)) await q.close();
  await old.nc.close();
  await m3.stop();
  brokers.delete(p3.nodeId);

  // Two of three keep serving while it is away: writes land.
  await fresh.queue.publish(inbox.subject, new TextEncoder().encode("while-swapping"));
  const renewed = await fresh.coord.leases.get("seat:mixed");
  expect(renewed?.owner).toBe("old-node:a");

  m3 = await startMember(p3, current);
  await m3.ready;
  expect((await varz(m3)).version).toBe(currentVersion);
  const back = await nodeOn(m3, "node-on-swapped");
  for (const stream of [mailboxStream("mixed"), "KV_crewlet_leases"]) {
    await eventually(`${stream}'s replica on the swapped member is current`, () => replicaCurrentOn(back.nc, stream, p3.nodeId));
  }

  // What it held is still held, with the same epoch, and the mail sent while it was away
  // (and nothing else) is waiting in the mailbox for the next attach on the swapped member.
  const lease = await back.coord.leases.get("seat:mixed");
  expect(lease).toMatchObject({ owner: "old-node:a", epoch: held.lease.epoch });
  const after: string[] = [];
  const again = await back.queue.attach(inbox.subject, inbox.group, async (d: Delivery) => (after.push(new TextDecoder().decode(d.data)), ack()));
  await eventually("the mail sent during the swap reaches the swapped member's node", async () => (after.includes("while-swapping") ? true : null));
  await again.detach();
  expect(after).toEqual(["while-swapping"]);
}, 180_000);
