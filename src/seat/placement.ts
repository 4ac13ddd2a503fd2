// The placement planner (spec: Seat Ownership § Placement). A PURE function from one
// snapshot of the fleet to this node's decisions for one sweep: which seats to claim,
// which to give back, which no live node can run, and whether the fleet is already full.
// No I/O and no clock reads (lease liveness arrives judged by the store's clock), so every
// rule below is a table test (test/seat/placement.test.ts) and the seat host is a thin caller.
import { HEARTBEATS_PER_TTL } from "../coord/contract.ts";

/** Seats whose acquire spawns subprocesses (MCP servers) a node may claim in one pass. Each
 * such takeover forks the seat's MCP subprocess trees, so four per five-second sweep absorbs
 * twenty of them in ~25 s and never forks more than four seats' trees in one tick (spec:
 * seat.ClaimLimitPerSweep). A seat whose spawn count is unknown is charged here. */
export const CLAIM_LIMIT_PER_SWEEP = 4;
/** Seats whose acquire spawns nothing a node may claim in one pass. Such a claim costs a
 * handful of broker round trips (the lease write, the memory hydration read, the reflection
 * subscription, the inbox attach) and no fork, so the spawn limit above would only slow it:
 * 2,000 such seats took ~40 minutes at four a pass. Still bounded: 250 claims at
 * CLAIMS_IN_FLIGHT at a time are ~1,000 requests in one pass, which a broker answers within
 * a sweep or two, so a pass ends about when the next begins (a pass whose claims are still
 * running claims nothing), and 2,000 seats are held within eight passes (~40 s, the issue's
 * 60 s target) where the box keeps up. It also caps how far a node that boots first overshoots its share
 * before a peer's presence row shrinks it: one pass's worth. */
export const QUIET_CLAIM_LIMIT_PER_SWEEP = 250;
/** Claims a pass runs at once. A claim is latency-bound (each of its round trips waits on
 * the broker): measured on a loaded 2-core box at 16 in flight, ~0.9 s a claim held a
 * 250-claim pass for ~14 s. 64 keeps a pass near one sweep interval with ~64 outstanding
 * small requests, and at most four of any pass fork anything. */
export const CLAIMS_IN_FLIGHT = 64;
/** Seats a node may give back in one pass: fewer than it claims, because giving a seat up
 * interrupts a live agent while claiming one only starts it. */
export const RELEASE_LIMIT_PER_SWEEP = 2;
/** Idle seats that fork nothing a node may give back in one pass, beside the two above. Such
 * a give-back interrupts no agent (no turn in flight, none settled within the last pass)
 * and a peer takes the seat back without a fork, so the spec's two would bound nothing it
 * exists for and only keep late peers waiting: a node that booted first with 10,000 seats
 * gives two late peers their shares in ~4.6 h at two a pass. As many as a peer claims of
 * such seats in a pass, so what one pass gives back the next takes back. */
export const QUIET_RELEASE_LIMIT_PER_SWEEP = QUIET_CLAIM_LIMIT_PER_SWEEP;
/** The cadence for what changes in the fleet (joins, leaves, lapses). Shorter buys nothing
 * a lease TTL does not already bound; longer leaves a dead node's seats dark longer. */
export const SWEEP_INTERVAL_MS = 5_000;
/** A stuck teardown is not news, still failing is: re-raise the alarm every twenty
 * heartbeats (five minutes at the shipped TTL). */
export const UNDEAD_ALARM_EVERY_HEARTBEATS = 20;

export function heartbeatMs(lease_ttl_ms: number): number {
  return Math.floor(lease_ttl_ms / HEARTBEATS_PER_TTL);
}

/** The node roles a fleet must have someone doing (Scaling Out § What a node is). */
export const FLEET_ROLES = ["data", "ingress", "seats", "workers"] as const;
/** The node role that places seats. */
export const SEATS_ROLE = "seats";

export interface SeatPlacement {
  /** Every label must match the node's. */
  labels?: Readonly<Record<string, string>>;
  /** Pins the seat to one node id. */
  node?: string;
}

export interface SeatSpec {
  handle: string;
  placement?: SeatPlacement;
  /** Subprocess trees its acquire forks (its role's MCP servers). Absent: unknown, charged
   * as a spawning seat, so it ramps at the spec's rate. */
  spawns?: number;
}

/** Whether acquiring the seat forks anything (see CLAIM_LIMIT_PER_SWEEP). */
export function spawnsOnAcquire(seat: SeatSpec): boolean {
  return seat.spawns === undefined || seat.spawns > 0;
}

