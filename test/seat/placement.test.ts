import { describe, expect, test } from "bun:test";
import {
  CLAIM_LIMIT_PER_SWEEP,
  QUIET_CLAIM_LIMIT_PER_SWEEP,
  QUIET_RELEASE_LIMIT_PER_SWEEP,
  RELEASE_LIMIT_PER_SWEEP,
  heartbeatMs,
  nodeMatches,
  ownerNodeId,
  placementKey,
  plan,
  unmannedRoles,
  type PlanInput,
  type PresenceFact,
  type SeatLeaseFact,
  type SeatSpec,
  type SelfFacts,
} from "../../src/seat/placement.ts";

const ALL_ROLES = ["data", "ingress", "seats", "workers"];

function node(id: string, over: Partial<PresenceFact> = {}): PresenceFact {
  return { node_id: id, roles: ALL_ROLES, labels: {}, protocol: 4, seats_held: 0, draining: false, withdrawn: false, ...over };
}

function seats(prefix: string, n: number, placement?: SeatSpec["placement"], spawns?: number): SeatSpec[] {
  return Array.from({ length: n }, (_, i) => ({ handle: `${prefix}${String(i + 1).padStart(2, "0")}`, placement, ...(spawns === undefined ? {} : { spawns }) }));
}

interface Case {
  self?: Partial<SelfFacts>;
  seats: SeatSpec[];
  peers?: PresenceFact[];
  healthy?: string[];
  undead?: string[];
  not_ready?: string[];
  /** Healthy seats with no turn in flight and none settled within the last pass. */
  idle?: string[];
  preferred?: Record<string, string>;
  /** handle → holder node id (live unless `expired`); undefined = leases not read. */
  leases?: Record<string, string | { node: string; expired?: boolean; mine?: boolean; predecessor?: boolean }>;
  floor?: number | null;
}

function run(c: Case) {
  const self: SelfFacts = {
    node_id: "a",
    roles: ALL_ROLES,
    labels: {},
    protocol: 4,
    draining: false,
    withdrawn: false,
    behind: false,
    takeover: false,
    ...c.self,
  };
  let leases: Map<string, SeatLeaseFact> | null = null;
  if (c.leases) {
    leases = new Map();
    for (const [h, v] of Object.entries(c.leases)) {
      const o = typeof v === "string" ? { node: v } : v;
      // Unless a case says otherwise, this node's other incarnations ran on this store.
      const mine = o.mine ?? false;
      leases.set(h, { node_id: o.node, mine, predecessor: o.predecessor ?? (o.node === "a" && !mine), live: !o.expired, protocol: 4 });
    }
  }
  const input: PlanInput = {
    self,
    seats: c.seats,
    presences: c.peers ?? [],
    holdings: { healthy: c.healthy ?? [], undead: c.undead ?? [], not_ready: c.not_ready ?? [], ...(c.idle ? { idle: c.idle } : {}) },
    preferred: new Map(Object.entries(c.preferred ?? {})),
    leases,
    protocol_floor: c.floor ?? null,
  };
  return plan(input);
}

describe("constants", () => {
  test("the heartbeat is a third of the TTL", () => {
    expect(heartbeatMs(45_000)).toBe(15_000);
    expect(heartbeatMs(3_000)).toBe(1_000);
  });
  test("claims outrun releases per pass", () => {
    expect(CLAIM_LIMIT_PER_SWEEP).toBe(4);
    expect(RELEASE_LIMIT_PER_SWEEP).toBe(2);
  });
});

describe("matching and keys", () => {
  test("a node matches when every label matches and the pin names it", () => {
    expect(nodeMatches({ node_id: "a", labels: { zone: "eu", gpu: "1" } }, { labels: { zone: "eu" } })).toBe(true);
    expect(nodeMatches({ node_id: "a", labels: { zone: "us" } }, { labels: { zone: "eu" } })).toBe(false);
    expect(nodeMatches({ node_id: "a", labels: {} }, { node: "b" })).toBe(false);
    expect(nodeMatches({ node_id: "b", labels: {} }, { node: "b", labels: {} })).toBe(true);
    expect(nodeMatches({ node_id: "b", labels: {} }, undefined)).toBe(true);
  });
  test("placement keys ignore label order and absent fields", () => {
    expect(placementKey({ labels: { b: "2", a: "1" } })).toBe(placementKey({ labels: { a: "1", b: "2" } }));
    expect(placementKey(undefined)).toBe(placementKey({ labels: {} }));
    expect(placementKey({ node: "x" })).not.toBe(placementKey({}));
  });
  test("the owner's node id is everything before the last colon", () => {
    expect(ownerNodeId("node-a:9f3c1e70")).toBe("node-a");
    expect(ownerNodeId("weird")).toBe("weird");
  });
});

