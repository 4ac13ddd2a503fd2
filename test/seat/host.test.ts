import { afterEach, describe, expect, test } from "bun:test";
import { Fleet } from "./fleet.ts";
import { parsePresence, presenceKey, seatKey } from "../../src/seat/presence.ts";
import { SWEEP_INTERVAL_MS } from "../../src/seat/placement.ts";
import { INBOX_DRAIN_MAX } from "../../src/seat/host.ts";
import { LEASE_CALLS_IN_FLIGHT } from "../../src/seat/bounded-store.ts";
import { ack, type Delivery } from "../../src/queue/contract.ts";
import { LEASE_PROTOCOL, RENEW_PROBE_MS, StoreUnavailable } from "../../src/coord/contract.ts";
import { encodeLeaseKey } from "../../src/coord/bucket.ts";
import { isWrite } from "../../src/coord/faults.ts";

const TTL = 3_000; // heartbeat 1 s, sweep 5 s
const seats = (n: number, prefix = "s") => Array.from({ length: n }, (_, i) => ({ handle: `${prefix}${String(i + 1).padStart(2, "0")}` }));

let fleet: Fleet | null = null;
afterEach(async () => {
  await fleet?.stopAll();
  fleet = null;
});

async function makeFleet(n: number, opts: { ttl_ms?: number; turn_ms?: number } = {}) {
  fleet = new Fleet({ ttl_ms: opts.ttl_ms ?? TTL, seats: seats(n), turn_ms: opts.turn_ms });
  await fleet.init();
  return fleet;
}

describe("claiming and attaching", () => {
  test("one node claims every seat, four per pass, and runs their inboxes", async () => {
    const f = await makeFleet(10);
    const a = await f.addNode({ id: "a" });
    expect(a.host.held().length).toBe(4);
    await f.advance(5_000);
    expect(a.host.held().length).toBe(8);
    await f.advance(5_000);
    expect(a.host.held().length).toBe(10);
    await f.publish("s03");
    await f.advance(100);
    expect(f.turns.map((t) => [t.node, t.handle])).toEqual([["a", "s03"]]);
    const lease = await f.truth.get(seatKey("s03"));
    expect(f.turns[0]!.epoch).toBe(lease!.epoch);
    expect(a.sink.events("seat_claimed").length).toBe(10);
    // No seat was ever held: each claim is its seat's first tenure (crewlet_seat_claims_total{reason}).
    expect(new Set(a.sink.events("seat_claimed").map((e) => e.fields.reason))).toEqual(new Set(["first"]));
    expect(a.sink.events("seat_attached").length).toBe(10);
    expect(a.sink.events("seat_sweep").length).toBeGreaterThanOrEqual(3);
  });
});