/** A live presence row (node:{id}), already parsed. */
export interface PresenceFact {
  node_id: string;
  roles: readonly string[];
  labels: Readonly<Record<string, string>>;
  protocol: number;
  /** Seats it runs plus stuck ones, placeable only; an unreadable count reads as 0. */
  seats_held: number;
  /** Seats it holds per placement group (placementKey → count); absent when the row does
   * not say, and then it takes no part in balancing. */
  seats_by_group?: Readonly<Record<string, number>>;
  draining: boolean;
  withdrawn: boolean;
  /** Its estate copy is catching up: it claims nothing, so peers leave it out of shares
   * until it is level (absent on an older node's row: not behind). */
  behind?: boolean;
}

/** A seat lease as the store last showed it. */
export interface SeatLeaseFact {
  /** The holder's node id (the owner's `{node_id}` part). */
  node_id: string;
  /** Held by this very incarnation. */
  mine: boolean;
  /** Held by an earlier incarnation of this node that this process has proved dead (it
   * ran on the store whose lock this process holds). */
  predecessor: boolean;
  /** Judged against the store's clock when it was read. */
  live: boolean;
  protocol: number;
}

export interface SelfFacts {
  node_id: string;
  roles: readonly string[];
  labels: Readonly<Record<string, string>>;
  protocol: number;
  draining: boolean;
  /** Unserviceable: gives every seat back and claims nothing until it clears. */
  withdrawn: boolean;
  /** Its copy is catching up: keeps what it holds, claims nothing new. */
  behind: boolean;
  /** This incarnation holds the store-dir lock, so a live lease naming its node id is a
   * dead predecessor's and may be taken over. */
  takeover: boolean;
}

export interface Holdings {
  /** Established and admitting turns. */
  healthy: readonly string[];
  /** Teardown could not be proven: lease kept and renewed, charged first. */
  undead: readonly string[];
  /** Held but not releasable this pass: establishing, or already on its way out. */
  not_ready: readonly string[];
  /** Healthy seats known to be idle (no turn in flight, none settled within the last pass);
   * absent or empty, every seat counts as busy and gives back at the spec's rate. */
  idle?: readonly string[];
}

export interface PlanInput {
  self: SelfFacts;
  seats: readonly SeatSpec[];
  /** Live presences (this node's own row may be absent or stale; self facts win). */
  presences: readonly PresenceFact[];
  holdings: Holdings;
  /** handle → the node id a seat's lease last named (live or lapsed), for stickiness. */
  preferred: ReadonlyMap<string, string>;
  /** Current seat leases, or null when the caller has not read them (a fleet-full pass
   * needs none: see `leases_needed`). */
  leases: ReadonlyMap<string, SeatLeaseFact> | null;
  /** Lowest protocol among live presence and seat leases, when known. */
  protocol_floor: number | null;
}

export type ReleaseReason = "rebalance" | "role_gone" | "placement_moved" | "withdrawn" | "draining" | "not_placing";
export type WithheldReason = "draining" | "withdrawn" | "behind" | "protocol" | "no_seats_role";

export interface GroupPlan {
  key: string;
  placement: SeatPlacement;
  seats: string[];
  /** Live nodes placing seats that match this group (this node included when it does). */
  matching_nodes: number;
  /** ceil(size / matching nodes); 0 when nobody matches. */
  share: number;
  /** What this node may hold of the group once stuck seats are charged. */
  allowance: number;
  /** Held here (healthy + not ready). */
  held: number;
  self_matches: boolean;
  /** floor(size / matching nodes): anyone may claim up to this; past it only a node
   * holding no more of the group than any peer does (see `balance`). */
  floor: number;
  /** Fewest seats of the group a matching peer says it holds; null when none says. */
  peer_min: number | null;
}

export interface Plan {
  claims: string[];
  releases: { handle: string; reason: ReleaseReason }[];
  /** Live leases held by this incarnation that it does not track (a claim whose answer
   * was lost): give them back so the seat is free at once rather than after a TTL. */
  orphans: string[];
  unplaceable: string[];
  fleetFull: boolean;
  /** Σ shares of the groups this node matches: what seat_sweep reports held against. */
  capacity: number;
  placeable: number;
  /** Seats this node would advertise as seats_held (placeable ones only). */
  seats_held: number;
  /** What this node would advertise as seats_by_group. */
  seats_by_group: Record<string, number>;
  withheld: WithheldReason | null;
  /** There is room and claiming is allowed, but the caller passed no leases to judge. */
  leases_needed: boolean;
  groups: GroupPlan[];
}