describe("claiming", () => {
  test("a node claims up to its fair share: ceil(seats / live nodes)", () => {
    const p = run({ seats: seats("s", 9), peers: [node("b"), node("c")], leases: {} });
    expect(p.groups[0]!.share).toBe(3);
    expect(p.claims.length).toBe(3);
    expect(p.capacity).toBe(3);
  });

  test("the share is a ceiling: 5 seats over 2 nodes is 3 each", () => {
    const p = run({ seats: seats("s", 5), peers: [node("b")], leases: {} });
    expect(p.groups[0]!.share).toBe(3);
    expect(p.claims.length).toBe(3);
  });

  test("never more than the claim limit per pass", () => {
    const p = run({ seats: seats("s", 12), leases: {} });
    expect(p.groups[0]!.share).toBe(12);
    expect(p.claims.length).toBe(CLAIM_LIMIT_PER_SWEEP);
  });

  test("the spawn limit bounds seats that fork: MCP seats ramp at the spec's rate", () => {
    const p = run({ seats: seats("m", 12, undefined, 2), leases: {} });
    expect(p.claims.length).toBe(CLAIM_LIMIT_PER_SWEEP);
  });

  test("seats whose acquire spawns nothing are claimed past the spawn limit, up to the quiet limit", () => {
    const small = run({ seats: seats("q", 40, undefined, 0), leases: {} });
    expect(small.claims.length).toBe(40);
    const big = run({ seats: seats("q", QUIET_CLAIM_LIMIT_PER_SWEEP + 50, undefined, 0), leases: {} });
    expect(big.claims.length).toBe(QUIET_CLAIM_LIMIT_PER_SWEEP);
    expect(QUIET_CLAIM_LIMIT_PER_SWEEP).toBeGreaterThan(CLAIM_LIMIT_PER_SWEEP);
  });

  test("a mixed company: four forking seats and every quiet one fit one pass", () => {
    const all = [...seats("m", 10, undefined, 1), ...seats("q", 10, undefined, 0)];
    const p = run({ seats: all, leases: {} });
    expect(p.claims.filter((h) => h.startsWith("m")).length).toBe(CLAIM_LIMIT_PER_SWEEP);
    expect(p.claims.filter((h) => h.startsWith("q")).length).toBe(10);
  });

  test("a seat whose spawn count is unknown is charged as forking", () => {
    const all = [...seats("u", 8), ...seats("q", 3, undefined, 0)];
    const p = run({ seats: all, leases: {} });
    expect(p.claims.filter((h) => h.startsWith("u")).length).toBe(CLAIM_LIMIT_PER_SWEEP);
    expect(p.claims.filter((h) => h.startsWith("q")).length).toBe(3);
  });

  test("quiet seats still stop at the fair share", () => {
    const p = run({ seats: seats("q", 30, undefined, 0), peers: [node("b"), node("c")], leases: {} });
    expect(p.claims.length).toBe(10);
  });

  test("the fair share caps a mixed pass: forking seats over the limit leave room to quiet ones, never past the share", () => {
    const all = [...seats("m", 6, undefined, 3), ...seats("q", 6, undefined, 0)];
    const p = run({ seats: all, peers: [node("b")], leases: {} });
    expect(p.claims.length).toBe(6);
    expect(p.claims.filter((h) => h.startsWith("m")).length).toBeLessThanOrEqual(CLAIM_LIMIT_PER_SWEEP);
  });

  test("a busy group's spent spawn budget does not stop a quiet seat in a later group", () => {
    const all = [...seats("g", 6, { labels: { gpu: "yes" } }, 1), ...seats("q", 5, undefined, 0)];
    const p = run({ self: { labels: { gpu: "yes" } }, seats: all, peers: [node("b")], leases: {} });
    expect(p.claims.filter((h) => h.startsWith("g")).length).toBe(CLAIM_LIMIT_PER_SWEEP);
    expect(p.claims.filter((h) => h.startsWith("q")).length).toBe(3);
  });

  test("only free seats are claimed: live peer leases are not, lapsed ones are", () => {
    const p = run({ seats: seats("s", 4), peers: [node("b")], leases: { s01: "b", s02: "b", s03: { node: "b", expired: true } } });
    expect(p.claims.sort()).toEqual(["s03", "s04"]);
  });

  test("what the node already holds counts against its share", () => {
    const p = run({ seats: seats("s", 6), peers: [node("b")], healthy: ["s01", "s02"], not_ready: ["s03"], leases: {} });
    expect(p.claims).toEqual([]);
  });

  test("groups with the fewest matching nodes are tried first", () => {
    const all = [...seats("u", 10), ...seats("g", 3, { labels: { gpu: "yes" } })];
    const p = run({ self: { labels: { gpu: "yes" } }, seats: all, peers: [node("b"), node("c")], leases: {} });
    // gpu group: only this node matches (share 3); unpinned: 3 nodes (share 4).
    expect(p.claims.slice(0, 3).sort()).toEqual(["g01", "g02", "g03"]);
    expect(p.claims.length).toBe(CLAIM_LIMIT_PER_SWEEP);
    expect(p.claims[3]!.startsWith("u")).toBe(true);
  });

  test("within a group, seats whose preferred hint names this node come first", () => {
    const p = run({
      seats: seats("s", 12),
      peers: [node("b")],
      preferred: { s09: "a", s11: "a", s02: "b" },
      leases: {},
    });
    expect(p.claims.slice(0, 2).sort()).toEqual(["s09", "s11"]);
    expect(p.claims).not.toContain("s02");
  });

  test("a satellite labelled for one pinned seat does not fill up on unpinned seats", () => {
    const all = [...seats("u", 4), { handle: "pinned", placement: { labels: { site: "edge" } } }];
    const self = { node_id: "sat", labels: { site: "edge" } };
    // Booted before its peer joined: it took three unpinned seats.
    const p = run({ self, seats: all, peers: [node("a", { seats_held: 1 })], healthy: ["u01", "u02", "u03"], leases: { u04: "a" } });
    const unpinned = p.groups.find((g) => g.seats.includes("u01"))!;
    const pinned = p.groups.find((g) => g.seats.includes("pinned"))!;
    expect(pinned.share).toBe(1);
    expect(unpinned.share).toBe(2);
    expect(p.capacity).toBe(3);
    // Held 3 against a total of 3 would read "full"; per group, the pinned seat has room.
    expect(p.claims).toEqual(["pinned"]);
    expect(p.releases).toHaveLength(1);
    expect(p.releases[0]!.reason).toBe("rebalance");
    expect(p.releases[0]!.handle.startsWith("u")).toBe(true);
  });

  test("a fresh satellite claims its pinned seat before any unpinned one", () => {
    const all = [...seats("u", 8), { handle: "pinned", placement: { labels: { site: "edge" } } }];
    const p = run({ self: { node_id: "sat", labels: { site: "edge" } }, seats: all, peers: [node("a")], leases: {} });
    expect(p.claims[0]).toBe("pinned");
    expect(p.claims.length).toBe(CLAIM_LIMIT_PER_SWEEP);
  });

  test("a node pin lands only on the named node", () => {
    const all = [{ handle: "p", placement: { node: "b" } }, ...seats("u", 2)];
    const p = run({ seats: all, peers: [node("b")], leases: {} });
    expect(p.claims).not.toContain("p");
    expect(p.unplaceable).toEqual([]);
  });

  test("a live lease naming this node id is free only with the store-dir lock (takeover)", () => {
    const leases = { s01: { node: "a" }, s02: { node: "b" } };
    const without = run({ seats: seats("s", 2), leases });
    expect(without.claims).toEqual([]);
    const withLock = run({ self: { takeover: true }, seats: seats("s", 2), leases });
    expect(withLock.claims).toEqual(["s01"]);
  });

  test("a live lease of this node id from another store is a live process's: never free, lock or not", () => {
    const leases = { s01: { node: "a", predecessor: false }, s02: { node: "a" } };
    const p = run({ self: { takeover: true }, seats: seats("s", 2), leases });
    expect(p.claims).toEqual(["s02"]);
  });

  test("a live lease of this incarnation that it does not track is an orphan, not a claim", () => {
    const p = run({ seats: seats("s", 2), leases: { s01: { node: "a", mine: true } } });
    expect(p.orphans).toEqual(["s01"]);
    expect(p.claims).toEqual(["s02"]);
  });
});

