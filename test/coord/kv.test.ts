// The coordination conformance suite on JetStream KV: one member (R1), and a 3-member
// cluster (R3) where the lease stream's leader is killed mid-suite (calls may turn
// `unknown` while a new leader is elected; exclusivity must hold). Short lease TTLs come
// in through options, never by editing constants. Plus what only the real store shows:
// bucket settings checked at boot, a peer's retention adopted, and `local` leases beside
// slots that still live in KV.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { NatsConnection } from "nats";
import { systemClock } from "../../src/clock.ts";
import { createCoordination } from "../../src/coord/index.ts";
import { whileForming } from "../support/forming.ts";
import { memoryLogger, silentLogger } from "../../src/log.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { coordConformance } from "../conformance/coord.ts";

/** Short enough that lapses cost the suite about a second each; long enough that a renew
 *  every third of it never misses on a loaded 2-core CI box. R3 writes go through raft. */
const TTL_MS = { 1: 1_000, 3: 2_000 } as const;
/** Per call: a stalled call is reported `unknown` after this long. */
const OP_TIMEOUT_MS = 2_000;

for (const members of [1, 3] as const) {
  coordConformance(`JetStream KV (${members === 1 ? "single member, R1" : "3-member cluster, R3, leader killed mid-suite"})`, async () => {
    const nats = await startNats(members);
    const conns: NatsConnection[] = [];
    const connect = async () => {
      const nc = await nats.connect({ name: `coord-${conns.length}` });
      conns.push(nc);
      return nc;
    };
    const { log } = memoryLogger("info");
    const lease_ttl_ms = TTL_MS[members];
    return {
      clock: systemClock,
      lease_ttl_ms,
      open: async (opts) => {
        const nc = await connect();
        return whileForming(() =>
          createCoordination({
            type: "embedded-kv",
            nc,
            replicas: members,
            lease_ttl_ms,
            clock: systemClock,
            log,
            protocol: opts?.protocol,
            faults: opts?.faults,
            op_timeout_ms: OP_TIMEOUT_MS,
          }),
        );
      },
      elapse: (ms) => Bun.sleep(ms),
      disrupt:
        members === 3
          ? async () => {
              const nc = await connect();
              const jsm = await nc.jetstreamManager({ timeout: OP_TIMEOUT_MS });
              const leader = (await jsm.streams.info("KV_crewlet_leases")).cluster?.leader;
              const victim = nats.members.find((m) => m.name === leader) ?? nats.members[1]!;
              await victim.kill();
            }
          : undefined,
      async teardown() {
        await Promise.all(conns.map((c) => c.close().catch(() => undefined)));
        await nats.stop();
      },
    };
  });
}

describe("JetStream KV: buckets at boot", () => {
  let nats: TestNats;
  const conns: NatsConnection[] = [];
  beforeAll(async () => {
    nats = await startNats(1);
  });
  afterAll(async () => {
    await Promise.all(conns.map((c) => c.close().catch(() => undefined)));
    await nats?.stop();
  });
  const connect = async () => {
    const nc = await nats.connect();
    conns.push(nc);
    return nc;
  };

  test("a peer's bucket retention is adopted and logged, and its lease TTL is the one this node runs with", async () => {
    const first = await createCoordination({ type: "embedded-kv", nc: await connect(), replicas: 1, lease_ttl_ms: 1_500, clock: systemClock, log: silentLogger });
    expect(first.lease_ttl_ms).toBe(1_500);
    const { log, sink } = memoryLogger("info");
    const second = await createCoordination({ type: "embedded-kv", nc: await connect(), replicas: 1, lease_ttl_ms: 45_000, clock: systemClock, log });
    expect(second.lease_ttl_ms).toBe(1_500);
    const mismatch = sink.events("bucket_retention_mismatch");
    expect(mismatch.map((l) => l.fields.bucket)).toEqual(["crewlet_leases"]);
    expect(mismatch[0]!.fields).toMatchObject({ wanted_ms: 45_000, found_ms: 1_500 });
    // Its claims run under the adopted TTL: the bucket would drop a longer one silently.
    const r = await second.leases.acquire("seat:x", { owner: "n2:a", preferred: "n2", ttl_ms: second.lease_ttl_ms });
    expect(r.ok).toBe(true);
    expect(second.leases.acquire("seat:y", { owner: "n2:a", preferred: "n2", ttl_ms: 45_000 })).rejects.toThrow(/age limit/);
    const jsm = await (await connect()).jetstreamManager();
    const info = await jsm.streams.info("KV_crewlet_leases");
    expect(info.config.allow_direct).toBe(false);
    expect(info.config.max_msgs_per_subject).toBe(1);
    expect((await jsm.streams.info("KV_crewlet_epochs")).config.max_age).toBe(0);
    expect((await jsm.streams.info("KV_crewlet_ledger")).config.max_age).toBe(7 * 24 * 3600 * 1e9);
    await first.close();
    await second.close();
  });

  test("the store's clock is read from the lease stream's leader without a write", async () => {
    const coord = await createCoordination({ type: "embedded-kv", nc: await connect(), replicas: 1, lease_ttl_ms: 1_500, clock: systemClock, log: silentLogger });
    const jsm = await (await connect()).jetstreamManager();
    await coord.leases.acquire("seat:clock", { owner: "n:a", preferred: "n", ttl_ms: 1_500 });
    const before = (await jsm.streams.info("KV_crewlet_leases")).state.last_seq;
    const local0 = Date.now();
    const reads = [];
    for (let i = 0; i < 5; i++) reads.push(await coord.leases.now());
    const local1 = Date.now();
    // Nothing was written: every sweep reads the clock, and a write would be replicated.
    expect((await jsm.streams.info("KV_crewlet_leases")).state.last_seq).toBe(before);
    // One box, one clock: each reading falls inside the calls that took it, in order.
    for (const t of reads) {
      expect(t).toBeGreaterThanOrEqual(local0 - 5);
      expect(t).toBeLessThanOrEqual(local1 + 5);
    }
    expect([...reads].sort((a, b) => a - b)).toEqual(reads);
    await coord.close();
  });

  test("coordination.type local keeps leases in the process while the slots live in KV", async () => {
    const nc = await connect();
    const jsm = await nc.jetstreamManager();
    await jsm.streams.delete("KV_crewlet_leases").catch(() => undefined);
    const local = await createCoordination({ type: "local", nc, replicas: 1, lease_ttl_ms: 3_000, clock: systemClock, log: silentLogger });
    const r = await local.leases.acquire("seat:solo", { owner: "n:a", preferred: "n", ttl_ms: 3_000 });
    expect(r.ok).toBe(true);
    expect(jsm.streams.info("KV_crewlet_leases")).rejects.toThrow();
    const peer = await createCoordination({ type: "local", nc, replicas: 1, lease_ttl_ms: 3_000, clock: systemClock, log: silentLogger });
    expect((await peer.leases.acquire("seat:solo", { owner: "m:b", preferred: "m", ttl_ms: 3_000 })).ok).toBe(true);
    const rev = await local.slot("config").put("current", new TextEncoder().encode("r1"));
    expect((await peer.slot("config").get("current"))?.revision).toBe(rev);
    await local.close();
    await peer.close();
  });
});