/** A canonical key per distinct placement: seats that share one placement are a group. */
export function placementKey(p: SeatPlacement | undefined): string {
  const labels = Object.entries(p?.labels ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify({ node: p?.node ?? null, labels });
}

export function nodeMatches(node: { node_id: string; labels: Readonly<Record<string, string>> }, p: SeatPlacement | undefined): boolean {
  if (p?.node !== undefined && p.node !== node.node_id) return false;
  for (const [k, v] of Object.entries(p?.labels ?? {})) {
    if (node.labels[k] !== v) return false;
  }
  return true;
}

/** A node that places seats: it runs the seats role and is neither leaving nor withdrawn. */
export function placesSeats(p: { roles: readonly string[]; draining: boolean; withdrawn: boolean }): boolean {
  return p.roles.includes(SEATS_ROLE) && !p.draining && !p.withdrawn;
}

/** The owner string of a lease is `{node_id}:{random}`; the node id is everything before
 * the last colon (node ids never contain one). */
export function ownerNodeId(owner: string): string {
  const i = owner.lastIndexOf(":");
  return i < 0 ? owner : owner.slice(0, i);
}

/** FNV-1a: spreads nodes racing for the same free seats over different orders. */
function spread(node_id: string, handle: string): number {
  let h = 0x811c9dc5;
  const s = `${node_id}\u0000${handle}`;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

function byText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Roles no live, non-draining presence carries (fleet_role_unmanned). */
export function unmannedRoles(presences: readonly PresenceFact[], self?: SelfFacts): string[] {
  const rows: { roles: readonly string[]; draining: boolean }[] = [...presences.filter((p) => p.node_id !== self?.node_id)];
  if (self) rows.push(self);
  return FLEET_ROLES.filter((role) => !rows.some((p) => !p.draining && p.roles.includes(role)));
}

/**
 * One pass's give-backs: idle quiet seats from QUIET_RELEASE_LIMIT_PER_SWEEP, every other
 * seat from RELEASE_LIMIT_PER_SWEEP; a withdrawn node gives everything back at once. A
 * seat over its budget is passed over, so an idle one behind it may still go.
 */
function releaseBudget(withdrawn: boolean, quietIdle: ReadonlySet<string>): { take(h: string): boolean; spent(): boolean } {
  let busy = 0;
  let quiet = 0;
  const quietLimit = Math.min(QUIET_RELEASE_LIMIT_PER_SWEEP, quietIdle.size);
  return {
    take(h) {
      if (withdrawn) return true;
      if (quietIdle.has(h)) {
        if (quiet >= quietLimit) return false;
        quiet++;
        return true;
      }
      if (busy >= RELEASE_LIMIT_PER_SWEEP) return false;
      busy++;
      return true;
    },
    spent: () => !withdrawn && busy >= RELEASE_LIMIT_PER_SWEEP && quiet >= quietLimit,
  };
}

export function plan(input: PlanInput): Plan {
  const { self } = input;
  const selfPlaces = placesSeats(self);
  // Self facts win over its own (possibly stale or missing) presence row.
  const nodes: PresenceFact[] = input.presences.filter((p) => p.node_id !== self.node_id);
  // A behind peer claims nothing until its copy is level: counting it would size every
  // share for a node that will not take one, leaving its part of the seats unowned (seen:
  // 44 s after a freeze). It keeps what it holds; only the shares leave it out.
  const placing = nodes.filter((p) => placesSeats(p) && !p.behind);

  // Groups, most constrained (fewest matching nodes) first; ties by size then key so
  // every node orders them alike.
  const byKey = new Map<string, { placement: SeatPlacement; seats: string[] }>();
  for (const seat of input.seats) {
    const key = placementKey(seat.placement);
    let g = byKey.get(key);
    if (!g) byKey.set(key, (g = { placement: seat.placement ?? {}, seats: [] }));
    g.seats.push(seat.handle);
  }
  const healthy = new Set(input.holdings.healthy);
  const notReady = new Set(input.holdings.not_ready);
  const undead = new Set(input.holdings.undead);
  const groups: GroupPlan[] = [];
  const groupOf = new Map<string, GroupPlan>();
  for (const [key, g] of byKey) {
    const self_matches = selfPlaces && nodeMatches(self, g.placement);
    const matching_nodes = placing.filter((p) => nodeMatches(p, g.placement)).length + (self_matches ? 1 : 0);
    const share = matching_nodes > 0 ? Math.ceil(g.seats.length / matching_nodes) : 0;
    const held = g.seats.filter((h) => healthy.has(h) || notReady.has(h)).length;
    const floor = matching_nodes > 0 ? Math.floor(g.seats.length / matching_nodes) : 0;
    const gp: GroupPlan = {
      key,
      placement: g.placement,
      seats: [...g.seats].sort(byText),
      matching_nodes,
      share,
      allowance: 0,
      held,
      self_matches,
      floor,
      peer_min: null,
    };
    groups.push(gp);
    for (const h of g.seats) groupOf.set(h, gp);
  }
  groups.sort((a, b) => a.matching_nodes - b.matching_nodes || a.seats.length - b.seats.length || byText(a.key, b.key));

  const unplaceable = groups.filter((g) => g.matching_nodes === 0).flatMap((g) => g.seats);
  const placeableSet = new Set(groups.filter((g) => g.matching_nodes > 0).flatMap((g) => g.seats));
  const placeable = placeableSet.size;

  // Stuck seats are charged first, wherever they sit (even in no group); what is left is
  // handed to this node's groups most constrained first, each up to its share. One number
  // per group, read by both claiming and giving back: no total kept beside it.
  const mine = groups.filter((g) => g.self_matches);
  const capacity = mine.reduce((n, g) => n + g.share, 0);
  let left = Math.max(0, capacity - undead.size);
  for (const g of mine) {
    g.allowance = Math.min(g.share, left);
    left -= g.allowance;
  }

  const heldHere = [...healthy, ...notReady, ...undead];
  const seats_held = heldHere.filter((h) => placeableSet.has(h)).length;

  // Releases: seats this node may no longer run first (role gone, placement moved, or the
  // node stopped placing), then each group's excess, least constrained groups first so a
  // pinned seat is the last to go. Withdrawn gives everything back at once: its seats'
  // work cannot be served here at all, so the interruption limit buys nothing.
  const releases: { handle: string; reason: ReleaseReason }[] = [];
  const spawning = new Set(input.seats.filter(spawnsOnAcquire).map((s) => s.handle));
  const quietIdle = new Set((input.holdings.idle ?? []).filter((h) => !spawning.has(h)));
  const budget = releaseBudget(self.withdrawn, quietIdle);
  const keepOrder = (a: string, b: string) => {
    // Give back seats whose stickiness points elsewhere first, then idle quiet ones (they
    // interrupt nobody), then a stable spread.
    const pa = input.preferred.get(a) === self.node_id ? 1 : 0;
    const pb = input.preferred.get(b) === self.node_id ? 1 : 0;
    const ia = quietIdle.has(a) ? 0 : 1;
    const ib = quietIdle.has(b) ? 0 : 1;
    return pa - pb || ia - ib || spread(self.node_id, b) - spread(self.node_id, a);
  };
  const unrunnable = [...healthy]
    .filter((h) => {
      const g = groupOf.get(h);
      return !g || !g.self_matches;
    })
    .sort(byText);
  for (const h of unrunnable) {
    if (budget.spent()) break;
    if (!budget.take(h)) continue;
    let reason: ReleaseReason = groupOf.has(h) ? "placement_moved" : "role_gone";
    if (!selfPlaces) reason = self.withdrawn ? "withdrawn" : self.draining ? "draining" : "not_placing";
    releases.push({ handle: h, reason });
  }
  for (const g of [...mine].reverse()) {
    if (budget.spent()) break;
    let excess = g.held - g.allowance;
    for (const h of g.seats.filter((h) => healthy.has(h)).sort(keepOrder)) {
      if (excess <= 0 || budget.spent()) break;
      if (!budget.take(h)) continue;
      releases.push({ handle: h, reason: "rebalance" });
      excess--;
    }
  }

  // Balance. Ceiling shares alone leave a node that joined a full fleet short for good
  // (12 seats on 5 nodes can rest at 3/3/3/3/0: nobody is over its share of 3). Peers say
  // per group what they hold, so: past the floor only a node holding no more of a group
  // than any peer may claim in it, and when the group is fully held and its counts differ
  // by two or more, the one node at the top (highest node id among those at the maximum,
  // so exactly one moves) gives one seat back. Each such move takes a seat from a node at
  // the maximum to one at least two below it, so the sum of squared counts falls and the
  // moves stop; nothing is claimed on the counts, so a stale one costs a move, never a
  // seat held twice.
  for (const g of mine) {
    const counts: { node_id: string; held: number }[] = [{ node_id: self.node_id, held: g.held }];
    for (const p of placing) {
      if (!p.seats_by_group || !nodeMatches(p, g.placement)) continue;
      counts.push({ node_id: p.node_id, held: Math.max(0, p.seats_by_group[g.key] ?? 0) });
    }
    const peers = counts.slice(1);
    g.peer_min = peers.length > 0 ? Math.min(...peers.map((c) => c.held)) : null;
    if (budget.spent() || releases.some((r) => groupOf.get(r.handle) === g)) continue;
    if (peers.length + 1 < g.matching_nodes) continue; // someone's count is unknown
    const total = counts.reduce((n, c) => n + c.held, 0);
    const max = Math.max(...counts.map((c) => c.held));
    const min = Math.min(...counts.map((c) => c.held));
    if (total < g.seats.length || max - min < 2 || g.held !== max) continue;
    const top = counts.filter((c) => c.held === max).map((c) => c.node_id).sort(byText).at(-1);
    if (top !== self.node_id) continue;
    const candidate = g.seats.filter((h) => healthy.has(h)).sort(keepOrder).find((h) => budget.take(h));
    if (candidate) releases.push({ handle: candidate, reason: "rebalance" });
  }

  // Presences' counts (this node's own from its holdings) covering every placeable seat
  // means nothing is free: try nothing. The counts err toward trying (unreadable = 0, a
  // lapsed presence is not listed), and nothing is claimed on them.
  const advertised = nodes.reduce((n, p) => n + Math.max(0, p.seats_held), 0) + seats_held;
  const fleetFull = placeable > 0 && advertised >= placeable;

  const withheld: WithheldReason | null = !self.roles.includes(SEATS_ROLE)
    ? "no_seats_role"
    : self.draining
      ? "draining"
      : self.withdrawn
        ? "withdrawn"
        : self.behind
          ? "behind"
          : input.protocol_floor !== null && input.protocol_floor < self.protocol
            ? "protocol"
            : null;

  const orphans: string[] = [];
  const tracked = new Set(heldHere);
  if (input.leases) {
    for (const [h, l] of input.leases) {
      if (l.mine && l.live && !tracked.has(h)) orphans.push(h);
    }
    orphans.sort(byText);
  }

  const claims: string[] = [];
  const roomIn = (g: GroupPlan): number => {
    const cap = g.peer_min === null ? Number.POSITIVE_INFINITY : Math.max(g.floor, g.peer_min + 1);
    return Math.min(g.allowance, cap) - g.held;
  };
  const room = mine.some((g) => roomIn(g) > 0);
  const mayClaim = withheld === null && !fleetFull && room;
  const leases_needed = mayClaim && input.leases === null;
  if (mayClaim && input.leases) {
    const leases = input.leases;
    const free = (h: string): boolean => {
      if (tracked.has(h)) return false;
      const l = leases.get(h);
      if (!l || !l.live) return true;
      // A live lease of an earlier incarnation on this store is a dead predecessor's,
      // provably so only while this process holds the store-dir lock. One with this
      // node id from another store is a live process's: never free.
      return self.takeover && !l.mine && l.predecessor;
    };
    const claimOrder = (a: string, b: string) => {
      const pa = input.preferred.get(a) === self.node_id ? 0 : 1;
      const pb = input.preferred.get(b) === self.node_id ? 0 : 1;
      return pa - pb || spread(self.node_id, a) - spread(self.node_id, b);
    };
    // Two budgets per pass: seats that fork (the spec's rate) and seats that do not. A seat
    // over its budget is passed over, so a quiet seat behind it may still be taken.
    let forks = 0;
    let quiet = 0;
    for (const g of mine) {
      if (forks >= CLAIM_LIMIT_PER_SWEEP && quiet >= QUIET_CLAIM_LIMIT_PER_SWEEP) break;
      const roomHere = roomIn(g);
      if (roomHere <= 0) continue;
      let taken = 0;
      for (const h of g.seats.filter(free).sort(claimOrder)) {
        if (taken >= roomHere) break;
        if (spawning.has(h)) {
          if (forks >= CLAIM_LIMIT_PER_SWEEP) continue;
          forks++;
        } else {
          if (quiet >= QUIET_CLAIM_LIMIT_PER_SWEEP) continue;
          quiet++;
        }
        claims.push(h);
        taken++;
      }
    }
  }

  const seats_by_group: Record<string, number> = {};
  for (const g of groups) if (g.held > 0) seats_by_group[g.key] = g.held;

  return { claims, releases, orphans, unplaceable, fleetFull, capacity, placeable, seats_held, seats_by_group, withheld, leases_needed, groups };
}
