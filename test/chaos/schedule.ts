// The chaos run's fault schedule: a pure function of a seed and the fleet's shape, so a
// failing run is replayed by its seed. The harness (run.ts) performs the faults one at a
// time, waiting for the fleet to recover between them; this file only decides what, where
// and for how long.
import { rng } from "../support/rng.ts";

export const FAULT_KINDS = [
  /** kill -9 of a node (its sidecar dies with it), restarted after a short delay. */
  "kill9",
  /** kill -9 of a node's nats-server only; the node notices and exits, then is restarted. */
  "broker_kill9",
  /** SIGSTOP of a node past the lease TTL, then SIGCONT: it must exit 75, then is restarted. */
  "sigstop",
  /** SIGTERM: a graceful drain, then a restart. */
  "sigterm",
  /** Every node kill -9'd at once, then started again in a shuffled order with delays. */
  "full_restart",
  /** A member cut off from the other members and the leaf (its cluster and leaf links). */
  "cut_member",
  /** The leaf cut off from every member. */
  "cut_leaf",
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** Faults that end a process without its drain: a reply written just before one may be
 * written again by the next owner (the "kill window" of the checker). */
export const KILL_KINDS: ReadonlySet<FaultKind> = new Set(["kill9", "broker_kill9", "sigstop", "full_restart"]);

export interface Fault {
  kind: FaultKind;
  /** The node faulted; for full_restart, the first node restarted. */
  target: string;
  /** Quiet before this fault, once the fleet has recovered from the last one. */
  gap_ms: number;
  /** How long the fault lasts: the freeze, the cut, or the delay before a restart. */
  hold_ms: number;
  /** full_restart only: the start order and the delay before each start. */
  restart?: { node: string; delay_ms: number }[];
}

export interface ScheduleOptions {
  seed: number;
  members: readonly string[];
  leaf: string;
  ttl_ms: number;
  count: number;
  /** The first FAULT_KINDS.length faults are each kind once, in a seeded order, so a short
   * run still covers every kind. */
  everyKindFirst?: boolean;
}

/** Quiet between faults: long enough that the driver's traffic lands on the recovered fleet,
 * short enough that a few-minute run sees several faults. */
export const GAP_MS_MIN = 2_000;
export const GAP_MS_MAX = 8_000;
/** A killed node comes back after up to this long: an operator's supervisor restarts fast. */
export const RESTART_DELAY_MS_MAX = 2_000;
/** Full-restart starts are spread over up to this long per node: any order, any delay. */
export const FULL_RESTART_STAGGER_MS_MAX = 5_000;
/** A freeze or a cut lasts 1.25–1.75 TTLs: past the TTL and a sweep, so the seats must move,
 * and no longer, since the suite runs at the TTL's floor (28 s) and every second of it is CI's. */
const PAST_TTL_MIN = 1.25;
const PAST_TTL_SPAN = 0.5;

export function planFaults(o: ScheduleOptions): Fault[] {
  const rand = rng(o.seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const between = (lo: number, hi: number) => Math.round(lo + rand() * (hi - lo));
  const all = [...o.members, o.leaf];
  const kinds: FaultKind[] = [];
  if (o.everyKindFirst) {
    const shuffled = [...FAULT_KINDS];
    for (let i = shuffled.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [shuffled[i], shuffled[j]] = [shuffled[j]!, shuffled[i]!];
    }
    kinds.push(...shuffled.slice(0, o.count));
  }
  while (kinds.length < o.count) kinds.push(pick(FAULT_KINDS));
  return kinds.map((kind): Fault => {
    const gap_ms = between(GAP_MS_MIN, GAP_MS_MAX);
    const pastTtl = () => Math.round(o.ttl_ms * (PAST_TTL_MIN + rand() * PAST_TTL_SPAN));
    switch (kind) {
      case "kill9":
      case "broker_kill9":
      case "sigterm":
        return { kind, target: pick(all), gap_ms, hold_ms: between(0, RESTART_DELAY_MS_MAX) };
      case "sigstop":
        return { kind, target: pick(all), gap_ms, hold_ms: pastTtl() };
      case "cut_member":
        return { kind, target: pick(o.members), gap_ms, hold_ms: pastTtl() };
      case "cut_leaf":
        return { kind, target: o.leaf, gap_ms, hold_ms: pastTtl() };
      case "full_restart": {
        const order = [...all];
        for (let i = order.length - 1; i > 0; i--) {
          const j = Math.floor(rand() * (i + 1));
          [order[i], order[j]] = [order[j]!, order[i]!];
        }
        const restart = order.map((node) => ({ node, delay_ms: between(0, FULL_RESTART_STAGGER_MS_MAX) }));
        return { kind, target: order[0]!, gap_ms, hold_ms: between(0, RESTART_DELAY_MS_MAX), restart };
      }
    }
  });
}