describe("withholding claims", () => {
  const base: Case = { seats: seats("s", 4), leases: {} };
  test.each([
    ["draining", { draining: true }],
    ["withdrawn", { withdrawn: true }],
    ["behind", { behind: true }],
  ] as const)("nothing is claimed while %s", (reason, self) => {
    const p = run({ ...base, self });
    expect(p.claims).toEqual([]);
    expect(p.withheld).toBe(reason);
    expect(p.leases_needed).toBe(false);
  });

  test("a node without the seats role claims nothing and holds nothing", () => {
    const p = run({ ...base, self: { roles: ["data", "workers"] }, peers: [node("b")], healthy: ["s01"] });
    expect(p.claims).toEqual([]);
    expect(p.withheld).toBe("no_seats_role");
    expect(p.releases).toEqual([{ handle: "s01", reason: "not_placing" }]);
  });

  test("a lower protocol floor blocks claims; an equal one does not", () => {
    expect(run({ ...base, floor: 3 }).withheld).toBe("protocol");
    expect(run({ ...base, floor: 3 }).claims).toEqual([]);
    expect(run({ ...base, floor: 4 }).claims.length).toBe(4);
  });

  test("a node that is behind keeps serving what it holds and still counts in shares", () => {
    const p = run({ seats: seats("s", 4), self: { behind: true }, healthy: ["s01", "s02"], peers: [node("b")], leases: {} });
    expect(p.releases).toEqual([]);
    expect(p.groups[0]!.matching_nodes).toBe(2);
  });

  test("peers leave a behind node out of shares (it claims nothing), so its part is claimed by them", () => {
    // Three nodes, 12 seats; c is behind and holds nothing: a and b size their shares for two.
    const v = run({ self: { node_id: "a" }, seats: seats("s", 12), peers: [node("b"), node("c", { behind: true })], leases: {} });
    expect(v.groups[0]!.matching_nodes).toBe(2);
    expect(v.groups[0]!.share).toBe(6);
    // Level again: counted again.
    const level = run({ self: { node_id: "a" }, seats: seats("s", 12), peers: [node("b"), node("c", { behind: false })], leases: {} });
    expect(level.groups[0]!.share).toBe(4);
  });

  test("a withdrawn node gives every seat back at once, and peers do not count it", () => {
    const held = ["s01", "s02", "s03", "s04"];
    const p = run({ seats: seats("s", 4), self: { withdrawn: true }, healthy: held, peers: [node("b")] });
    expect(p.releases.map((r) => r.handle).sort()).toEqual(held);
    expect(p.releases.every((r) => r.reason === "withdrawn")).toBe(true);
    const peerView = run({ self: { node_id: "b" }, seats: seats("s", 4), peers: [node("a", { withdrawn: true, seats_held: 4 })], leases: {} });
    expect(peerView.groups[0]!.matching_nodes).toBe(1);
    expect(peerView.groups[0]!.share).toBe(4);
  });
});

