// The coordination conformance suite on the in-memory twin, on a FakeClock: the shipped
// 45 s lease TTL is the real one, passed by advancing the clock. Plus what only the twin
// can show cheaply: the gate's view stops a minute after the last judgement.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { DEFAULT_LEASE_TTL_MS } from "../../src/coord/contract.ts";
import { GATE_VIEW_IDLE_MS } from "../../src/coord/gate.ts";
import { MemoryCoordination } from "../../src/coord/index.ts";
import { memoryLogger } from "../../src/log.ts";
import { coordConformance } from "../conformance/coord.ts";

coordConformance("in-memory twin (FakeClock)", async () => {
  const clock = new FakeClock();
  const { log } = memoryLogger("info", clock);
  const store = new MemoryCoordination({ clock, log, lease_ttl_ms: DEFAULT_LEASE_TTL_MS });
  return {
    clock,
    lease_ttl_ms: store.lease_ttl_ms,
    open: async (opts) => store.node(opts),
    elapse: (ms) => clock.advance(ms),
    teardown: async () => undefined,
  };
});

describe("in-memory twin: the gate's view", () => {
  test("runs while claiming, stops a minute after the last gate judgement, and takes in nothing after", async () => {
    const clock = new FakeClock();
    const { log } = memoryLogger("info", clock);
    // A TTL past the view's idle minute, so the first lease is still held when it ends.
    const store = new MemoryCoordination({ clock, log, lease_ttl_ms: 2 * GATE_VIEW_IDLE_MS });
    const node = store.node();
    const peer = store.node();
    const ttl_ms = store.lease_ttl_ms;
    expect(node.gate.running).toBe(false);
    const r = await node.leases.acquire("seat:alice", { owner: "n1:a", preferred: "n1", ttl_ms, gate: true });
    expect(r.ok).toBe(true);
    expect(node.gate.running).toBe(true);
    // A claim on a seat a peer holds judges no gate and so keeps nothing warm.
    await clock.advance(GATE_VIEW_IDLE_MS - 1000);
    const refused = await peer.leases.acquire("seat:alice", { owner: "n2:b", preferred: "n2", ttl_ms, gate: true });
    expect(refused).toMatchObject({ ok: false, rule: "held" });
    expect(peer.gate.running).toBe(false);
    await clock.advance(1001);
    expect(node.gate.running).toBe(false);
    const taken = node.gate.taken_in;
    await peer.leases.acquire("seat:bob", { owner: "n2:b", preferred: "n2", ttl_ms });
    await clock.advance(1);
    expect(node.gate.taken_in).toBe(taken);
  });
});
