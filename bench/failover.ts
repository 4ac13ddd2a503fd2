// Seat failover figures (issue 5). Prints numbers; never fails on time.
//
//   1. kill -9 of a member → all seats held again, at the shipped TTL (45 s) and at 3 s
//   2. graceful drain (SIGTERM) → its seats held elsewhere
//   3. restart of a killed member on its own store → its seats held by it again (the
//      store-dir lock lets it take over its predecessor's live leases)
//   4. messages an idle node receives per sweep in a full fleet of 2,000 seats
//
// 1–3 run real `crewlet run` processes: three members, R3, embedded-kv, twelve seats. The
// end state is read from GET /fleet; each figure is from the fault to the last of the
// moved seats' seat_claimed lines in the nodes' logs (one machine, one clock). 4 runs in-process
// SeatHosts on one real nats-server with real JetStream KV coordination, each host on its
// own NATS connection whose inbound message count is read from the client's stats: 2,000
// seats are more than a machine runs as processes, and what is counted is the traffic a
// node's seat host draws, not what the processes around it cost.
//
// Run: bun bench/failover.ts            (all; about four minutes)
//      bun bench/failover.ts --quick    (skips the TTL 45 s fleet)
//      bun bench/failover.ts --only idle | --only processes
//      bun bench/failover.ts --only idle --holders 1   (the Go edition's two-node shape)
//      (--holders: 50 by default, a divisor of the 2,000 seats)
import type { NatsConnection } from "nats";
import { z } from "zod";
import { benchArgs, wholeFlag } from "./args.ts";
import { systemClock } from "../src/clock.ts";
import { createCoordination } from "../src/coord/index.ts";
import { silentLogger } from "../src/log.ts";
import { ack } from "../src/queue/contract.ts";
import { JetStreamQueue } from "../src/queue/jetstream.ts";
import { SeatHost } from "../src/seat/host.ts";
import { heartbeatMs, SWEEP_INTERVAL_MS, type SeatSpec } from "../src/seat/placement.ts";
import { makeFleet, type Fleet, type FleetNode } from "../test/support/fleet.ts";
import { startNats } from "../test/support/nats.ts";

/** The idle-node figure's fleet (4): seats shared out among the --holders. */
const FLEET_SEATS = 2_000;

const args = benchArgs(
  "failover",
  "[--quick] [--only idle|processes (default: both)] [--holders 50]",
  z.object({
    quick: z.boolean().default(false),
    only: z.enum(["idle", "processes"]).optional(),
    holders: wholeFlag(1, FLEET_SEATS)
      .refine((h) => FLEET_SEATS % h === 0, `a divisor of ${FLEET_SEATS} (each holder the same share)`)
      .default(50),
  }),
  ["quick"],
);

const POLL_MS = 100;
const SEATS = 12;

interface Lease {
  handle: string;
  node: string;
  epoch: number;
  /** Store time left when /fleet was read. */
  expires_in_ms: number;
}

async function leases(n: FleetNode): Promise<Lease[] | null> {
  try {
    const res = await n.get("/fleet");
    if (!res.ok) return null;
    return ((await res.json()) as { leases: Lease[] }).leases;
  } catch {
    return null;
  }
}

/** Seconds from `t0` until `ok` holds for the observer's lease list; bounded by `limit_ms`. */
async function until(observer: FleetNode, t0: number, limit_ms: number, ok: (ls: Lease[]) => boolean): Promise<number> {
  while (Date.now() - t0 < limit_ms) {
    const ls = await leases(observer);
    if (ls && ok(ls)) return (Date.now() - t0) / 1000;
    await Bun.sleep(POLL_MS);
  }
  throw new Error(`not within ${limit_ms} ms`);
}

/**
 * Seconds from `t0` to the last of these seats' claims (the first claim of each after t0),
 * from the nodes' own log stamps: /fleet reads the leases bucket's stream leader, and a
 * member leaving moves leaders, so polling it would time the read outage, not the move.
 */
function lastClaim(fleet: Fleet, handles: string[], t0: number, by?: string): number {
  const first = new Map<string, number>();
  for (const n of fleet.nodes) {
    if (by && n.id !== by) continue;
    for (const e of n.eventsEver("seat_claimed")) {
      const at = Date.parse(String(e.ts));
      const h = String(e.seat);
      if (at < t0 || !handles.includes(h)) continue;
      first.set(h, Math.min(first.get(h) ?? Number.POSITIVE_INFINITY, at));
    }
  }
  if (handles.some((h) => !first.has(h))) throw new Error(`no claim logged for some of ${handles.join(", ")}`);
  return (Math.max(...first.values()) - t0) / 1000;
}

const heldBy = (ids: string[]) => (ls: Lease[]) => ls.length === SEATS && ls.every((l) => ids.includes(l.node));
const balanced = (ls: Lease[]) => {
  if (ls.length !== SEATS) return false;
  const counts = ["a", "b", "c"].map((id) => ls.filter((l) => l.node === id).length);
  return Math.max(...counts) - Math.min(...counts) <= 1;
};

