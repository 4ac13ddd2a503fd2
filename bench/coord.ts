// Coordination store figures (issue 4): acquire, renew and slot compare-and-set latency
// (median, p99) on one member (R1) and a 3-member cluster (R3); and what a gated seat
// claim costs with 10 vs 10,000 live seat leases in the bucket (target ratio ≤ 1.5: the
// gate judges from a watch-fed view, so its cost must not grow with the fleet).
// Prints numbers; never fails on time.  Run: bun bench/coord.ts
import { systemClock } from "../src/clock.ts";
import { createCoordination, type CoordinationHandle } from "../src/coord/index.ts";
import { silentLogger } from "../src/log.ts";
import { startNats } from "../test/support/nats.ts";

/** Samples per figure: enough for a stable p99 without making the bench slow. */
const SAMPLES = 400;
/** Long enough that 10,000 leases written up front are all still live while claims run. */
const BENCH_TTL_MS = 300_000;
/** Concurrent writers when filling the bucket: the fill is setup, not a figure. */
const FILL_CONCURRENCY = 64;

function stats(xs: number[]): { median: number; p99: number } {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  return { median: at(0.5), p99: at(0.99) };
}

const fmt = (ms: number) => `${ms.toFixed(3)} ms`;

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

function report(label: string, xs: number[]): void {
  const { median, p99 } = stats(xs);
  console.log(`${label.padEnd(44)} median ${fmt(median).padStart(10)}   p99 ${fmt(p99).padStart(10)}   (n=${xs.length})`);
}

async function open(nc: Parameters<typeof createCoordination>[0]["nc"], replicas: number): Promise<CoordinationHandle> {
  return createCoordination({ type: "embedded-kv", nc, replicas, lease_ttl_ms: BENCH_TTL_MS, clock: systemClock, log: silentLogger });
}

async function latencies(members: 1 | 3): Promise<void> {
  const nats = await startNats(members);
  const nc = await nats.connect({ name: "bench" });
  try {
    const c = await open(nc, members);
    const owner = "bench-node:1";
    const acquire: number[] = [];
    const renew: number[] = [];
    const cas: number[] = [];
    const epochs: number[] = [];
    for (let i = 0; i < SAMPLES; i++) {
      const key = `seat:lat-${i}`;
      let epoch = 0;
      acquire.push(
        await timed(async () => {
          const r = await c.leases.acquire(key, { owner, preferred: "bench-node", ttl_ms: BENCH_TTL_MS });
          if (!r.ok) throw new Error(`acquire: ${JSON.stringify(r)}`);
          epoch = r.lease.epoch;
        }),
      );
      epochs.push(epoch);
    }
    for (let i = 0; i < SAMPLES; i++) {
      renew.push(
        await timed(async () => {
          const r = await c.leases.renew(`seat:lat-${i}`, owner, epochs[i]!);
          if (r.status !== "renewed") throw new Error(`renew: ${JSON.stringify(r)}`);
        }),
      );
    }
    const slot = c.slot("ledger");
    let rev = await slot.create("bench-cas", new TextEncoder().encode("0"));
    for (let i = 0; i < SAMPLES; i++) {
      cas.push(await timed(async () => void (rev = await slot.update("bench-cas", new TextEncoder().encode(String(i)), rev))));
    }
    const tag = members === 1 ? "R1" : "R3";
    report(`${tag} acquire (three-write claim)`, acquire);
    report(`${tag} renew`, renew);
    report(`${tag} slot compare-and-set (update@revision)`, cas);
    await c.close();
  } finally {
    await nc.close();
    await nats.stop();
  }
}

async function fill(c: CoordinationHandle, count: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= count) return;
      const r = await c.leases.acquire(`seat:held-${i}`, { owner: "peer-node:1", preferred: "peer-node", ttl_ms: BENCH_TTL_MS });
      if (!r.ok) throw new Error(`fill: ${JSON.stringify(r)}`);
    }
  };
  await Promise.all(Array.from({ length: FILL_CONCURRENCY }, worker));
}

async function claimCost(members: 1 | 3, held: number): Promise<{ first: number; median: number; p99: number; taken_in: number }> {
  const nats = await startNats(members);
  const peerNc = await nats.connect({ name: "bench-peer" });
  const nc = await nats.connect({ name: "bench-claimer" });
  try {
    const peer = await open(peerNc, members);
    await fill(peer, held);
    const c = await open(nc, members);
    const claim = (i: number) =>
      timed(async () => {
        const r = await c.leases.acquire(`seat:free-${i}`, { owner: "claimer:1", preferred: "claimer", ttl_ms: BENCH_TTL_MS, gate: true });
        if (!r.ok) throw new Error(`claim: ${JSON.stringify(r)}`);
      });
    const first = await claim(-1); // starts the view: takes in every lease once
    const xs: number[] = [];
    for (let i = 0; i < SAMPLES; i++) xs.push(await claim(i));
    const taken_in = c.gate.taken_in;
    await c.close();
    await peer.close();
    return { first, ...stats(xs), taken_in };
  } finally {
    await nc.close();
    await peerNc.close();
    await nats.stop();
  }
}

console.log(`coordination bench — nats-server from CREWLET_NATS_SERVER or the pinned build, loopback, ${SAMPLES} samples per figure\n`);
await latencies(1);
await latencies(3);
console.log("");
for (const members of [1, 3] as const) {
  const small = await claimCost(members, 10);
  const large = await claimCost(members, 10_000);
  const tag = members === 1 ? "R1" : "R3";
  for (const [n, r] of [
    [10, small],
    [10_000, large],
  ] as const) {
    console.log(
      `${tag} gated seat claim, ${String(n).padStart(6)} live seat leases  median ${fmt(r.median).padStart(10)}   p99 ${fmt(r.p99).padStart(10)}   first claim (view start) ${fmt(r.first)}   view took in ${r.taken_in}`,
    );
  }
  console.log(`${tag} claim cost ratio 10,000 : 10 (median) = ${(large.median / small.median).toFixed(2)}  (target ≤ 1.5)\n`);
}