describe("fleet placement", () => {
  test("three nodes settle 4/4/4 on twelve seats, each seat held once", async () => {
    const f = await makeFleet(12);
    await f.addNode({ id: "a" });
    await f.addNode({ id: "b" });
    await f.addNode({ id: "c" });
    await f.advance(30_000);
    const counts = f.live().map((n) => n.host.held().length);
    expect(counts).toEqual([4, 4, 4]);
    for (const owners of f.holders().values()) expect(owners).toHaveLength(1);
    expect(f.holders().size).toBe(12);
  });

  test("a node that booted alone gives back its excess when a peer joins", async () => {
    const f = await makeFleet(8);
    const a = await f.addNode({ id: "a" });
    await f.advance(10_000);
    expect(a.host.held().length).toBe(8);
    const b = await f.addNode({ id: "b" });
    await f.advance(20_000);
    expect(a.host.held().length).toBe(4);
    expect(b.host.held().length).toBe(4);
    const detached = a.sink.events("seat_detached");
    expect(detached.length).toBe(4);
    expect(detached.every((l) => l.fields.reason === "rebalance")).toBe(true);
  });

  test("a seat pinned by label lands only on the labelled node; no match is unplaceable", async () => {
    const f = await makeFleet(0);
    await f.setSeats([
      { handle: "gpu", placement: { labels: { gpu: "yes" } } },
      { handle: "nowhere", placement: { labels: { zone: "mars" } } },
      ...seats(4),
    ]);
    const a = await f.addNode({ id: "a" });
    const b = await f.addNode({ id: "b", labels: { gpu: "yes" } });
    await f.advance(20_000);
    expect(f.holders().get("gpu")).toEqual(["b"]);
    expect(f.holders().has("nowhere")).toBe(false);
    // Alone, "a" read the gpu seat as unplaceable too; the line is re-raised when that changes.
    expect(a.sink.events("seats_unplaceable").at(-1)!.fields.seats).toEqual(["nowhere"]);
    expect(a.host.health().unplaceable).toEqual(["nowhere"]);
  });

  test("a crashed node's seats are held again within a TTL and two sweeps", async () => {
    const f = await makeFleet(12);
    await f.addNode({ id: "a" });
    await f.addNode({ id: "b" });
    await f.addNode({ id: "c" });
    await f.advance(30_000);
    await f.crash("c");
    await f.advance(TTL + 2 * 5_000);
    expect(f.holders().size).toBe(12);
    expect(f.live().map((n) => n.host.held().length)).toEqual([6, 6]);
  });

  test("at the shipped TTL a crashed node's seats are claimed at its lapse, not at the next sweep", async () => {
    // TTL 45 s: heartbeat 15 s, sweeps every 5 s. Started 1.7 s apart, so c's lapse falls
    // between a's and b's passes: a regular pass would claim 1.6 s or more after it.
    const ttl_ms = 45_000;
    const f = await makeFleet(12, { ttl_ms });
    const a = await f.addNode({ id: "a" });
    await f.advance(1_700);
    const b = await f.addNode({ id: "b" });
    await f.advance(1_700);
    const c = await f.addNode({ id: "c" });
    await f.advance(60_000);
    expect(f.live().map((n) => n.host.held().length)).toEqual([4, 4, 4]);
    const lapse_at = (await f.truth.get(presenceKey("c")))!.expires_at;
    await f.crash("c");
    await f.advance(lapse_at - f.clock.now() + 1_000);
    expect(f.holders().size).toBe(12);
    expect([a, b].map((n) => n.host.held().length)).toEqual([6, 6]);
    for (const owners of f.holders().values()) expect(owners).toHaveLength(1);
    expect([a, b].flatMap((n) => n.sink.events("seat_sweep_at_lapse")).length).toBeGreaterThan(0);
    void c;
  });

  test("a behind node is left out of shares: its part is claimed within a TTL and two sweeps, and it takes a share once level", async () => {
    const f = await makeFleet(12);
    const a = await f.addNode({ id: "a" });
    const b = await f.addNode({ id: "b" });
    await f.addNode({ id: "c" });
    await f.advance(30_000);
    expect(f.live().map((n) => n.host.held().length)).toEqual([4, 4, 4]);
    // c dies and comes straight back with its estate copy behind: it claims nothing until
    // level, and says so on its presence row — so a and b must size their shares without
    // it, or c's four seats stay unowned for as long as it catches up.
    await f.crash("c");
    const c = await f.addNode({ id: "c", behind: true });
    await f.advance(TTL + 2 * SWEEP_INTERVAL_MS);
    expect(f.holders().size).toBe(12);
    for (const owners of f.holders().values()) expect(owners).toHaveLength(1);
    expect([a, b, c].map((n) => n.host.held().length)).toEqual([6, 6, 0]);
    expect(parsePresence((await f.truth.get(presenceKey("c")))!).behind).toBe(true);
    expect(c.sink.events("seat_claims_withheld").every((l) => l.fields.reason === "behind")).toBe(true);
    expect(c.sink.events("seat_claims_withheld").length).toBeGreaterThan(0);
    // Level: its row says so, a and b count it again and give back their excess, c claims.
    c.host.setBehind(false);
    await f.advance(30_000);
    expect(parsePresence((await f.truth.get(presenceKey("c")))!).behind).toBe(false);
    expect([a, b, c].map((n) => n.host.held().length)).toEqual([4, 4, 4]);
    expect(f.holders().size).toBe(12);
    for (const owners of f.holders().values()) expect(owners).toHaveLength(1);
    expect([a, b].flatMap((n) => n.sink.events("seat_detached")).every((l) => l.fields.reason === "rebalance")).toBe(true);
  });

  test("setSeats runs one early pass, at most one per interval", async () => {
    const f = await makeFleet(2);
    const a = await f.addNode({ id: "a" });
    await f.advance(1_000);
    const before = a.sink.events("seat_sweep").length;
    await f.setSeats(seats(3));
    await f.advance(10);
    expect(a.host.held()).toContain("s03");
    await f.setSeats(seats(4));
    await f.advance(10);
    expect(a.sink.events("seat_sweep").length).toBe(before + 1);
    expect(a.host.held()).not.toContain("s04");
  });

  test("a removed role's seat is given back", async () => {
    const f = await makeFleet(3);
    const a = await f.addNode({ id: "a" });
    await f.advance(100);
    await f.setSeats(seats(2));
    await f.advance(100);
    expect(a.host.held()).toEqual(["s01", "s02"]);
    expect(a.sink.events("seat_released_role_gone").map((l) => l.fields.seat)).toEqual(["s03"]);
    expect(await f.truth.get(seatKey("s03"))).toBeNull();
  });
});

