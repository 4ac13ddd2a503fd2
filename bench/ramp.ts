// The claim ramp, from the real planner (src/seat/placement.ts) alone: every node runs
// plan() once a sweep on the fleet as it stands and its claims and give-backs land before
// the next sweep. No broker, no clock: a pass is assumed to finish within its sweep (the
// real one runs CLAIMS_IN_FLIGHT claims at a time; on this box 2,000 quiet seats took 45.9 s
// against the model's 40 s), so the times are lower bounds. It answers what the issue asks
// of 10,000 seats: how long until all are held, and how long until a node that joined late
// gets its share (give-backs: QUIET_RELEASE_LIMIT_PER_SWEEP a pass of idle seats that fork
// nothing, RELEASE_LIMIT_PER_SWEEP of any other, the spec's rate).
//   bun bench/ramp.ts [--seats 10000] [--join 0,0,0] [--spawning] [--busy] [--every 60] [--max-hours 12]
// --join: each node's join time in seconds; --spawning: seats whose acquire forks (the
// spec's 4 a pass); --busy: every seat always has a turn running (never idle), the worst
// case for give-backs; --every: seconds between progress lines; --max-hours: when to give up.
import { z } from "zod";
import { benchArgs, countFlag, numberListFlag } from "./args.ts";
import {
  CLAIM_LIMIT_PER_SWEEP,
  plan,
  placementKey,
  QUIET_CLAIM_LIMIT_PER_SWEEP,
  QUIET_RELEASE_LIMIT_PER_SWEEP,
  RELEASE_LIMIT_PER_SWEEP,
  SWEEP_INTERVAL_MS,
  type PresenceFact,
  type SeatLeaseFact,
  type SeatSpec,
} from "../src/seat/placement.ts";

const args = benchArgs(
  "ramp",
  "[--seats 10000] [--join 0,0,0] [--spawning] [--busy] [--every 60] [--max-hours 12]",
  z.object({
    seats: countFlag(10_000, 1_000_000),
    join: numberListFlag("0,0,0", z.number().nonnegative("seconds, comma-separated, each ≥ 0")),
    spawning: z.boolean().default(false),
    busy: z.boolean().default(false),
    every: z.coerce.number().positive().default(60),
    "max-hours": z.coerce.number().positive().default(12),
  }),
  ["spawning", "busy"],
);
const SEATS = args.seats;
const JOIN_S = args.join;
const EVERY_S = args.every;
const MAX_S = args["max-hours"] * 3600;

const seats: SeatSpec[] = Array.from({ length: SEATS }, (_, i) => ({ handle: `a${i}`, spawns: args.spawning ? 1 : 0 }));
const GROUP = placementKey(undefined);
const nodes = JOIN_S.map((join_s, i) => ({ id: `n${i + 1}`, join_s, held: new Set<string>() }));
const holder = new Map<string, string>();

function presences(live: typeof nodes): PresenceFact[] {
  return live.map((n) => ({
    node_id: n.id,
    roles: ["seats"],
    labels: {},
    protocol: 4,
    seats_held: n.held.size,
    seats_by_group: { [GROUP]: n.held.size },
    draining: false,
    withdrawn: false,
  }));
}

function sweep(n: (typeof nodes)[number], live: typeof nodes): void {
  const leases = new Map<string, SeatLeaseFact>();
  for (const [handle, node_id] of holder) leases.set(handle, { node_id, mine: node_id === n.id, predecessor: false, live: true, protocol: 4 });
  const p = plan({
    self: { node_id: n.id, roles: ["seats"], labels: {}, protocol: 4, draining: false, withdrawn: false, behind: false, takeover: false },
    seats,
    presences: presences(live),
    holdings: { healthy: [...n.held], undead: [], not_ready: [], idle: args.busy ? [] : [...n.held] },
    preferred: holder,
    leases,
    protocol_floor: 4,
  });
  for (const { handle } of p.releases) {
    n.held.delete(handle);
    holder.delete(handle);
  }
  for (const handle of p.claims) {
    if (holder.has(handle)) continue; // a peer's claim this sweep won the lease
    holder.set(handle, n.id);
    n.held.add(handle);
  }
}

const limit = args.spawning ? CLAIM_LIMIT_PER_SWEEP : QUIET_CLAIM_LIMIT_PER_SWEEP;
const gives = args.spawning || args.busy ? RELEASE_LIMIT_PER_SWEEP : QUIET_RELEASE_LIMIT_PER_SWEEP;
console.log(`ramp: ${SEATS} seats (${args.spawning ? "spawning" : "quiet"}${args.busy ? ", always busy" : ", idle"}: ${limit} claims a pass, ${gives} give-backs), nodes join at ${JOIN_S.join(", ")} s, a sweep every ${SWEEP_INTERVAL_MS / 1000} s`);
let allHeld_s: number | null = null;
let balanced_s: number | null = null;
const lastJoin_s = Math.max(...JOIN_S);
for (let tick = 0; tick * SWEEP_INTERVAL_MS <= MAX_S * 1000; tick++) {
  const t_s = (tick * SWEEP_INTERVAL_MS) / 1000;
  const live = nodes.filter((n) => n.join_s <= t_s);
  // Nodes sweep in a rotating order, as unsynchronised timers would.
  for (let i = 0; i < live.length; i++) sweep(live[(i + tick) % live.length]!, live);
  const counts = live.map((n) => n.held.size);
  if (allHeld_s === null && holder.size === SEATS) allHeld_s = t_s;
  const spread = Math.max(...counts) - Math.min(...counts);
  if (t_s % EVERY_S === 0) console.log(`t=${t_s}s held ${nodes.map((n) => (n.join_s <= t_s ? `${n.id}=${n.held.size}` : `${n.id}=-`)).join(" ")} free=${SEATS - holder.size}`);
  if (t_s >= lastJoin_s && holder.size === SEATS && spread <= 1) {
    balanced_s = t_s;
    break;
  }
}
const fmt = (s: number | null) => (s === null ? "never" : `${s}`);
console.log(`seats=${SEATS} join=${JOIN_S.join("/")} all_held_s=${fmt(allHeld_s)} balanced_s=${fmt(balanced_s)} after_last_join_s=${balanced_s === null ? "never" : balanced_s - lastJoin_s} final=${nodes.map((n) => n.held.size).join("/")}`);
