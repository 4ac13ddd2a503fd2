// A seat drain is bounded (SeatHost.drain(within_ms)): a lease store that answers nothing —
// a fleet without quorum, every member stopped at once — cannot take the releases, and the
// drain gives up at its bound, naming each seat it leaves (seat_release_abandoned, with what
// was left) instead of waiting on the store. The leases it leaves lapse at their TTL and
// peers claim them. In-memory store with injected faults, FakeClock.
import { afterEach, expect, test } from "bun:test";
import { Fleet } from "./fleet.ts";
import { seatKey } from "../../src/seat/presence.ts";
import { SWEEP_INTERVAL_MS } from "../../src/seat/placement.ts";

/** The shipped TTL: a heartbeat (15 s) longer than the drain's bound, so the bound decides. */
const TTL = 45_000;
const DRAIN_WITHIN_MS = 5_000;
const seats = (n: number) => Array.from({ length: n }, (_, i) => ({ handle: `s${String(i + 1).padStart(2, "0")}` }));

let fleet: Fleet | null = null;
afterEach(async () => {
  await fleet?.stopAll();
  fleet = null;
});

async function oneNodeHoldingThree() {
  fleet = new Fleet({ ttl_ms: TTL, seats: seats(3) });
  await fleet.init();
  const a = await fleet.addNode({ id: "a" });
  await fleet.advance(1_000);
  expect(a.host.held().sort()).toEqual(["s01", "s02", "s03"]);
  return { f: fleet, a };
}

/** Drains `within_ms`, moving time until the drain resolves; returns the time it took on the clock. */
async function drainOnClock(f: Fleet, node: { host: { drain(ms: number): Promise<void> } }, within_ms: number, give_up_after_ms = 60_000): Promise<number> {
  const started = f.clock.now();
  let done = false;
  const drained = node.host.drain(within_ms).then(() => (done = true));
  for (let t = 0; t < give_up_after_ms && !done; t += 100) await f.advance(100);
  await drained;
  return f.clock.now() - started;
}

test("a drain whose lease store answers nothing gives up at its bound and names every seat it left", async () => {
  const { f, a } = await oneNodeHoldingThree();
  a.faults.unreachable = true;
  const took_ms = await drainOnClock(f, a, DRAIN_WITHIN_MS);
  expect(took_ms).toBeLessThanOrEqual(DRAIN_WITHIN_MS + 100);
  const abandoned = a.sink.events("seat_release_abandoned").map((l) => l.fields);
  expect(abandoned.map((x) => x.seat).sort()).toEqual(["s01", "s02", "s03"]);
  // Each was detached (nothing runs under it) and its give-back went unanswered.
  expect(abandoned.every((x) => x.left === "lease_release_unanswered" && x.lapses_within_ms === TTL)).toBe(true);
  expect(a.sink.events("seat_detached").filter((l) => l.fields.reason === "drain")).toHaveLength(3);
  const finished = a.sink.events("seat_drain_finished").map((l) => l.fields);
  expect(finished).toHaveLength(1);
  expect(finished[0]).toMatchObject({ released: [], undead: [] });
  expect((finished[0]!.abandoned as string[]).sort()).toEqual(["s01", "s02", "s03"]);

  // The leases it left are still a's (unknown ownership is never ownership)…
  for (const h of ["s01", "s02", "s03"]) expect((await f.truth.get(seatKey(h)))?.owner).toBe(a.host.owner);
  await a.host.stop();
  // …until they lapse at their TTL, and a peer claims each.
  const b = await f.addNode({ id: "b" });
  await f.advance(TTL + 2 * SWEEP_INTERVAL_MS);
  expect(b.host.held().sort()).toEqual(["s01", "s02", "s03"]);
});

test("a drain whose store hangs (no answer, not even an error) still ends at its bound and names every seat", async () => {
  const { f, a } = await oneNodeHoldingThree();
  // Every call waits ten minutes: the presence give-up the drain starts with never returns.
  a.faults.slow_ms = 10 * 60_000;
  const took_ms = await drainOnClock(f, a, DRAIN_WITHIN_MS);
  expect(took_ms).toBeLessThanOrEqual(DRAIN_WITHIN_MS + 100);
  const abandoned = a.sink.events("seat_release_abandoned").map((l) => l.fields);
  expect(abandoned.map((x) => x.seat).sort()).toEqual(["s01", "s02", "s03"]);
  expect(abandoned.every((x) => typeof x.left === "string" && x.left !== "lease_release_unanswered")).toBe(true);
  expect(a.sink.events("seat_drain_finished")[0]?.fields.released).toEqual([]);
});

test("with a store that answers, the bound changes nothing: every seat released, none abandoned", async () => {
  const { f, a } = await oneNodeHoldingThree();
  await drainOnClock(f, a, DRAIN_WITHIN_MS);
  expect(a.sink.events("seat_release_abandoned")).toEqual([]);
  const finished = a.sink.events("seat_drain_finished")[0]!.fields;
  expect((finished.released as string[]).sort()).toEqual(["s01", "s02", "s03"]);
  expect(finished.abandoned).toEqual([]);
  for (const h of ["s01", "s02", "s03"]) expect(await f.truth.get(seatKey(h))).toBeNull();
});