describe("admission and renewals", () => {
  test("a failed renew keeps the seat but stops turns; the next good renew resumes (both edges)", async () => {
    const f = await makeFleet(1);
    const admitted: number[] = [];
    const a = await f.addNode({ id: "a", hooks: { onAdmitted: (g) => admitted.push(g.epoch) } });
    await f.advance(100);
    const epoch = a.host.mayStart("s01");
    expect(typeof epoch).toBe("number");
    a.faults.unreachable = true;
    await f.advance(1_100); // one heartbeat fails
    expect(a.host.mayStart("s01")).toBe(false);
    expect(a.sink.events("seat_admission_stale").length).toBeGreaterThan(0);
    expect(a.sink.events("seat_renew_unknown").length).toBe(1);
    expect(a.host.seatState("s01")!.stale).toBe(true);
    // Mail that arrives now waits: the consumer is quiesced.
    await f.publish("s01");
    await f.advance(500);
    expect(f.turns).toHaveLength(0);
    a.faults.unreachable = false;
    await f.advance(1_000);
    expect(a.host.mayStart("s01")).toBe(epoch as number);
    expect(admitted).toEqual([epoch as number]);
    await f.advance(100);
    expect(f.turns.map((t) => t.epoch)).toEqual([epoch as number]);
  });

  // An election: the lease bucket answers nothing from just before a heartbeat's renewal
  // for 1.5 heartbeats. Renewing only on heartbeats, the beat after the outage falls on the
  // lapse and every seat is fenced; probing one stale seat every RENEW_PROBE_MS renews all
  // eight within a probe of the outage's end, with a store call per probe, not per seat.
  test("an outage inside the TTL's slack fences nothing: a probe renews within RENEW_PROBE_MS of its end, one call at a time", async () => {
    const f = await makeFleet(8);
    const a = await f.addNode({ id: "a" });
    await f.advance(10_000);
    expect(a.host.held().length).toBe(8);
    const last = Math.max(...a.host.held().map((h) => a.host.seatState(h)!.renewed_at_ms));
    await f.advance(last + 950 - a.clock.now(), 50);
    const ends = a.clock.now() + 1_500;
    const refused = new Map<number, number>(); // instant → lease writes refused then
    const renewedAfter: number[] = [];
    a.faults.onOp = (op) => {
      if (a.clock.now() < ends) {
        if (op.bucket.includes("lease") && isWrite(op)) refused.set(a.clock.now(), (refused.get(a.clock.now()) ?? 0) + 1);
        throw new StoreUnavailable(`leaderless (test) at ${op.kind}`);
      }
      if (op.kind === "update" && op.key?.startsWith("seat")) renewedAfter.push(a.clock.now() - ends);
    };
    await f.advance(1_500 + 2 * RENEW_PROBE_MS, 50);
    expect(a.sink.events("seat_fenced")).toEqual([]);
    expect(a.host.held().length).toBe(8);
    expect(a.host.held().every((h) => !a.host.seatState(h)!.stale)).toBe(true);
    expect(Math.min(...renewedAfter)).toBeLessThanOrEqual(RENEW_PROBE_MS);
    // Each instant is a full beat (eight renewals and the presence row), one a heartbeat, or
    // a probe's single call; never a renewal per seat per probe.
    const calls = [...refused.values()];
    expect(calls.filter((n) => n !== 1 && n !== 9)).toEqual([]);
    expect(calls.filter((n) => n === 9).length).toBeLessThanOrEqual(Math.ceil(1_500 / a.host.heartbeat_ms));
    expect(calls.filter((n) => n === 1).length).toBeGreaterThan(0);
    // The probe that came back says how close the stalest seat came to its lapse: its last
    // good renew was before the outage began, so more than the outage, less than the TTL.
    const [answering] = a.sink.events("lease_store_answering");
    expect(answering?.fields.unrenewed_ms as number).toBeGreaterThan(1_500);
    expect(answering?.fields.unrenewed_ms as number).toBeLessThan(a.host.ttl_ms);
  });

  test("renews that hang do not keep a grant past its lapse: it is revoked at last good renew + TTL, not when an answer comes", async () => {
    const f = await makeFleet(1);
    const a = await f.addNode({ id: "a" });
    await f.advance(100);
    const epoch = a.host.mayStart("s01") as number;
    a.faults.slow_ms = 60_000; // every store call hangs past its one-heartbeat bound
    let lastOk: number | undefined;
    for (let t = 0; t < 3 * TTL && a.sink.events("seat_fenced").length === 0; t += 50) {
      lastOk = a.host.seatState("s01")?.renewed_at_ms ?? lastOk;
      await f.advance(50);
    }
    const [fenced] = a.sink.events("seat_fenced");
    expect(fenced?.fields).toMatchObject({ seat: "s01", epoch, reason: "ttl_grace_expired" });
    expect(lastOk).toBeNumber();
    expect(Date.parse(fenced!.ts) - lastOk!).toBeLessThanOrEqual(TTL);
    expect(a.host.fence("s01", epoch)).toBe(false);
  });

  test("past the lapse the fence answers false before any timer has run (a process resumed from SIGSTOP)", async () => {
    const f = await makeFleet(1);
    const a = await f.addNode({ id: "a" });
    await f.advance(100);
    const epoch = a.host.mayStart("s01") as number;
    a.clock.freeze();
    await f.advance(TTL / 2);
    expect(a.host.fence("s01", epoch)).toBe(true);
    await f.advance(TTL);
    expect(a.sink.events("seat_fenced")).toEqual([]); // no timer of a's has run
    expect(a.host.fence("s01", epoch)).toBe(false);
  });

  test("renewals failing past the TTL are a fenced release; a peer takes the seat", async () => {
    const f = await makeFleet(1);
    const released: string[] = [];
    const a = await f.addNode({ id: "a", hooks: { onRelease: async (_g, i) => void released.push(`${i.mode}:${i.reason}`) } });
    await f.advance(100);
    const b = await f.addNode({ id: "b" });
    a.faults.unreachable = true;
    await f.advance(TTL + 5_000 + 200);
    expect(a.host.held()).toEqual([]);
    expect(released).toEqual(["fenced:ttl_grace_expired"]);
    expect(b.host.held()).toEqual(["s01"]);
  });

  test("many seats fenced at once rewrite the presence row a couple of times, not once a seat", async () => {
    const f = await makeFleet(12);
    const a = await f.addNode({ id: "a" });
    await f.advance(15_000);
    expect(a.host.held().length).toBe(12);
    let presenceWrites = 0;
    const row = encodeLeaseKey(presenceKey("a"));
    a.faults.onOp = (op) => void (isWrite(op) && op.key === row && presenceWrites++);
    // Every lease taken from under it: the next heartbeat hears `lost` twelve times, and
    // each seat's teardown ends with the row saying the new count.
    for (let i = 1; i <= 12; i++) {
      const key = seatKey(`s${String(i).padStart(2, "0")}`);
      const l = (await f.truth.get(key))!;
      expect(await f.truth.release(key, l.owner, l.epoch)).toBe("released");
    }
    await f.advance(1_100);
    expect(a.sink.events("seat_fenced").length).toBe(12);
    expect(a.host.held()).toEqual([]);
    // One heartbeat's own write plus at most two for the twelve teardowns (one in flight,
    // one after it carrying every count since); a write each was 12 more.
    expect(presenceWrites).toBeLessThanOrEqual(4);
    const seen = parsePresence((await f.truth.get(presenceKey("a")))!);
    expect(seen.seats_held).toBe(0);
  });

  test("a renew answered lost is a fenced release: detach first, no lease release", async () => {
    const f = await makeFleet(1);
    const released: string[] = [];
    const a = await f.addNode({ id: "a", hooks: { onRelease: async (_g, i) => void released.push(`${i.mode}:${i.reason}`) } });
    await f.advance(100);
    const lease = (await f.truth.get(seatKey("s01")))!;
    expect(await f.truth.release(seatKey("s01"), lease.owner, lease.epoch)).toBe("released");
    await f.advance(1_100);
    expect(released).toEqual(["fenced:lease_lost"]);
    const detach = a.sink.events("seat_detached")[0]!;
    expect(detach.fields).toMatchObject({ seat: "s01", reason: "lease_lost", mode: "fenced" });
    expect(a.host.fence("s01", lease.epoch)).toBe(false);
  });

  test("a deferred delivery quiesces the inbox and the next successful renew resumes it", async () => {
    const f = await makeFleet(1);
    let deferOnce = true;
    const seen: number[] = [];
    const a = await f.addNode({
      id: "a",
      handler: async (d) => {
        seen.push(d.deliveryCount);
        if (deferOnce) {
          deferOnce = false;
          return { kind: "defer", reason: "posture shed" };
        }
        return { kind: "ack" };
      },
    });
    await f.advance(100);
    await f.publish("s01");
    await f.advance(50);
    expect(seen).toEqual([1]);
    expect(a.host.seatState("s01")!.attached).toBe(true);
    await f.advance(1_000);
    expect(seen).toEqual([1, 2]);
  });
});