describe("giving back", () => {
  test("a node that booted alone gives back its excess when a peer joins", () => {
    const all = seats("s", 12);
    const held = all.map((s) => s.handle);
    const a = run({ seats: all, peers: [node("b", { seats_held: 0 })], healthy: held });
    expect(a.groups[0]!.share).toBe(6);
    expect(a.releases).toHaveLength(RELEASE_LIMIT_PER_SWEEP);
    expect(a.releases.every((r) => r.reason === "rebalance")).toBe(true);
    expect(a.claims).toEqual([]);
    // The peer reads a full fleet off the counts and tries nothing…
    const b = run({ self: { node_id: "b" }, seats: all, peers: [node("a", { seats_held: 12 })] });
    expect(b.fleetFull).toBe(true);
    expect(b.leases_needed).toBe(false);
    // …until the giver advertises the release, then it claims what was given back.
    const leases = Object.fromEntries(held.slice(2).map((h) => [h, "a"]));
    const b2 = run({ self: { node_id: "b" }, seats: all, peers: [node("a", { seats_held: 10 })], leases });
    expect(b2.fleetFull).toBe(false);
    expect(b2.claims.sort()).toEqual(held.slice(0, 2));
  });

  test.each([
    // [what, seats, held idle (of the held), expected give-backs]
    ["idle seats that fork nothing: the whole excess in one pass", seats("q", 12, undefined, 0), 12, 6],
    ["more idle quiet excess than a pass allows: the quiet limit", seats("q", 600, undefined, 0), 600, QUIET_RELEASE_LIMIT_PER_SWEEP],
    ["quiet seats with a turn running or just settled: the spec's rate", seats("q", 12, undefined, 0), 0, RELEASE_LIMIT_PER_SWEEP],
    ["idle seats that fork (MCP servers): the spec's rate", seats("m", 12, undefined, 2), 12, RELEASE_LIMIT_PER_SWEEP],
    ["seats whose forks are unknown count as forking", seats("u", 12), 12, RELEASE_LIMIT_PER_SWEEP],
  ] as const)("a node that booted alone gives back its excess: %s", (_what, all, idleCount, expected) => {
    const held = all.map((s) => s.handle);
    const p = run({ seats: [...all], peers: [node("b", { seats_held: 0 })], healthy: held, idle: held.slice(0, idleCount) });
    expect(p.releases).toHaveLength(expected);
    expect(p.releases.every((r) => r.reason === "rebalance")).toBe(true);
    // Never below its share: what it keeps is at least ceil(seats / nodes).
    expect(held.length - p.releases.length).toBeGreaterThanOrEqual(p.groups[0]!.share);
  });

  test("idle quiet seats go first and beside the spec's two: busy and forking seats still go two a pass", () => {
    const quiet = seats("q", 6, undefined, 0);
    const mcp = seats("m", 6, undefined, 2);
    const busy = seats("b", 6, undefined, 0);
    const all = [...quiet, ...mcp, ...busy];
    const held = all.map((s) => s.handle);
    const idle = [...quiet, ...mcp].map((s) => s.handle);
    // Share 9 of 18: an excess of 9, of which 6 idle quiet seats and 2 more.
    const p = run({ seats: all, peers: [node("b", { seats_held: 0 })], healthy: held, idle });
    const given = p.releases.map((r) => r.handle);
    expect(given).toHaveLength(6 + RELEASE_LIMIT_PER_SWEEP);
    expect(given.slice(0, 6).sort()).toEqual(quiet.map((s) => s.handle));
    expect(given.slice(6).every((h) => !h.startsWith("q"))).toBe(true);
  });

  test("a late peer's share of 2,000 idle quiet seats arrives in a few passes, not hours", () => {
    const all = seats("q", 2_000, undefined, 0);
    let held = all.map((s) => s.handle);
    let passes = 0;
    // b and c joined: a gives back until it holds its share (667), b and c claim it all.
    while (passes < 100) {
      const p = run({ seats: all, peers: [node("b", { seats_held: 0 }), node("c", { seats_held: 0 })], healthy: held, idle: held });
      if (p.releases.length === 0) break;
      const gone = new Set(p.releases.map((r) => r.handle));
      held = held.filter((h) => !gone.has(h));
      passes++;
    }
    expect(held).toHaveLength(667);
    expect(passes).toBe(Math.ceil((2_000 - 667) / QUIET_RELEASE_LIMIT_PER_SWEEP));
  });

  test("giving back keeps the seats whose preferred hint names this node", () => {
    const all = seats("s", 4);
    const p = run({
      seats: all,
      peers: [node("b")],
      healthy: ["s01", "s02", "s03", "s04"],
      preferred: { s01: "a", s02: "a", s03: "b", s04: "b" },
    });
    expect(p.releases.map((r) => r.handle).sort()).toEqual(["s03", "s04"]);
  });

  test("the least constrained group gives back first, so a pinned seat is the last to go", () => {
    const all = [...seats("u", 6), ...seats("g", 4, { labels: { gpu: "yes" } })];
    // Alone earlier, now one peer matches each group: excess 3 unpinned, 2 gpu.
    const p = run({
      self: { labels: { gpu: "yes" } },
      seats: all,
      peers: [node("b", { labels: { gpu: "yes" } })],
      healthy: all.map((s) => s.handle),
    });
    expect(p.releases).toHaveLength(2);
    expect(p.releases.every((r) => r.handle.startsWith("u"))).toBe(true);
  });

  test("a node at its share holds steady: no claim, no release", () => {
    const all = seats("s", 6);
    const p = run({ seats: all, peers: [node("b", { seats_held: 3 })], healthy: ["s01", "s02", "s03"], leases: { s04: "b", s05: "b", s06: "b" } });
    expect(p.claims).toEqual([]);
    expect(p.releases).toEqual([]);
    expect(p.fleetFull).toBe(true);
  });

  test("seats whose role is gone or whose placement moved away are given back", () => {
    const p = run({
      seats: [{ handle: "moved", placement: { labels: { zone: "us" } } }, ...seats("s", 2)],
      peers: [node("b", { labels: { zone: "us" } })],
      healthy: ["gone", "moved", "s01"],
    });
    expect(p.releases).toEqual([
      { handle: "gone", reason: "role_gone" },
      { handle: "moved", reason: "placement_moved" },
    ]);
  });

  test("a seat still establishing counts against the share but is not given back", () => {
    const p = run({ seats: seats("s", 2), peers: [node("b")], healthy: ["s01"], not_ready: ["s02"] });
    expect(p.groups[0]!.held).toBe(2);
    expect(p.releases.map((r) => r.handle)).toEqual(["s01"]);
  });
});

