// The seat host's state, in one place: the options it was built with, every seat it tracks,
// the per-seat locks, the background work it must settle, and the flags the claim loop, the
// grant, the tenures and the drain all read. Also the plumbing each of them shares: the
// per-seat lock, background tracking and the presence row this node writes about itself.
import { randomBytes } from "node:crypto";
import type { Clock } from "../clock.ts";
import { LEASE_PROTOCOL, type LeaseStore } from "../coord/contract.ts";
import type { Logger } from "../log.ts";
import type { Attachment, Delivery, Outcome, Queue } from "../queue/contract.ts";
import { BoundedLeaseStore } from "./bounded-store.ts";
import { heartbeatMs, placementKey, type Plan, type SeatSpec } from "./placement.ts";
import { PresenceLease, type PresenceMeta, type PresenceRow } from "./presence.ts";
import type { Watchdog } from "./watchdog.ts";

/** One tenure of one seat: what hooks and turns are handed. */
export interface SeatGrant {
  handle: string;
  epoch: number;
  /** Store clock, ms: when this tenure began. */
  acquired_at: number;
}

export type ReleaseMode = "voluntary" | "fenced";

export interface ReleaseInfo {
  mode: ReleaseMode;
  reason: string;
}

/** What a turn gets with its delivery: the grant it was admitted under and its fence. */
export interface TurnContext {
  handle: string;
  epoch: number;
  /** False once this seat's current grant here is not `epoch`: stop before the next round
   * or tool call, and return defer(). */
  fence(): boolean;
  /** Admission for a further turn under this grant (a drain's later conversations): the
   * epoch is still `epoch` and the last renew is fresh within one heartbeat. False → defer
   * what has not run. The first turn of a delivery or drain was admitted by the host. */
  admit(): boolean;
  /** Aborted when the host stops waiting for the turn (a release past its wait, a fence):
   * stop at the next await and hand the deliveries back. */
  signal: AbortSignal;
}

export type InboxHandler = (delivery: Delivery, turn: TurnContext) => Promise<Outcome>;
/** A drain of a seat's inbox (what was waiting, oldest first, at most INBOX_DRAIN_MAX):
 * one outcome per delivery, in order (see BatchHandler in the queue contract). */
export type BatchInboxHandler = (deliveries: Delivery[], turn: TurnContext) => Promise<Outcome[]>;

export interface SeatHooks {
  /** Acquire steps, run in order before the inbox attaches (MCP children, memory, the
   * reflection and control subscriptions, run recovery). A throw is an acquire hook
   * failure: a fenced release. */
  prepare?: ((grant: SeatGrant) => Promise<void>)[];
  /** Holds the inbox attaches under, taken before its first fetch (a paused seat: "pause"). */
  attachHolds?: (handle: string) => string[] | Promise<string[]>;
  /** The teardown mirror of prepare (the seat's children die with its lease). A throw
   * leaves the seat undead: lease kept and renewed, teardown retried every heartbeat. */
  onRelease?: (grant: SeatGrant, info: ReleaseInfo) => Promise<void>;
  /** The acquire hook returned and the seat admits turns. */
  onEstablished?: (grant: SeatGrant) => void;
  /** A renew proved ownership again after one that could not (a store blip ended). */
  onAdmitted?: (grant: SeatGrant) => void;
}

