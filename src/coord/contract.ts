// The coordination contract (spec: "The lease", "Mixed-version fleets"; Scaling Out:
// "What the fleet shares"). Leases with epochs, and KV slots with compare-and-set.
// Backends: kv.ts (JetStream KV on the node's one connection) and local.ts (in-process,
// driven by src/clock.ts). test/conformance/coord.ts holds both to one behaviour.

/**
 * Lease protocol: raised only when holding a lease comes to mean something new, so no seat is
 * held beside an older build that would misread it. 5: mail on the seat's shard of the agent
 * streams. 6: a turn receipt on the tracker log. 7: `file.attach` rows on three logs (uploads
 * answer 503 while any node below 7 is live). 8: mail on limits-retained seat streams
 * (crewlet.seats.>), mailboxes of one replica. The reasons are in each change's commit.
 */
export const LEASE_PROTOCOL = 8;
/** Shipped lease TTL: three heartbeats, so two missed renewals still leave one to recover. */
export const DEFAULT_LEASE_TTL_MS = 45_000;
/** Heartbeat = TTL / 3: three renewals per TTL tolerate two consecutive misses (a GC pause,
 * a store blip) with one interval left to recover in. */
export const HEARTBEATS_PER_TTL = 3;
/** The longest a replicated lease bucket goes without a leader. After its leader dies,
 * nats-server's raft followers campaign 4–9 s after the last heartbeat they heard
 * (server/raft.go, maxElectionTimeoutDefault): measured 4–6.5 s after kill -9. A healed
 * partition is worse: the cut member has raised its term on every timeout, its return
 * deposes leaders that did nothing wrong, and every group it shares re-elects at once; the
 * lease bucket was leaderless 7 s in a chaos run at load 3, and CI's 2-core box once outlasted
 * the 10 s this used to allow (five seats fenced on a healthy node). 15 s: the worst timeout,
 * a second campaign, and half as much again for a box busy with fifty elections. */
export const ELECTION_WORST_MS = 15_000;
/** While a renewal's answer is unknown (an election, most often), one stale seat is renewed
 * this often instead of at the next heartbeat, so renewals land within this of the election's
 * end. One call per probe whatever the seat count, so a leaderless bucket is not stormed. */
export const RENEW_PROBE_MS = 500;

export type LeaseMeta = Record<string, unknown>;

export interface Lease {
  key: string;
  /** A process incarnation, `{node_id}:{random}`, never a machine. */
  owner: string;
  /** Fencing token, monotonic for the resource's lifetime. */
  epoch: number;
  /** Store clock, ms: the write that won this tenure. No renewal restamps it. */
  acquired_at: number;
  /** Store clock, ms. */
  expires_at: number;
  /** The stable node id, for restart stickiness. */
  preferred: string;
  protocol: number;
  meta: LeaseMeta;
}

export interface LeaseView extends Lease {
  /** Judged against the store's clock at the time of the read. */
  live: boolean;
  /** expires_at less the store's clock at the read: what `live` was judged from (> 0 is
   *  live). Lets a reader time a lapse without a clock reading of its own. */
  remaining_ms: number;
}

export type RefusalRule = "held" | "protocol";

export type AcquireResult =
  | { ok: true; lease: Lease }
  | { ok: false; rule: "held"; holder: string; epoch: number }
  | { ok: false; rule: "protocol"; floor: number }
  | { ok: false; rule: "unknown"; error: string };

export interface AcquireOptions {
  owner: string;
  preferred: string;
  ttl_ms: number;
  meta?: LeaseMeta;
  /** Judge the protocol gate (seat claims); duty and presence claims pass false. */
  gate?: boolean;
  /**
   * Take over a live lease whose owner this answers true for: an earlier incarnation of
   * this node that this process has proved dead (it holds the store lock that incarnation
   * ran under). Only owners of the claimant's own node id are ever asked. Bumps the epoch.
   */
  takeover?: (owner: string) => boolean;
}

