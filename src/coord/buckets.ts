// The coordination store's buckets and what each one's retention is sized from
// (ARCHITECTURE.md § Names on the wire; Scaling Out § What the fleet shares). Retention is
// a property of the bucket, which is why every slot is its own bucket.
import { DEFAULT_LEASE_TTL_MS, type SlotName } from "./contract.ts";

const HOUR_MS = 60 * 60 * 1000;
const DAY_MS = 24 * HOUR_MS;

/** Longest duty TTL the fleet uses (spec: Singleton duties — "anything from 30 seconds to
 *  three hours", the learning passes). The duty bucket's age must cover it, or the bucket
 *  would drop a duty record its holder is still inside, and a peer would take the duty. */
export const DUTY_TTL_MAX_MS = 3 * HOUR_MS;

export interface BucketSpec {
  name: string;
  /** 0 = values never age out. */
  max_age_ms: number;
}

export const LEASES_BUCKET = "crewlet_leases";
export const EPOCHS_BUCKET = "crewlet_epochs";
export const DUTIES_BUCKET = "crewlet_duties";

export function leaseBuckets(lease_ttl_ms: number): { leases: BucketSpec; epochs: BucketSpec; duties: BucketSpec } {
  return {
    // Age = lease TTL: a record nobody renews for a TTL is dead and takes no space after.
    //
    // No delete markers (2.11+: allow_msg_ttl, subject_delete_marker_ttl, per-message
    // Nats-TTL), though they were measured for "a lapse every watcher sees" (issue 10;
    // `bun bench/server-quirks.ts --only=markers`, 2.14.10 and 2.15.2, R1 and R3, TTL 3 s):
    // the server marks a lapse quickly — by this age +82..+303 ms, by Nats-TTL +1..+47 ms
    // after the TTL — but
    // - nats.js 2.29.3 hands a KV watcher the marker as a PUT with an empty value, and a KV
    //   get answers the same while the marker stands (at least 1 s, the server's floor). A
    //   lease read would decode no record, which the claim must judge a foreign claim
    //   (unknown ownership is never ownership): a lapsed seat would be claimable LATER
    //   than without markers, unless this bucket read the marker header out of nats.js
    //   internals on every get, watch and listing.
    // - Only a watcher hears a marker, and a watch on this bucket takes in every renewal:
    //   at 2,000 seats and the shipped TTL, 2,000 every 15 s, ~670 messages a sweep on a
    //   node that now draws 57 (bench/failover.ts, idle node; the gate view watches only
    //   while claiming, so it is off when a peer dies in a settled fleet).
    // The lapse is timed from what every pass already lists instead: a lease's time left on
    // the store's clock (LeaseView.remaining_ms), and a pass woken at the lapse of the
    // first unrenewed one (seat/lapse-wake.ts).
    leases: { name: LEASES_BUCKET, max_age_ms: lease_ttl_ms },
    // No age: an epoch that restarted at 1 would hand the next owner a token its
    // predecessor is still using (spec: The lease).
    epochs: { name: EPOCHS_BUCKET, max_age_ms: 0 },
    duties: { name: DUTIES_BUCKET, max_age_ms: DUTY_TTL_MAX_MS },
  };
}