describe("stuck seats", () => {
  test("a stuck seat squeezes the unpinned group, not the pinned one", () => {
    const all = [...seats("u", 2), { handle: "pinned", placement: { labels: { site: "edge" } } }];
    const p = run({
      self: { node_id: "sat", labels: { site: "edge" } },
      seats: all,
      peers: [node("a", { seats_held: 1 })],
      healthy: ["u01"],
      undead: ["old-role"],
      leases: { u02: "a" },
    });
    expect(p.capacity).toBe(2);
    const pinned = p.groups.find((g) => g.seats.includes("pinned"))!;
    const unpinned = p.groups.find((g) => g.seats.includes("u01"))!;
    expect(pinned.allowance).toBe(1);
    expect(unpinned.allowance).toBe(0);
    expect(p.releases).toEqual([{ handle: "u01", reason: "rebalance" }]);
    expect(p.claims).toEqual(["pinned"]);
  });

  test("stuck seats outside any group are not advertised; placeable ones are", () => {
    const p = run({ seats: seats("s", 3), undead: ["s01", "gone"], healthy: ["s02"] });
    expect(p.seats_held).toBe(2);
  });

  test("a stuck seat is never given back by the planner", () => {
    const p = run({ seats: seats("s", 2), peers: [node("b")], undead: ["s01", "s02"] });
    expect(p.releases).toEqual([]);
    expect(p.claims).toEqual([]);
  });
});