describe("drains", () => {
  test("a drain is screened as one: pulled while admitted, started on a stale renew → all deferred, recorded, resumed", async () => {
    const f = await makeFleet(1);
    const drains: [string, number][][] = [];
    const text = (d: Delivery) => new TextDecoder().decode(d.data);
    const a = await f.addNode({
      id: "a",
      batchHandler: async (ds, turn) => {
        drains.push(ds.map((d) => [text(d), d.deliveryCount]));
        expect(turn.admit()).toBe(true);
        return ds.map(() => ack());
      },
    });
    await f.advance(100);
    expect(a.host.seatState("s01")!.attached).toBe(true);
    // SIGSTOP: the drain pull already out takes all three (published together), and the
    // drain's handler waits with the process.
    a.clock.freeze();
    await Promise.all(["m1", "m2", "m3"].map((m) => f.publish("s01", m)));
    a.faults.unreachable = true;
    await f.advance(1_500); // past a heartbeat with no renew
    a.clock.thaw();
    await f.advance(100);
    expect(drains).toEqual([]); // the host never handed the stale drain on
    expect(a.sink.events("seat_admission_stale").length).toBeGreaterThan(0);
    a.faults.unreachable = false;
    await f.advance(1_100); // the next good renew resumes the deferred, quiesced inbox
    expect(drains).toEqual([[["m1", 2], ["m2", 2], ["m3", 2]]]);
  });

  test("the host attaches for drains of at most INBOX_DRAIN_MAX; a backlog comes in full drains", async () => {
    const f = await makeFleet(1);
    const sizes: number[] = [];
    const a = await f.addNode({ id: "a", batchHandler: async (ds) => (sizes.push(ds.length), ds.map(() => ack())) });
    await f.advance(100);
    // Published together, so all of it is waiting when the seat's drain pull is served.
    await Promise.all(Array.from({ length: INBOX_DRAIN_MAX + 5 }, (_, i) => f.publish("s01", `m${i}`)));
    await f.advance(200);
    expect(sizes).toEqual([INBOX_DRAIN_MAX, 5]);
  });
});