export const SLOT_BUCKETS: Record<SlotName, BucketSpec> = {
  // The current company revision must outlive any outage: a fleet restarted after a week
  // off still has to know which revision it runs.
  config: { name: "crewlet_config", max_age_ms: 0 },
  // Which nodes reached which revision: a node rewrites its row only when it applies one,
  // which can be weeks apart, so an age would drop live nodes' rows. Removed nodes' rows
  // are swept by the maintenance duty's removal-marker pass.
  status: { name: "crewlet_status", max_age_ms: 0 },
  // The completion ledger: 7 days (ARCHITECTURE.md numbers) outlasts the longest any
  // delivery can come back — 25 deliveries at a 30-minute ack wait is ~12.5 h — with
  // room for a redelivery replayed after a long outage.
  ledger: { name: "crewlet_ledger", max_age_ms: 7 * DAY_MS },
  // Inbound delivery dedupe: providers retry a webhook for minutes to hours (and a person
  // may press "redeliver" later that day); a day covers both, and a claim older than that
  // is a new event by any provider's reckoning.
  claims: { name: "crewlet_claims", max_age_ms: 1 * DAY_MS },
  // A seat's mailbox record: an age cannot tell a present seat from a removed one, so
  // none; the maintenance duty retires them by compare-and-set (spec: Singleton duties).
  mailboxes: { name: "crewlet_mailboxes", max_age_ms: 0 },
  // Schedule fire claims (at-most-once per fire): one key per fire time never repeats, so
  // the age only bounds space. A claim is asked about only for the instant the cursor
  // (below) says is due now: by two schedulers racing it, or by the next scheduler after a
  // node died between its publish and its cursor write (milliseconds). 7 days covers that
  // next scheduler after any outage shorter than a week; a longer one, starting in that
  // millisecond window, on a schedule with no later instant since, would fire the instant
  // again (the ledger's 7 days would not catch it either).
  fires: { name: "crewlet_fires", max_age_ms: 7 * DAY_MS },
  // Each schedule's cursor (the last instant handled, the last fire and its outcome): one
  // key per schedule, rewritten on every fire. No age: a weekly or monthly schedule's
  // cursor is rewritten less often than any age short enough to matter, and a cursor that
  // aged out reads as a schedule never seen — it fires nothing for its past, so a due
  // instant, the catch-up after an outage and GET /schedules' last fire were lost. The
  // scheduler deletes a removed schedule's cursor; the removal-marker purge drops the marker.
  schedules: { name: "crewlet_schedules", max_age_ms: 0 },
  // The notification valve: one record per (seat, minute), deleted by the handlers once
  // its minute is over and its held notifications went out as one wake. The age is only
  // for a record nobody could flush (no seats node for that long): a day, the claims'
  // horizon, past which the deliveries it holds are history a redelivery would not wake.
  rate: { name: "crewlet_rate", max_age_ms: 1 * DAY_MS },
  // Budget counters, one per (scope, window) keyed by the window's end: a month is the
  // longest window (31 days, plus a DST hour), so 32 days keeps every live window's record
  // and lets past windows age out.
  budgets: { name: "crewlet_budgets", max_age_ms: 32 * DAY_MS },
  // A key's cooldown: a record is written with its end time and the readers ignore an
  // ended one; the age only bounds space. A provider asking for more than a day is an
  // outage an operator fixes, and the next 429 writes a new record.
  cooldowns: { name: "crewlet_cooldowns", max_age_ms: 1 * DAY_MS },
  // A person's controls (pauses): fleet state that must survive restarts and moves, so
  // none; resume deletes the record.
  controls: { name: "crewlet_controls", max_age_ms: 0 },
  // The state-log trim's records: operator holds (kept until released), each domain's last
  // conclusion and the copies it remembers. A hold must outlive any outage, so none.
  estate: { name: "crewlet_estate", max_age_ms: 0 },
  // Coding runs (src/sandbox/runs.ts): a run outlives its turn and its node by design, and
  // a parked one waits on a person for days, so none; a settled run's record is deleted by
  // the sandbox-waiter duty once it is RUN_KEEP_MS old.
  runs: { name: "crewlet_runs", max_age_ms: 0 },
  // Calls parked for a person's yes (src/approvals/records.ts): a request waits up to
  // approvals.expires_after_hours (a month at most), so none; the approvals duty deletes a
  // settled one once it is APPROVAL_KEEP_MS old.
  approvals: { name: "crewlet_approvals", max_age_ms: 0 },
  // Which store the company's files are in, recorded by the first node (a node configured
  // with another refuses to boot), and what the object collector last found. The record
  // must outlive any outage, or a fleet back from one would take any store as its own.
  objects: { name: "crewlet_objects", max_age_ms: 0 },
};

export { DEFAULT_LEASE_TTL_MS };