export interface SeatHostOptions {
  node_id: string;
  /** This node's roles (data, ingress, seats, workers). */
  roles: readonly string[];
  labels?: Readonly<Record<string, string>>;
  /** Lease protocol this build speaks; LEASE_PROTOCOL unless a test says otherwise. */
  protocol?: number;
  /** Broker kind for the presence row (member | leaf | external). */
  broker?: string | null;
  leases: LeaseStore;
  queue: Queue;
  clock: Clock;
  log: Logger;
  /** The lease TTL in force (Coordination.lease_ttl_ms); read on every use. */
  lease_ttl_ms: number | (() => number);
  /** This process holds the store-dir lock, so a live lease of an earlier incarnation is a
   * dead predecessor's and may be taken over (bumping its epoch). A predicate says which
   * owners those are (see incarnation.ts: the same store); true means any owner of this
   * node id, for simulations that give each node id one store. */
  takeover?: boolean | ((owner: string) => boolean);
  /** The presence row is held by a live process under this node id that this one has not
   * proved dead: this process must not run (it claims nothing from then on). */
  onNodeIdInUse?: (holder: string) => void;
  /** The seat inbox's handler (the agent engine), screened by the host: one delivery at a
   * time. Give this or batchHandler. */
  handler?: InboxHandler;
  /** The seat inbox's drain handler, screened by the host as one: preferred over handler
   * when given, so a turn can take a conversation's whole backlog at once. */
  batchHandler?: BatchInboxHandler;
  hooks?: SeatHooks;
  watchdog?: Watchdog;
  /** Process incarnation; `{node_id}:{random}` minted here unless given (simulations). */
  owner?: string;
  /** The host attaches each seat's inbox as the last acquire step (default true). */
  attachInbox?: boolean;
  /** Held seats whose mailbox the broker no longer delivers (MailboxWatch.deaf), shown on
   * the presence row, /health and the Fleet view. */
  deafSeats?: () => string[];
  /** An inbox delivery carrying the probe header (seat/mailbox-watch.ts) was taken off a
   * seat's inbox here. The host acks every probe on sight, whoever holds the seat, and
   * runs nothing for it: a probe is never shown to the agent nor counted as mail. */
  onProbe?: (handle: string, id: string) => void;
  /** A data node's applied position per estate domain, published on the presence row. */
  estateApplied?: () => Record<string, number> | null;
}

export type SeatPhase = "establishing" | "established" | "releasing" | "undead";

export interface SeatState {
  handle: string;
  key: string;
  epoch: number;
  acquired_at: number;
  phase: SeatPhase;
  /** The lease is still ours to renew (false once lost or released). */
  lease_held: boolean;
  /** The grant is revoked here: fence() fails, nothing new starts. */
  fenced: boolean;
  /** The teardown has run to completion (or been handed to the undead retries). */
  finished: boolean;
  attachment: Attachment | null;
  /** Local clock, ms: when the last successful renew (or the acquire) was sent. */
  last_renew_ok_ms: number;
  /** A renew came back unknown: consumers quiesced until one succeeds. */
  stale: boolean;
  /** A deferral quiesced the inbox; the next successful renew resumes it. */
  deferred: boolean;
  undead: { since_ms: number; attempts: number; heartbeats: number; info: ReleaseInfo; retrying: boolean } | null;
  /** Aborted when the host stops waiting for this grant's turns. */
  cancel: AbortController;
  /** Local clock, ms: when the inbox handler last finished a delivery or drain (0: never). */
  settled_at_ms: number;
}

/** The host's state and the plumbing its parts share; SeatHost builds one and hands it round. */
export class HostState {
  readonly node_id: string;
  readonly owner: string;
  readonly store: LeaseStore;
  readonly queue: Queue;
  readonly clock: Clock;
  readonly log: Logger;
  readonly hooks: SeatHooks;
  readonly protocol: number;
  readonly presence: PresenceLease;
  readonly started_at: number;
  readonly takeover: ((owner: string) => boolean) | undefined;

  seatsSpec: SeatSpec[] = [];
  readonly seats = new Map<string, SeatState>();
  /** Holds a person asked for, per seat (setHold): applied whenever the inbox attaches. */
  readonly wantedHolds = new Map<string, Set<string>>();
  /** Releases whose answer was lost: retried on the heartbeat until the lease has lapsed. */
  readonly pendingReleases = new Map<string, { epoch: number; until_ms: number }>();
  private readonly locks = new Map<string, Promise<unknown>>();
  private readonly background = new Set<Promise<unknown>>();

  draining = false;
  withdrawn = false;
  behind = false;
  started = false;
  stopped = false;
  /** Another process holds this node id's presence row: claim nothing until it is ours. */
  nodeIdInUse = false;
  lastPlan: Plan | null = null;
  livePresences: PresenceRow[] = [];
  protocolFloor: number | null = null;

  /** The presence write advertise() has in flight, and the one queued after it. */
  private advertising: Promise<void> | null = null;
  private advertiseNext: Promise<void> | null = null;