describe("establishing", () => {
  test("prepare runs in order, the inbox attaches last, then onEstablished; a paused seat attaches held", async () => {
    const f = await makeFleet(1);
    const order: string[] = [];
    const a = await f.addNode({
      id: "a",
      hooks: {
        prepare: [async () => void order.push("mcp"), async () => void order.push("memory")],
        attachHolds: () => (order.push("holds"), ["pause"]),
        onEstablished: (g) => order.push(`established:${g.epoch}`),
      },
    });
    await f.advance(100);
    expect(order.slice(0, 3)).toEqual(["mcp", "memory", "holds"]);
    expect(order[3]).toMatch(/^established:\d+$/);
    const attached = a.sink.events("seat_attached")[0]!;
    expect(attached.fields.holds).toEqual(["pause"]);
    await f.publish("s01");
    await f.advance(2_000);
    expect(f.turns).toHaveLength(0); // the pause hold was in place before the first fetch
  });

  test("a failing acquire hook is a fenced release that gives the lease back", async () => {
    const f = await makeFleet(1);
    let fail = true;
    const a = await f.addNode({
      id: "a",
      hooks: {
        prepare: [
          async () => {
            if (fail) throw new Error("mcp child would not start");
          },
        ],
      },
    });
    await f.advance(100);
    expect(a.host.held()).toEqual([]);
    expect(a.sink.events("seat_acquire_failed")).toHaveLength(1);
    expect(await f.truth.get(seatKey("s01"))).toBeNull();
    fail = false;
    await f.advance(5_000);
    expect(a.host.held()).toEqual(["s01"]);
  });
});

