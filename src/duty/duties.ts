// The singleton duties this build runs and what each one's lease and tick are sized from
// (spec: Seat Ownership § Singleton duties). A duty's TTL is sized from its own work, not
// from the seat heartbeat, which is why duty leases live in their own bucket
// (crewlet_duties, whose age covers the longest duty TTL: coord/buckets.ts DUTY_TTL_MAX_MS).

const SECOND_MS = 1_000;
const MINUTE_MS = 60 * SECOND_MS;

export const DUTY_PREFIX = "worker:";

export function dutyKey(name: string): string {
  return `${DUTY_PREFIX}${name}`;
}

/**
 * The scheduler's tick. Cron's finest grain is one second (croner reads a seconds field),
 * so a tick at least once a second meets every due instant within a second of it; the
 * runner wakes earlier when a fire is due sooner (see Scheduler.nextTickIn). A tick is a
 * renew and a few reads, so one a second costs the fleet almost nothing.
 */
export const SCHEDULER_TICK_MS = 1 * SECOND_MS;
/**
 * The scheduler's lease: the spec's shortest duty TTL. It outlives thirty ticks, so a slow
 * claim or a store blip never moves the duty, and a dead holder's schedules wait at most
 * this long (plus one tick) before a peer fires what fell due meanwhile, once (catch-up).
 */
export const SCHEDULER_TTL_MS = 30 * SECOND_MS;

/**
 * A duty's tick and TTL: the shipped pair, or a test's shortened tick (Tier A `testing`)
 * with a TTL of three of those ticks — never under the spec's shortest duty TTL, 30 s.
 */
export function dutyTiming(shipped: { tick_ms: number; ttl_ms: number }, test_tick_ms?: number): { tick_ms: number; ttl_ms: number } {
  if (test_tick_ms === undefined) return shipped;
  return { tick_ms: test_tick_ms, ttl_ms: Math.max(SCHEDULER_TTL_MS, 3 * test_tick_ms) };
}

/** The maintenance sweep's tick (ARCHITECTURE.md numbers: maintenance tick 15 min). */
export const MAINTENANCE_TICK_MS = 15 * MINUTE_MS;
/**
 * Three ticks: one slow claim never moves the sweep, and a dead holder's sweep resumes on a
 * peer within 45 minutes, well inside the mailbox grace (24 h) the sweep's lateness eats.
 */
export const MAINTENANCE_TTL_MS = 3 * MAINTENANCE_TICK_MS;

/** The trim's tick (spec: Singleton duties, `retention` — every 15 minutes). */
export const RETENTION_TICK_MS = 15 * MINUTE_MS;
/** Three ticks, as maintenance: how long a term has been holding the log is a property of
 * a series of ticks that must be one node's, so the duty moves only when its holder is gone. */
export const RETENTION_TTL_MS = 3 * RETENTION_TICK_MS;