  constructor(readonly opts: SeatHostOptions) {
    this.node_id = opts.node_id;
    this.owner = opts.owner ?? `${opts.node_id}:${randomBytes(4).toString("hex")}`;
    const nodePrefix = `${opts.node_id}:`;
    this.takeover =
      opts.takeover === true ? (o: string) => o.startsWith(nodePrefix) && o !== this.owner : typeof opts.takeover === "function" ? opts.takeover : undefined;
    this.clock = opts.clock;
    this.log = opts.log;
    this.hooks = opts.hooks ?? {};
    this.protocol = opts.protocol ?? LEASE_PROTOCOL;
    this.queue = opts.queue;
    if (!opts.handler && !opts.batchHandler) throw new Error("seat host: an inbox handler (handler or batchHandler) is required");
    // A store call slower than a heartbeat has missed what it was for: the admission
    // window closed while it waited. Answered unknown, it keeps the seat and quiesces.
    this.store = new BoundedLeaseStore(opts.leases, opts.clock, () => this.heartbeat_ms);
    this.started_at = opts.clock.now();
    this.presence = new PresenceLease(this.store, {
      node_id: opts.node_id,
      owner: this.owner,
      ttl_ms: () => this.ttl_ms,
      takeover: this.takeover,
      log: opts.log,
    });
  }

  get ttl_ms(): number {
    const t = this.opts.lease_ttl_ms;
    return typeof t === "function" ? t() : t;
  }

  get heartbeat_ms(): number {
    return heartbeatMs(this.ttl_ms);
  }

  grantOf(s: SeatState): SeatGrant {
    return { handle: s.handle, epoch: s.epoch, acquired_at: s.acquired_at };
  }

  /** One seat's acquisition, release and teardown never interleave. */
  withLock<T>(handle: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(handle) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.catch(() => {});
    this.locks.set(handle, tail);
    void tail.then(() => {
      if (this.locks.get(handle) === tail) this.locks.delete(handle);
    });
    return run;
  }

  track(p: Promise<unknown>): void {
    const t = p.catch((err) => this.log.error("seat_task_failed", { error: err as Error }));
    this.background.add(t);
    void t.finally(() => this.background.delete(t));
  }

  async settleBackground(): Promise<void> {
    // Bounded: each round awaits what exists now; work a round starts is awaited next.
    for (let i = 0; i < 8 && this.background.size > 0; i++) {
      await Promise.allSettled([...this.background]);
    }
  }

  heldHandles(): string[] {
    return [...this.seats.values()].filter((s) => s.phase === "established" && !s.fenced).map((s) => s.handle).sort();
  }

  // ---- the presence row: what this node says about itself ---------------------------------

  presenceMeta(): PresenceMeta {
    return {
      roles: [...this.opts.roles],
      labels: { ...(this.opts.labels ?? {}) },
      broker: this.opts.broker ?? null,
      started_at: this.started_at,
      draining: this.draining,
      withdrawn: this.withdrawn,
      behind: this.behind,
      seat_mailbox_deaf: this.opts.deafSeats?.() ?? [],
      seats_held: this.seatsHeldCount(),
      seats_by_group: this.seatsByGroup(),
      ...this.estateMeta(),
    };
  }

  private estateMeta(): { estate_applied?: Record<string, number> } {
    const applied = this.opts.estateApplied?.() ?? null;
    return applied ? { estate_applied: applied } : {};
  }

  /** Seats held per placement group (healthy, establishing or leaving; not stuck ones). */
  private seatsByGroup(): Record<string, number> {
    const keyOf = new Map(this.seatsSpec.map((s) => [s.handle, placementKey(s.placement)]));
    const out: Record<string, number> = {};
    for (const s of this.seats.values()) {
      const key = keyOf.get(s.handle);
      if (key === undefined || s.phase === "undead" || (!s.lease_held && s.finished)) continue;
      out[key] = (out[key] ?? 0) + 1;
    }
    return out;
  }

  /** Seats whose lease this node holds and some live node may run. */
  private seatsHeldCount(): number {
    const unplaceable = new Set(this.lastPlan?.unplaceable ?? []);
    const inCompany = new Set(this.seatsSpec.map((s) => s.handle));
    let n = 0;
    for (const s of this.seats.values()) {
      if (s.lease_held && inCompany.has(s.handle) && !unplaceable.has(s.handle)) n++;
    }
    return n;
  }

  /** Rewrites the presence row with the new count now, so a seat given back is taken at the next
   * sweep. One write at a time, the waiters sharing the next: seats fenced together would
   * otherwise race compare-and-sets on the one row every peer reads. */
  advertise(): Promise<void> {
    if (this.draining || this.stopped) return Promise.resolve();
    if (this.advertising === null) {
      this.advertising = this.presence
        .beat(this.presenceMeta())
        .then(() => undefined)
        .finally(() => (this.advertising = null));
      return this.advertising;
    }
    this.advertiseNext ??= this.advertising
      .catch(() => undefined)
      .then(() => {
        this.advertiseNext = null;
        return this.advertise();
      });
    return this.advertiseNext;
  }
}