describe("giving back", () => {
  test("a voluntary release waits for the in-flight turn, then detaches and releases", async () => {
    const f = await makeFleet(2, { turn_ms: 800 });
    const a = await f.addNode({ id: "a" });
    await f.advance(100);
    await f.publish("s01");
    await f.advance(100);
    expect(f.turns).toHaveLength(1);
    const done = a.host.release("s01", "rebalance");
    await f.advance(300);
    expect(a.host.seatState("s01")!.phase).toBe("releasing");
    expect(a.host.mayStart("s01")).toBe(false);
    await f.advance(600);
    await done;
    expect(a.host.seatState("s01")).toBeNull();
    expect(await f.truth.get(seatKey("s01"))).toBeNull();
    // The turn finished under its fence and was acked: nothing comes back.
    const b = await f.addNode({ id: "b" });
    await f.advance(6_000);
    expect(f.turns.filter((t) => t.node === "b")).toHaveLength(0);
    void b;
  });

  test("a failing teardown leaves the seat undead: renewed, retried, alarmed, then recovered", async () => {
    const f = await makeFleet(1);
    let failures = 25;
    const a = await f.addNode({
      id: "a",
      hooks: {
        onRelease: async () => {
          if (failures-- > 0) throw new Error("mcp child still dying");
        },
      },
    });
    await f.advance(100);
    const epoch = a.host.mayStart("s01") as number;
    await a.host.release("s01", "rebalance");
    expect(a.host.held()).toEqual([]);
    expect(a.host.seatState("s01")!.phase).toBe("undead");
    expect(a.host.fence("s01", epoch)).toBe(true);
    expect(a.sink.events("seat_release_unproven")).toHaveLength(1);
    const b = await f.addNode({ id: "b" });
    await f.advance(21_000);
    // Still renewed: no peer could take it.
    expect(b.host.held()).toEqual([]);
    expect((await f.truth.get(seatKey("s01")))!.epoch).toBe(epoch);
    expect(a.host.health().unproven_seconds!.s01).toBeGreaterThanOrEqual(20);
    const alarm = a.sink.events("seat_still_unproven");
    expect(alarm).toHaveLength(1);
    expect(alarm[0]!.fields.elapsed_seconds).toBeGreaterThanOrEqual(19);
    await f.advance(6_000);
    expect(a.sink.events("seat_release_recovered")).toHaveLength(1);
    expect(a.host.health().unproven_seconds).toBeUndefined();
    await f.advance(6_000);
    expect(b.host.held()).toEqual(["s01"]);
  });

  test("give-backs the store leaves unanswered are retried together, off the heartbeat: the seats kept stay renewed", async () => {
    // The 2,000-seat chaos run: ~660 releases unanswered, retried one after another inside
    // the heartbeat turn, each waiting out its one-heartbeat bound, held that turn past the
    // TTL — the watchdog ended the node, and the seats it kept went unrenewed meanwhile.
    const f = await makeFleet(24);
    const a = await f.addNode({ id: "a" });
    await f.advance(40_000);
    expect(a.host.held()).toHaveLength(24);
    // A peer, so the seats given back are its share, not ones for a to claim again.
    const b = await f.addNode({ id: "b", watchdog: false });
    const giving = a.host.held().slice(0, 12);
    // Every call on the seats given back hangs past its bound (the store cut off for them).
    const givingKeys = new Set(giving.map((h) => encodeLeaseKey(seatKey(h))));
    a.faults.onOp = (op) => (op.key !== undefined && givingKeys.has(op.key) ? f.clock.sleep(60_000) : undefined);
    const releases = giving.map((h) => a.host.release(h, "rebalance"));
    const kept = a.host.held().filter((h) => !giving.includes(h));
    let worstAge = 0; // how stale a kept seat's last good renew got, sampled through the run
    for (let t = 0; t < 4 * TTL; t += 100) {
      await f.advance(100);
      for (const h of kept) {
        const st = a.host.seatState(h);
        if (st?.lease_held) worstAge = Math.max(worstAge, f.clock.now() - st.renewed_at_ms);
      }
    }
    await Promise.all(releases);
    expect(a.exits).toEqual([]);
    expect(worstAge).toBeLessThanOrEqual(2 * (TTL / 3) + 100);
    expect(a.sink.events("seat_fenced")).toEqual([]);
    expect(a.host.held().length).toBeGreaterThanOrEqual(10); // its share, less a sweep's rebalance
    for (const h of a.host.held()) expect(f.clock.now() - a.host.seatState(h)!.renewed_at_ms).toBeLessThanOrEqual(2 * (TTL / 3) + 100);
    // The give-backs went unanswered throughout: each lease lapsed on its own, and b claims it.
    await f.advance(20_000);
    for (const h of giving) expect(f.holders().get(h)).toEqual(["b"]);
    void b;
  });

  test("a node holding more seats than LEASE_CALLS_IN_FLIGHT renews every one each beat, never more than that many at the store at once", async () => {
    // 10,000 renewals sent at once filled nats-server's JetStream API queue, which then
    // dropped every request on it: every seat went stale on every beat.
    const seats = LEASE_CALLS_IN_FLIGHT + 22;
    const f = await makeFleet(seats);
    const a = await f.addNode({ id: "a" });
    // Four claims a pass (this fixture's seats fork children): held within 40 passes.
    for (let pass = 0; pass < 40 && a.host.held().length < seats; pass++) await f.advance(SWEEP_INTERVAL_MS);
    expect(a.host.held()).toHaveLength(seats);
    let inFlight = 0;
    let peak = 0;
    let renewals = 0;
    // Each renewal's write takes 20 ms at the store, so a beat's calls overlap.
    a.faults.onOp = async (op) => {
      if (op.kind !== "update" || !op.key?.startsWith("seat.")) return;
      renewals++;
      peak = Math.max(peak, ++inFlight);
      await f.clock.sleep(20);
      inFlight--;
    };
    const from = f.clock.now();
    // Three beats: two whole ones at least.
    for (let t = 0; t < 3 * (TTL / 3); t += 50) await f.advance(50);
    expect(peak).toBe(LEASE_CALLS_IN_FLIGHT);
    expect(renewals).toBeGreaterThanOrEqual(2 * seats);
    for (const h of a.host.held()) expect(a.host.seatState(h)!.renewed_at_ms).toBeGreaterThan(from);
    expect(a.sink.events("seat_renew_unknown")).toEqual([]);
    expect(a.sink.events("seat_fenced")).toEqual([]);
  });

  test("drain gives presence up first, releases every seat voluntarily; peers take them in one sweep", async () => {
    const f = await makeFleet(6);
    const a = await f.addNode({ id: "a" });
    const b = await f.addNode({ id: "b" });
    await f.advance(20_000);
    expect(a.host.held().length).toBe(3);
    const before = a.sink.events("seat_detached").length;
    const drained = f.drain("a");
    await f.advance(10);
    await drained;
    expect(await f.truth.get("node:a")).toBeNull();
    const detached = a.sink.events("seat_detached").slice(before);
    expect(detached).toHaveLength(3);
    expect(detached.every((l) => l.fields.reason === "drain" && l.fields.mode === "voluntary")).toBe(true);
    await f.advance(5_100);
    expect(b.host.held().length).toBe(6);
  });

  test("a claim that lands while a drain begins is handed straight back before it attaches", async () => {
    const f = await makeFleet(1);
    const a = await f.addNode({ id: "a" });
    await a.host.drain();
    // A claim already past the sweep's check lands now.
    expect(await a.host.claim("s01")).toBe("skipped");
    expect(await f.truth.get(seatKey("s01"))).toBeNull();
  });
});