async function bootFleet(ttl_s: number): Promise<Fleet> {
  const roles = Array.from({ length: SEATS }, (_, i) => ({ name: `Agent ${i}`, handle: `agent-${i}` }));
  const fleet = await makeFleet({
    nodes: [{ id: "a", kind: "member" }, { id: "b", kind: "member" }, { id: "c", kind: "member" }],
    leaseTtlSeconds: ttl_s,
    company: { name: "Bench", roles },
  });
  await Promise.all(fleet.nodes.map((n) => n.start()));
  await Promise.all(fleet.nodes.map((n) => n.waitReady(60_000)));
  await until(fleet.node("a"), Date.now(), 90_000, balanced);
  return fleet;
}

/** Seconds from the kill to all held, and from the dead member's last seat lapse to all held
 * (the goal is TTL + 1 s from a kill right after a renewal: ~1 s after the lapse). */
async function killAndMeasure(fleet: Fleet, ttl_s: number): Promise<{ kill_s: number; after_lapse_s: number }> {
  const [a, b, c] = [fleet.node("a"), fleet.node("b"), fleet.node("c")];
  const handles = (await leases(a))!.filter((l) => l.node === "c").map((l) => l.handle);
  const t0 = Date.now();
  c.kill("SIGKILL");
  await c.exited();
  // Read after the kill, so no renewal can come after it: when its leases lapse.
  // A read the store did not answer (c led the leases stream: an election) is asked again.
  let t_read = Date.now();
  let seen = await leases(a);
  while (!seen && Date.now() - t0 < 15_000) {
    await Bun.sleep(POLL_MS);
    t_read = Date.now();
    seen = await leases(a);
  }
  const left = (seen ?? []).filter((l) => l.node === "c").map((l) => l.expires_in_ms);
  const lapse_at = left.length === handles.length ? t_read + Math.max(...left) : Number.NaN;
  await until(a, t0, ttl_s * 1000 + 60_000, heldBy([a.id, b.id]));
  const kill_s = lastClaim(fleet, handles, t0);
  return { kill_s, after_lapse_s: (t0 + kill_s * 1000 - lapse_at) / 1000 };
}

const afterLapse = (s: number) => (Number.isNaN(s) ? "its leases unread after the kill" : `${s.toFixed(1)} s after its last seat lease lapsed`);

async function processFigures(quick: boolean): Promise<void> {
  // TTL 45 s: drain, restart-reclaim, then kill -9 (each leaves the fleet whole for the next).
  if (!quick) {
    const fleet = await bootFleet(45);
    try {
      const [a, b, c] = [fleet.node("a"), fleet.node("b"), fleet.node("c")];
      const handles = (await leases(a))!.filter((l) => l.node === "c").map((l) => l.handle);
      const held = handles.length;
      let t0 = Date.now();
      c.kill("SIGTERM");
      await until(a, t0, 60_000, heldBy(["a", "b"]));
      const drain_s = lastClaim(fleet, handles, t0);
      await c.exited();
      console.log(`graceful drain (SIGTERM, ${held} seats) → all ${SEATS} held by the other two: ${drain_s.toFixed(1)} s   [TTL 45 s, sweep ${SWEEP_INTERVAL_MS / 1000} s]`);

      await c.start();
      await c.waitReady(60_000);
      await until(a, Date.now(), 120_000, balanced);
      const mine = (await leases(a))!.filter((l) => l.node === "c");
      t0 = Date.now();
      c.kill("SIGKILL");
      await c.exited();
      await c.start();
      await c.waitReady(60_000);
      const ready_s = (Date.now() - t0) / 1000;
      await until(a, t0, 120_000, (ls) => mine.every((m) => ls.some((l) => l.handle === m.handle && l.node === "c" && l.epoch > m.epoch)));
      const back_s = lastClaim(fleet, mine.map((m) => m.handle), t0, "c");
      console.log(
        `restart-reclaim (kill -9, restart on the same store, ${mine.length} seats): its seats held by it again ${back_s.toFixed(1)} s after the kill ` +
          `(${(back_s - ready_s).toFixed(1)} s after /ready; boot ${ready_s.toFixed(1)} s)   [TTL 45 s: without the lock, ≥ 45 s]`,
      );

      await until(a, Date.now(), 120_000, balanced);
      const { kill_s, after_lapse_s } = await killAndMeasure(fleet, 45);
      console.log(`kill -9 of a member → all ${SEATS} held again: ${kill_s.toFixed(1)} s, ${afterLapse(after_lapse_s)}   [TTL 45 s; bound TTL + 2 sweeps = 55 s]`);
    } finally {
      await fleet.stop();
    }
  }
  const fleet = await bootFleet(3);
  try {
    const { kill_s, after_lapse_s } = await killAndMeasure(fleet, 3);
    console.log(`kill -9 of a member → all ${SEATS} held again: ${kill_s.toFixed(1)} s, ${afterLapse(after_lapse_s)}   [TTL 3 s; bound TTL + 2 sweeps = 13 s]`);
  } finally {
    await fleet.stop();
  }
}