describe("unplaceable and fleet full", () => {
  test("a group no live node matches is unplaceable", () => {
    const all = [...seats("u", 2), { handle: "gpu", placement: { labels: { gpu: "yes" } } }];
    const p = run({ seats: all, peers: [node("b")], leases: {} });
    expect(p.unplaceable).toEqual(["gpu"]);
    expect(p.placeable).toBe(2);
    expect(p.claims).not.toContain("gpu");
  });

  test("a group only a withdrawn or draining node matches is unplaceable", () => {
    const all = [{ handle: "w", placement: { node: "w" } }, { handle: "d", placement: { node: "d" } }];
    const p = run({ seats: all, peers: [node("w", { withdrawn: true }), node("d", { draining: true })] });
    expect(p.unplaceable.sort()).toEqual(["d", "w"]);
  });

  test("a draining node's own pinned seats read unplaceable to itself", () => {
    const p = run({ self: { draining: true }, seats: [{ handle: "mine", placement: { node: "a" } }] });
    expect(p.unplaceable).toEqual(["mine"]);
  });

  test("presences covering every placeable seat: try nothing", () => {
    const all = seats("s", 6);
    const p = run({ seats: all, peers: [node("b", { seats_held: 4 }), node("c", { seats_held: 2 })] });
    expect(p.fleetFull).toBe(true);
    expect(p.claims).toEqual([]);
    expect(p.leases_needed).toBe(false);
  });

  test("counts short of the placeable seats ask for the leases", () => {
    const all = seats("s", 6);
    const p = run({ seats: all, peers: [node("b", { seats_held: 3 })] });
    expect(p.fleetFull).toBe(false);
    expect(p.leases_needed).toBe(true);
    expect(p.claims).toEqual([]);
  });

  test("a stuck seat whose role is gone does not stand in for a free one", () => {
    const all = seats("s", 3);
    // b holds two placeable seats; a holds a stuck seat of a removed role. Counted, the
    // stuck seat would make 3 of 3 and the free seat would never be tried.
    const p = run({ seats: all, peers: [node("b", { seats_held: 2 })], undead: ["gone"], leases: { s01: "b", s02: "b" } });
    expect(p.fleetFull).toBe(false);
    expect(p.claims).toEqual(["s03"]);
  });

  test("unplaceable seats do not count toward the fleet being full", () => {
    const all = [...seats("s", 2), { handle: "x", placement: { node: "nobody" } }];
    const p = run({ seats: all, peers: [node("b", { seats_held: 2 })] });
    expect(p.placeable).toBe(2);
    expect(p.fleetFull).toBe(true);
  });
});