export type RenewResult =
  | { status: "renewed"; lease: Lease }
  | { status: "lost" }
  | { status: "unknown"; error: string };

export type ReleaseResult = "released" | "not_held" | "unknown";

export interface LeaseStore {
  acquire(key: string, opts: AcquireOptions): Promise<AcquireResult>;
  renew(key: string, owner: string, epoch: number, meta?: LeaseMeta): Promise<RenewResult>;
  release(key: string, owner: string, epoch: number): Promise<ReleaseResult>;
  get(key: string): Promise<LeaseView | null>;
  /** Every lease under prefix, live or not, judged against the store's clock. */
  list(prefix: string): Promise<LeaseView[]>;
  /**
   * The same as list(prefix), answered from a standing watch of the prefix while that watch
   * has heard a write within `fresh_within_ms`, else from a listing (which starts the watch
   * again). For a prefix whose every live row is rewritten more often than that (presence
   * rows, each heartbeat), a repeated listing without a consumer per call.
   */
  listWatched(prefix: string, fresh_within_ms: number): Promise<LeaseView[]>;
  /** Lowest protocol among live presence and seat leases (duty leases never count). */
  protocolFloor(): Promise<number | null>;
  /** The store's clock, ms. */
  now(): Promise<number>;
}

export interface KvEntry {
  key: string;
  value: Uint8Array;
  revision: number;
  /** Store clock, ms. */
  created: number;
  operation: "put" | "delete" | "purge";
}

export class CasConflict extends Error {
  constructor(readonly key: string, readonly expected: number | null) {
    super(`compare-and-set conflict on ${key} (expected revision ${expected ?? "none"})`);
    this.name = "CasConflict";
  }
}

/** The store did not answer: says nothing about the value. */
export class StoreUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StoreUnavailable";
  }
}

export interface KvWatch {
  stop(): void;
}

export interface KvSlot {
  readonly bucket: string;
  get(key: string): Promise<KvEntry | null>;
  /** Fails with CasConflict when the key holds a live value. */
  create(key: string, value: Uint8Array): Promise<number>;
  /** Fails with CasConflict unless the key is at `revision`. */
  update(key: string, value: Uint8Array, revision: number): Promise<number>;
  put(key: string, value: Uint8Array): Promise<number>;
  delete(key: string, revision?: number): Promise<void>;
  purge(key: string, revision?: number): Promise<void>;
  keys(filter?: string): Promise<string[]>;
  /** Latest value of every key matching filter (wildcards `*`, `>`), deletes left out: one
   *  listing, the same cost as keys() on JetStream (its snapshot carries the values). */
  entries(filter?: string): Promise<KvEntry[]>;
  /** Removal markers still held: keys whose latest write is a delete or a purge. */
  removals(filter?: string): Promise<KvEntry[]>;
  /**
   * Drops the removal marker `revision` wrote under `key`, and nothing written after it: a
   * key written again since is untouched. False when the key's latest write is not that
   * marker.
   */
  purgeRemoval(key: string, revision: number): Promise<boolean>;
  /** Every write from now on (and the current values first when includeCurrent). */
  watch(onEntry: (entry: KvEntry) => void, opts?: { key?: string; includeCurrent?: boolean }): Promise<KvWatch>;
}

export const SLOT_NAMES = ["config", "status", "ledger", "claims", "mailboxes", "fires", "schedules", "rate", "budgets", "cooldowns", "controls", "estate", "runs", "approvals", "objects"] as const;
export type SlotName = (typeof SLOT_NAMES)[number];

export interface Coordination {
  leases: LeaseStore;
  /** Duty leases live apart: each duty sizes its own TTL. */
  duties: LeaseStore;
  slot(name: SlotName): KvSlot;
  /** The lease TTL in force (a peer's bucket may have set it). */
  readonly lease_ttl_ms: number;
  close(): Promise<void>;
}