describe("restart", () => {
  test("a restarted node holding the store-dir lock takes its own seats back at once", async () => {
    const f = await makeFleet(4);
    const a = await f.addNode({ id: "a" });
    await f.advance(100);
    const before = (await f.truth.get(seatKey("s01")))!.epoch;
    await f.crash("a");
    const a2 = await f.addNode({ id: "a", takeover: true });
    await f.advance(100);
    expect(a2.host.held().length).toBe(4);
    expect((await f.truth.get(seatKey("s01")))!.epoch).toBeGreaterThan(before);
    expect(a2.sink.events("seat_claimed").map((e) => e.fields.reason)).toEqual(["takeover", "takeover", "takeover", "takeover"]);
    void a;
  });

  test("without the lock, the new incarnation waits out its predecessor's TTL", async () => {
    const f = await makeFleet(1);
    await f.addNode({ id: "a" });
    await f.advance(100);
    await f.crash("a");
    const a2 = await f.addNode({ id: "a" });
    await f.advance(100);
    expect(a2.host.held()).toEqual([]);
    await f.advance(TTL + 5_000);
    expect(a2.host.held()).toEqual(["s01"]);
    // Its lease lapsed (and the bucket's max age dropped it): free, as a released seat is.
    expect(a2.sink.events("seat_claimed").map((e) => e.fields.reason)).toEqual(["free"]);
  });
});