function byGroup(all: SeatSpec[], hs: Set<string>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of all) if (hs.has(s.handle)) out[placementKey(s.placement)] = (out[placementKey(s.placement)] ?? 0) + 1;
  return out;
}
function converge(
  nodeIds: string[],
  labels: Record<string, Record<string, string>>,
  all: SeatSpec[],
  start?: Map<string, Set<string>>,
) {
  const held = start ?? new Map<string, Set<string>>(nodeIds.map((n) => [n, new Set<string>()]));
  for (let round = 0; round < 200; round++) {
    let moved = false;
    for (const id of nodeIds) {
      const others = nodeIds.filter((n) => n !== id);
      const leases: Record<string, string> = {};
      for (const [n, hs] of held) for (const h of hs) leases[h] = n;
      const p = run({
        self: { node_id: id, labels: labels[id] ?? {} },
        seats: all,
        peers: others.map((n) =>
          node(n, { labels: labels[n] ?? {}, seats_held: held.get(n)!.size, seats_by_group: byGroup(all, held.get(n)!) }),
        ),
        healthy: [...held.get(id)!],
        leases,
      });
      for (const r of p.releases) held.get(id)!.delete(r.handle);
      for (const c of p.claims) held.get(id)!.add(c);
      if (p.releases.length || p.claims.length) moved = true;
    }
    if (!moved) return { held, rounds: round };
  }
  throw new Error("did not converge");
}


describe("convergence", () => {
  // Repeatedly plan every node against the others' holdings until nothing moves: shares
  // over the nodes that match a group cover it, and a node at its share never re-claims.
  test("12 seats over 3 nodes settle 4/4/4 from an empty fleet", () => {
    const { held } = converge(["a", "b", "c"], {}, seats("s", 12));
    expect([...held.values()].map((s) => s.size)).toEqual([4, 4, 4]);
  });

  test("mixed groups settle with every placeable seat held once, balanced per group", () => {
    const all = [...seats("u", 7), ...seats("g", 3, { labels: { gpu: "yes" } }), { handle: "pin", placement: { node: "c" } }];
    const labels = { a: { gpu: "yes" }, b: { gpu: "yes" } };
    const { held } = converge(["a", "b", "c"], labels, all);
    const owners = new Map<string, string[]>();
    for (const [n, hs] of held) for (const h of hs) owners.set(h, [...(owners.get(h) ?? []), n]);
    expect(owners.size).toBe(all.length);
    for (const o of owners.values()) expect(o).toHaveLength(1);
    expect(owners.get("pin")).toEqual(["c"]);
    const gpu = ["a", "b"].map((n) => [...held.get(n)!].filter((h) => h.startsWith("g")).length);
    expect(Math.max(...gpu) - Math.min(...gpu)).toBeLessThanOrEqual(1);
  });
});

describe("convergence with a mixed company", () => {
  const all = [...seats("m", 9, undefined, 2), ...seats("q", 60, undefined, 0), ...seats("g", 6, { labels: { gpu: "yes" } }, 0)];
  const labels = { a: { gpu: "yes" }, c: { gpu: "yes" } };
  test("from empty: every seat held once, balanced per group, forks never over the limit in a pass", () => {
    const { held } = converge(["a", "b", "c"], labels, all);
    const owners = new Map<string, string[]>();
    for (const [n, hs] of held) for (const h of hs) owners.set(h, [...(owners.get(h) ?? []), n]);
    expect(owners.size).toBe(all.length);
    for (const o of owners.values()) expect(o).toHaveLength(1);
    const ungrouped = ["a", "b", "c"].map((n) => [...held.get(n)!].filter((h) => !h.startsWith("g")).length);
    expect(Math.max(...ungrouped) - Math.min(...ungrouped)).toBeLessThanOrEqual(1);
    const gpu = ["a", "c"].map((n) => [...held.get(n)!].filter((h) => h.startsWith("g")).length);
    expect(gpu).toEqual([3, 3]);
  });

  test("a node that booted alone took the quiet seats at once and the forking ones four a pass; peers joining then balance it", () => {
    const alone = new Map([["a", new Set<string>()]]);
    const passes: number[] = [];
    for (let i = 0; i < 5; i++) {
      const before = alone.get("a")!.size;
      const p = run({ self: { node_id: "a", labels: labels.a }, seats: all, healthy: [...alone.get("a")!], leases: {} });
      for (const c of p.claims) alone.get("a")!.add(c);
      expect(p.claims.filter((h) => h.startsWith("m")).length).toBeLessThanOrEqual(CLAIM_LIMIT_PER_SWEEP);
      passes.push(alone.get("a")!.size - before);
    }
    // Pass 1: 4 forking + 66 quiet; pass 2: 4 forking; pass 3: the last forking one.
    expect(passes).toEqual([70, 4, 1, 0, 0]);
    const start = new Map([...alone, ["b", new Set<string>()], ["c", new Set<string>()]]);
    const { held } = converge(["a", "b", "c"], labels, all, start);
    const ungrouped = ["a", "b", "c"].map((n) => [...held.get(n)!].filter((h) => !h.startsWith("g")).length);
    expect(Math.max(...ungrouped) - Math.min(...ungrouped)).toBeLessThanOrEqual(1);
    expect(ungrouped.reduce((x, y) => x + y, 0)).toBe(69);
  });
});