// ---- 2,000 seats: what an idle node draws per sweep ----------------------------------------

/** Holders sharing the 2,000 seats: 40 each by default, so the fleet fills in a few claim
 * rounds; --holders 1 is the Go edition's shape (one peer holding the seats, one idle node). */
const HOLDERS = args.holders;
/** Sweeps averaged over once the fleet is full and quiet. */
const MEASURED_SWEEPS = 12;
const SHIPPED_TTL_MS = 45_000;

interface BenchHost {
  host: SeatHost;
  nc: NatsConnection;
  close(): Promise<void>;
}

async function benchHost(connectNc: () => Promise<NatsConnection>, node_id: string, labels: Record<string, string>, seats: SeatSpec[]): Promise<BenchHost> {
  const nc = await connectNc();
  const coord = await createCoordination({ type: "embedded-kv", nc, replicas: 1, lease_ttl_ms: SHIPPED_TTL_MS, clock: systemClock, log: silentLogger });
  const queue = new JetStreamQueue({ nc, replicas: 1, clock: systemClock, log: silentLogger });
  const host = new SeatHost({
    node_id,
    roles: ["seats"],
    labels,
    broker: "external",
    leases: coord.leases,
    queue,
    clock: systemClock,
    log: silentLogger,
    lease_ttl_ms: () => coord.lease_ttl_ms,
    handler: async () => ack(),
    // The figure is coordination traffic; an inbox consumer per seat would add the queue's
    // idle pulls, which belong to the seats a node holds, not to the node being idle.
    attachInbox: false,
  });
  await host.start(seats);
  return {
    host,
    nc,
    async close() {
      await host.stop();
      await coord.close();
      await nc.close();
    },
  };
}

async function idleNodeFigure(): Promise<void> {
  const nats = await startNats(1);
  const hosts: BenchHost[] = [];
  try {
    const pool = { pool: "main" };
    const seats: SeatSpec[] = Array.from({ length: FLEET_SEATS }, (_, i) => ({ handle: `s-${i}`, placement: { labels: pool } }));
    const setup = await nats.connect();
    await new JetStreamQueue({ nc: setup, replicas: 1, clock: systemClock, log: silentLogger }).ensureStreams();
    await setup.close();
    for (let i = 0; i < HOLDERS; i++) hosts.push(await benchHost(() => nats.connect(), `h${String(i).padStart(2, "0")}`, pool, seats));
    // Fill directly (each holder its slice, as a long-settled fleet would be) instead of at
    // four claims a sweep, then let every presence row say so on its next heartbeat.
    const per = FLEET_SEATS / HOLDERS;
    const t_fill = Date.now();
    // A claim whose answer was lost is tried again, a bounded number of rounds.
    for (let round = 0; round < 3; round++) {
      await Promise.all(
        hosts.map((h, i) => Promise.all(Array.from({ length: per }, (_, j) => `s-${i * per + j}`).filter((x) => !h.host.held().includes(x)).map((x) => h.host.claim(x)))),
      );
    }
    const held = hosts.reduce((n, h) => n + h.host.held().length, 0);
    await Bun.sleep(heartbeatMs(SHIPPED_TTL_MS) + 2_000);
    // The idle node: a seats node no seat's placement matches, so it claims nothing and,
    // with the fleet full, reads nothing beyond the presence rows.
    const idle = await benchHost(() => nats.connect(), "idle", {}, seats);
    hosts.push(idle);
    const holder = hosts[0]!;
    await Bun.sleep(SWEEP_INTERVAL_MS * 2); // its first passes (gate, presence) out of the way
    const before = { idle: idle.nc.stats().inMsgs, holder: holder.nc.stats().inMsgs };
    await Bun.sleep(SWEEP_INTERVAL_MS * MEASURED_SWEEPS);
    const idle_per = (idle.nc.stats().inMsgs - before.idle) / MEASURED_SWEEPS;
    const holder_per = (holder.nc.stats().inMsgs - before.holder) / MEASURED_SWEEPS;
    const health = idle.host.health();
    console.log(
      `full fleet of ${FLEET_SEATS} seats (${held} held after a ${((Date.now() - t_fill) / 1000).toFixed(0)} s fill) on ${HOLDERS} in-process seat hosts + 1 idle, ` +
        `one nats-server, JetStream KV coordination, TTL 45 s:`,
    );
    console.log(`  idle node: ${idle_per.toFixed(1)} messages received per sweep (fleet_full=${health.fleet_full}, holds ${health.held.length})   [Go edition: 10]`);
    console.log(`  a holder of ${per} seats, for comparison: ${holder_per.toFixed(1)} messages per sweep (its renewals: ${per} every ${heartbeatMs(SHIPPED_TTL_MS) / 1000} s)`);
  } finally {
    for (const h of hosts) await h.close().catch(() => {});
    await nats.stop();
  }
}

if (args.only !== "processes") await idleNodeFigure();
if (args.only !== "idle") await processFigures(args.quick);