describe("outside view", () => {
  test("health and fleet list nodes, leases and unmanned roles", async () => {
    const f = await makeFleet(3);
    const a = await f.addNode({ id: "a", roles: ["seats"] });
    await f.addNode({ id: "b", roles: ["seats", "data"] });
    await f.advance(10_000);
    const h = a.host.health();
    expect(h.live_nodes).toBe(2);
    expect(h.protocol_floor).toBe(LEASE_PROTOCOL);
    expect(h.capacity).toBe(2);
    const view = await a.host.fleet();
    expect(view.nodes.map((n) => n.id).sort()).toEqual(["a", "b"]);
    expect(view.nodes.find((n) => n.id === "a")!.seats_held).toBe(h.held.length);
    expect(view.leases).toHaveLength(3);
    for (const l of view.leases) {
      expect(l.since).toBeLessThanOrEqual(f.clock.now());
      expect(l.expires_in_ms).toBeGreaterThan(0);
    }
    expect(view.unmanned_roles).toEqual(["ingress", "workers"]);
    expect(a.sink.events("fleet_role_unmanned").length).toBeGreaterThan(0);
  });

  test("a lower-protocol peer blocks claims and says which floor", async () => {
    const f = await makeFleet(4);
    await f.addNode({ id: "old", protocol: 3, roles: ["data"] });
    const a = await f.addNode({ id: "a" });
    await f.advance(100);
    expect(a.host.held()).toEqual([]);
    expect(a.sink.events("seat_claims_blocked_by_older_protocol")[0]!.fields.floor).toBe(3);
  });
});