describe("balancing", () => {
  const all = seats("s", 12);
  const key = placementKey(undefined);
  const full = (counts: Record<string, number>) =>
    Object.entries(counts).map(([id, n]) => node(id, { seats_held: n, seats_by_group: n > 0 ? { [key]: n } : {} }));
  const mine = (n: number) => all.slice(0, n).map((s) => s.handle);

  test("a full group whose counts differ by two gives one seat back, from exactly one node", () => {
    // 12 seats on 5 nodes rest at 3/3/3/3/0 on ceiling shares alone.
    const movers = ["a", "b", "c", "d"].filter((id) => {
      const peers = full({ a: 3, b: 3, c: 3, d: 3, e: 0 }).filter((p) => p.node_id !== id);
      return run({ self: { node_id: id }, seats: all, peers, healthy: mine(3) }).releases.length > 0;
    });
    expect(movers).toEqual(["d"]);
  });

  test("past the floor only a node holding no more than every peer may claim", () => {
    // d just gave one back: 3/3/3/2/0. d (at 2 = floor) may not take it back; e may.
    const leases = Object.fromEntries(all.slice(1).map((s) => [s.handle, "x"]));
    const d = run({ self: { node_id: "d" }, seats: all, peers: full({ a: 3, b: 3, c: 3, e: 0 }), healthy: mine(2), leases });
    expect(d.groups[0]!.floor).toBe(2);
    expect(d.claims).toEqual([]);
    const e = run({ self: { node_id: "e" }, seats: all, peers: full({ a: 3, b: 3, c: 3, d: 2 }), leases });
    expect(e.claims).toEqual(["s01"]);
  });

  test("a group that is not fully held does not balance: the free seats are claimed instead", () => {
    const p = run({ self: { node_id: "d" }, seats: all, peers: full({ a: 3, b: 3, e: 0 }), healthy: mine(3) });
    expect(p.releases).toEqual([]);
  });

  test("a peer whose row does not carry per-group counts stops balancing, never starts it", () => {
    const peers = [...full({ a: 3, b: 3, c: 3 }), node("e", { seats_held: 0 })];
    const p = run({ self: { node_id: "d" }, seats: all, peers, healthy: mine(3) });
    expect(p.releases).toEqual([]);
  });

  test("nodes joining a full fleet one at a time end within one seat of each other", () => {
    const ids = ["a", "b", "c", "d", "e"];
    let held = new Map<string, Set<string>>();
    for (let i = 1; i <= ids.length; i++) {
      const present = ids.slice(0, i);
      for (const id of present) if (!held.has(id)) held.set(id, new Set());
      held = converge(present, {}, all, held).held;
    }
    const counts = [...held.values()].map((s) => s.size);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(12);
    expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(1);
  });
});

describe("unmanned roles", () => {
  test("a role no live, non-draining presence carries is unmanned", () => {
    const peers = [node("b", { roles: ["seats"] }), node("c", { roles: ["workers", "data"], draining: true })];
    const self: SelfFacts = { node_id: "a", roles: ["data", "seats"], labels: {}, protocol: 4, draining: false, withdrawn: false, behind: false, takeover: false };
    expect(unmannedRoles(peers, self)).toEqual(["ingress", "workers"]);
  });
});
