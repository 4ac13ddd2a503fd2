// The seat host (spec: Seat Ownership). A seat is not a thing you can half-own: this node
// either holds a seat's lease, runs its agent and consumes its inbox, or does none of it.
// The host holds the presence row, renews every lease on one heartbeat (TTL / 3), runs the
// placement sweep (placement.ts decides, this file acts), establishes and gives back seats
// through hooks the agent engine fills in, and answers the two ownership questions a turn
// asks: may I start (admission: freshness, not membership) and am I still the owner
// (fence: the epoch).
import { randomBytes } from "node:crypto";
import type { Clock, Timer } from "../clock.ts";
import { LEASE_PROTOCOL, type LeaseStore, type LeaseView } from "../coord/contract.ts";
import type { Logger } from "../log.ts";
import { eachInFlight } from "../in-flight.ts";
import { ack, defer, nak, type Attachment, type BatchHandler, type Delivery, type Handler, type Outcome, type Queue } from "../queue/contract.ts";
import { mailbox } from "../queue/topics.ts";
import { BoundedLeaseStore, LEASE_CALLS_IN_FLIGHT } from "./bounded-store.ts";
import { probeIdOf } from "./mailbox-watch.ts";
import { lapseWakeIn, type ListedLease } from "./lapse-wake.ts";
import { DutyLoop } from "./loop.ts";
import {
  CLAIMS_IN_FLIGHT,
  heartbeatMs,
  ownerNodeId,
  placementKey,
  plan,
  unmannedRoles,
  SWEEP_INTERVAL_MS,
  UNDEAD_ALARM_EVERY_HEARTBEATS,
  type Holdings,
  type Plan,
  type PresenceFact,
  type SeatLeaseFact,
  type SeatSpec,
  type SelfFacts,
} from "./placement.ts";
import { PRESENCE_PREFIX, PresenceLease, parsePresence, SEAT_PREFIX, seatKey, type PresenceBeat, type PresenceMeta, type PresenceRow } from "./presence.ts";
import type { Watchdog } from "./watchdog.ts";

/** A voluntary release waits this many heartbeats for the in-flight handler. The lease is
 * renewed throughout, so the bound is about how long a rebalance may take, not safety; two
 * heartbeats let an ordinary turn finish, and a longer one is stopped by the fence. */
export const VOLUNTARY_WAIT_HEARTBEATS = 2;
/**
 * A drain waits this long for a seat's running turn before cancelling it. An ordinary model
 * round is seconds; the whole stop (every seat's release, the leadership handoffs, the
 * broker) must fit the node's 30 s shutdown budget, and a turn past this is usually one
 * waiting on a hung endpoint. Cancelled, it hands its deliveries back (NAK) on this
 * connection, and the successor runs them at once.
 */
export const DRAIN_TURN_WAIT_MS = 10_000;
/** After a cancel, how long the release waits for the turn to reach its next await and
 * settle (the NAK): a cancelled fetch or sleep rejects at once; this bounds a tool that
 * ignores its signal. */
export const CANCEL_SETTLE_WAIT_MS = 5_000;
/**
 * Most deliveries one drain of a seat's inbox hands the agent at once. The agent runs a
 * drain as one turn per conversation, each turn carrying all of its conversation's
 * triggers in its prompt, and runs the turns one after another: 16 covers a busy thread's
 * burst (a chat that piled up while the seat was busy or moving) in one turn while keeping
 * one turn's triggers to what a model can sensibly take as context (at most 16 × 32 KiB of
 * trigger text, usually a few KiB), and bounds how long the last partition of a drain
 * waits behind the others and what a defer hands back at once.
 */
export const INBOX_DRAIN_MAX = 16;
/** A voluntary release whose store answer was lost is retried on the heartbeat until this
 * many TTLs have passed; by then the lease has lapsed on its own. */
export const PENDING_RELEASE_TTLS = 1;
/** A drain asks again for an unanswered release this often: an R3 election is ~0.3–4 s. */
export const DRAIN_RELEASE_RETRY_MS = 250;
/**
 * How recently the presence watch must have heard a row for a sweep to trust it. Every live
 * node (this one too) rewrites its row each heartbeat, so a watch that hears is never quiet
 * for much more than one; past 1.5 it is rebuilt from a listing. A row the view shows is
 * then at most a heartbeat old when written plus 1.5 of staleness, inside the TTL's three:
 * a live node never reads as lapsed for the watch's sake.
 */
export const PRESENCE_WATCH_FRESH_HEARTBEATS = 1.5;

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

interface SeatState {
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

export interface HealthSeats {
  node_id: string;
  held: string[];
  capacity: number;
  live_nodes: number;
  protocol_floor: number | null;
  fleet_full: boolean;
  draining: boolean;
  withdrawn: boolean;
  behind: boolean;
  unplaceable: string[];
  /** Held seats whose inbox the broker no longer delivers (seat/mailbox-watch.ts). */
  seat_mailbox_deaf: string[];
  /** handle → seconds its teardown has been failing; absent when nothing is stranded. */
  unproven_seconds?: Record<string, number>;
}

export interface FleetNode {
  id: string;
  roles: string[];
  labels: Record<string, string>;
  protocol: number;
  broker: string | null;
  seats_held: number;
  expires_in_ms: number;
  draining: boolean;
  withdrawn: boolean;
  /** Catching up: claims nothing, left out of peers' shares until level. */
  behind: boolean;
  /** Seats it holds whose inbox is deaf (seat/mailbox-watch.ts). */
  seat_mailbox_deaf: string[];
  /** A data node's applied position per estate domain (what the trim's floor reads). */
  estate_applied?: Record<string, number>;
}

export interface FleetLease {
  handle: string;
  node: string;
  owner: string;
  epoch: number;
  /** acquired_at: when this tenure began (store clock, ms). */
  since: number;
  expires_in_ms: number;
}

export interface FleetView {
  nodes: FleetNode[];
  leases: FleetLease[];
  unplaceable: string[];
  unmanned_roles: string[];
}

export interface SeatStateView {
  phase: SeatPhase;
  epoch: number;
  fenced: boolean;
  lease_held: boolean;
  stale: boolean;
  attached: boolean;
  /** Local clock, ms: when the last renew that succeeded was sent. */
  renewed_at_ms: number;
  /** The inbox is attached and taking mail: not quiesced, no handler running. */
  taking_mail: boolean;
  /** Local clock, ms: when the inbox handler last finished (0: never). */
  settled_at_ms: number;
  /** Local clock, ms: until when the inbox's own delayed NAK is held back (Attachment.backingOffUntil; 0: none). */
  backing_off_until_ms: number;
}

export type ClaimOutcome = "claimed" | "held" | "protocol" | "unknown" | "skipped" | "failed";

/**
 * Why a claim could take its seat (seat_claimed's `reason`, crewlet_seat_claims_total's
 * label), from what the claimant knows: `first` the seat's first tenure (epoch 1: the epoch
 * counters never expire), `takeover` a live lease of this node's earlier incarnation proved
 * dead, as the pass that chose the seat read it, `free` no live lease otherwise. A free seat
 * was given back or its holder stopped renewing: the lease bucket's max age drops a lapsed
 * lease as it lapses, so the claimant cannot tell which; the releaser says (seat_detached's
 * reason), and a failover is judged after a grace (seat_failover).
 */
export type ClaimReason = "first" | "takeover" | "free";

export function claimReason(epoch: number, seen: SeatLeaseFact | undefined): ClaimReason {
  if (epoch === 1) return "first";
  if (seen?.live === true && seen.predecessor) return "takeover";
  return "free";
}

export class SeatHost {
  /** Holds a person asked for, per seat (setHold): applied whenever the inbox attaches. */
  private readonly wantedHolds = new Map<string, Set<string>>();
  readonly node_id: string;
  readonly owner: string;
  private readonly store: LeaseStore;
  private readonly queue: Queue;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly hooks: SeatHooks;
  private readonly protocol: number;
  private readonly presence: PresenceLease;
  private readonly heartbeatLoop: DutyLoop;
  private readonly sweepLoop: DutyLoop;

  private seatsSpec: SeatSpec[] = [];
  private readonly seats = new Map<string, SeatState>();
  private readonly locks = new Map<string, Promise<unknown>>();
  private readonly background = new Set<Promise<unknown>>();
  /** Releases whose answer was lost: retried on the heartbeat until the lease has lapsed. */
  private readonly pendingReleases = new Map<string, { epoch: number; until_ms: number }>();
  /** The pass over pendingReleases under way beside the heartbeat, if any. */
  private retryingReleases: Promise<void> | null = null;

  private draining = false;
  private drained: Promise<void> | null = null;
  private withdrawn = false;
  private behind = false;
  private started = false;
  private stopped = false;
  private readonly started_at: number;
  private lastEarlySweep_ms = Number.NEGATIVE_INFINITY;
  /** The presence write advertise() has in flight, and the one queued after it. */
  private advertising: Promise<void> | null = null;
  private advertiseNext: Promise<void> | null = null;
  /** The one early pass armed for a lapse another node's lease is heading to (wakeAtLapse). */
  private lapseWake: Timer | null = null;
  /** The timer that fences a grant no renew has extended by its lapse (armGrantDeadline). */
  private grantDeadline: { timer: Timer; at_ms: number } | null = null;
  /** The claims a pass started, still running (see sweep). */
  private claiming: Promise<void> | null = null;
  private lastPlan: Plan | null = null;
  private livePresences: PresenceRow[] = [];
  private protocolFloor: number | null = null;
  private lastUnplaceable = "";
  private lastUnmanned = "";
  private lastBlockedFloor: number | null = null;
  private readonly takeover: ((owner: string) => boolean) | undefined;
  /** Another process holds this node id's presence row: claim nothing until it is ours. */
  private nodeIdInUse = false;

  constructor(private readonly opts: SeatHostOptions) {
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
    this.heartbeatLoop = new DutyLoop("seat_heartbeat", opts.clock, () => this.heartbeat_ms, () => this.heartbeat(), opts.log, opts.watchdog);
    this.sweepLoop = new DutyLoop("seat_sweep", opts.clock, () => SWEEP_INTERVAL_MS, () => this.sweep(), opts.log, opts.watchdog);
  }

  get ttl_ms(): number {
    const t = this.opts.lease_ttl_ms;
    return typeof t === "function" ? t() : t;
  }

  get heartbeat_ms(): number {
    return heartbeatMs(this.ttl_ms);
  }

  // ---- lifecycle --------------------------------------------------------------------------

  /** Takes the presence row and starts the heartbeat and the sweep (first pass at once). */
  async start(seats?: readonly SeatSpec[]): Promise<void> {
    if (this.started) return;
    this.started = true;
    if (seats) this.seatsSpec = [...seats];
    this.heartbeatLoop.start();
    // The first heartbeat takes the presence row; a sweep before it would size shares on
    // a fleet that cannot see this node yet.
    await this.heartbeatLoop.current;
    this.sweepLoop.start();
  }

  /** The company's agent seats changed (an applied revision): one early pass, at most one
   * per interval, so many revisions never run more than two passes' claims in one. */
  setSeats(seats: readonly SeatSpec[]): void {
    const key = (list: readonly SeatSpec[]) =>
      JSON.stringify([...list].map((s) => [s.handle, placementKey(s.placement)]).sort());
    const changed = key(seats) !== key(this.seatsSpec);
    this.seatsSpec = [...seats];
    if (!changed || !this.started) return;
    const now = this.clock.now();
    if (now - this.lastEarlySweep_ms >= SWEEP_INTERVAL_MS) {
      this.lastEarlySweep_ms = now;
      this.sweepLoop.poke();
    }
  }

  /** Unserviceable: give every seat back, say so on the presence row, claim nothing. */
  setWithdrawn(withdrawn: boolean): void {
    if (this.withdrawn === withdrawn) return;
    this.withdrawn = withdrawn;
    this.log.warn(withdrawn ? "seats_withdrawn" : "seats_withdrawn_cleared", {});
    this.sweepLoop.poke();
  }

  /** The estate copy is catching up: keep every seat, claim none until level. */
  setBehind(behind: boolean): void {
    if (this.behind === behind) return;
    this.behind = behind;
    this.log.info(behind ? "seats_behind" : "seats_behind_cleared", {});
  }

  /**
   * Drain: presence given up first (peers stop counting this node), claim nothing, give
   * every seat back voluntarily. The heartbeat keeps renewing what is still being handed
   * over; call stop() afterwards. Bounded by `within_ms` (the node's stop gives it its
   * SEAT_DRAIN_WITHIN_MS): a seat whose release has not finished by then — a lease store
   * without quorum answers nothing — is left, logged seat_release_abandoned with what was
   * left; its lease lapses at its TTL (unknown ownership is never ownership, and a lapsed
   * lease is claimable by peers; this node's next start takes it over at once).
   */
  drain(within_ms = Number.POSITIVE_INFINITY): Promise<void> {
    if (!this.drained) this.drained = this.runDrain(within_ms);
    return this.drained;
  }

  private async runDrain(within_ms: number): Promise<void> {
    const started = this.clock.now();
    const deadline = started + within_ms;
    this.draining = true;
    const tenures = [...this.seats.values()].map((s) => s.handle);
    this.log.info("seat_drain_started", { held: this.heldHandles().length, ...(Number.isFinite(within_ms) ? { within_ms } : {}) });
    const releases = (async () => {
      await this.presence.giveUp();
      // A pass under way, and the claims it started, re-check the drain under each seat's
      // lock before they attach.
      await this.sweepLoop.current;
      await this.claiming;
      // All at once: each waits for its seat's turn on its own; the store calls they end
      // with queue in the store's bound (LEASE_CALLS_IN_FLIGHT).
      const each = [...this.seats.values()]
        .filter((s) => s.phase !== "undead" && !s.fenced)
        .map((s) => this.withLock(s.handle, () => this.releaseVoluntarilyLocked(s, "drain")));
      await Promise.allSettled(each);
      await this.settleBackground();
    })();
    await this.byDeadline(releases, deadline);
    // A release the store did not answer (a leader election, a blip) would otherwise wait
    // for the heartbeat's retry, and a draining node stops right after this: its peers
    // would wait out a whole TTL for a seat it meant to give back. Ask again, bounded by
    // one heartbeat and the drain's bound.
    const retryUntil = Math.min(this.clock.now() + this.heartbeat_ms, deadline);
    while (this.pendingReleases.size > 0 && this.clock.now() < retryUntil) {
      await this.byDeadline(this.clock.sleep(DRAIN_RELEASE_RETRY_MS), retryUntil);
      await this.byDeadline(this.retryPendingReleases(), retryUntil);
    }
    const abandoned = this.reportUnreleased();
    const undead = [...this.seats.values()].filter((s) => s.phase === "undead").map((s) => s.handle);
    const released = tenures.filter((h) => !abandoned.includes(h) && !undead.includes(h));
    this.log.info("seat_drain_finished", { released, abandoned, undead, waited_ms: this.clock.now() - started });
  }

  /** Resolves when `work` settles or at `deadline_ms`, whichever is first (never rejects). */
  private async byDeadline(work: Promise<unknown>, deadline_ms: number): Promise<void> {
    if (!Number.isFinite(deadline_ms)) return void (await work.catch(() => undefined)); // unbounded: no timer
    const left = deadline_ms - this.clock.now();
    if (left <= 0) return;
    const stop = new AbortController();
    await Promise.race([work.catch(() => undefined), this.clock.sleep(left, stop.signal).catch(() => undefined)]);
    stop.abort();
  }

  /**
   * Every seat the drain could not give back, each logged seat_release_abandoned with what
   * was left: its release still under way (the turn, the teardown or the lease call), or a
   * lease call the store never answered. Returns their handles.
   */
  private reportUnreleased(): string[] {
    const out: string[] = [];
    for (const s of this.seats.values()) {
      if (s.phase === "undead") continue; // logged as such (seat_release_unproven); its retries own it
      out.push(s.handle);
      const left = s.fenced ? "fenced_teardown_under_way" : s.phase === "releasing" ? "release_under_way" : s.phase === "establishing" ? "acquire_under_way" : "release_not_started";
      this.log.warn("seat_release_abandoned", { seat: s.handle, epoch: s.epoch, left, lapses_within_ms: this.ttl_ms });
    }
    for (const [key, p] of this.pendingReleases) {
      const handle = key.startsWith(SEAT_PREFIX) ? key.slice(SEAT_PREFIX.length) : key;
      if (out.includes(handle)) continue;
      out.push(handle);
      this.log.warn("seat_release_abandoned", { seat: handle, epoch: p.epoch, left: "lease_release_unanswered", lapses_within_ms: this.ttl_ms });
    }
    return out;
  }

  /** Stops the loops. Leases still held lapse at their TTL; drain() first to hand them over. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.lapseWake?.cancel();
    this.grantDeadline?.timer.cancel();
    await Promise.all([this.sweepLoop.stop(), this.heartbeatLoop.stop()]);
    await this.settleBackground();
  }

  /**
   * The process died under it (a simulation's crash): stop every loop and forget without
   * releasing or detaching anything, as a kill -9 would.
   */
  async abandon(): Promise<void> {
    this.stopped = true;
    this.lapseWake?.cancel();
    this.grantDeadline?.timer.cancel();
    await Promise.all([this.sweepLoop.stop(false), this.heartbeatLoop.stop(false)]);
  }

  private async settleBackground(): Promise<void> {
    // Bounded: each round awaits what exists now; work a round starts is awaited next.
    for (let i = 0; i < 8 && this.background.size > 0; i++) {
      await Promise.allSettled([...this.background]);
    }
  }

  // ---- admission and fencing --------------------------------------------------------------

  /**
   * The epoch to run a turn under, or false. A successful renew sent at t bought
   * exclusivity through t + ttl, so a turn admitted within one heartbeat of it is
   * certified owned for at least ttl − heartbeat.
   */
  mayStart(handle: string): number | false {
    const s = this.seats.get(handle);
    if (!s || s.phase !== "established" || s.fenced || !s.lease_held) return false;
    const age_ms = this.clock.now() - s.last_renew_ok_ms;
    if (age_ms > this.heartbeat_ms) {
      this.log.warn("seat_admission_stale", { seat: handle, epoch: s.epoch, renewed_ms_ago: age_ms });
      return false;
    }
    return s.epoch;
  }

  /** False once the seat's current grant here is not `epoch`, or its last good renew is a
   * TTL old (the store has let the lease go, whether or not a timer has said so yet). An
   * unreachable store alone does not close it, nor does a stuck teardown. */
  fence(handle: string, epoch: number): boolean {
    const s = this.seats.get(handle);
    return !!s && !s.fenced && s.lease_held && s.epoch === epoch && !this.lapsed(s);
  }

  /** Past the TTL since the last renew that worked, the store has let the lease go (its
   * clock started no earlier than ours, since a renew is stamped when it is sent). */
  private lapsed(s: SeatState): boolean {
    return this.clock.now() - s.last_renew_ok_ms >= this.ttl_ms;
  }

  /** A screening path deferred a delivery: the attachment is quiesced, and the next
   * successful renew resumes it (without this the seat is owned, attached and deaf). */
  recordDeferral(handle: string, epoch?: number): void {
    const s = this.seats.get(handle);
    if (s && (epoch === undefined || s.epoch === epoch)) s.deferred = true;
  }

  private turnContext(handle: string, epoch: number): TurnContext {
    const s = this.seats.get(handle);
    return {
      signal: s && s.epoch === epoch ? s.cancel.signal : AbortSignal.abort(new Error("seat not held at this epoch")),
      handle,
      epoch,
      fence: () => this.fence(handle, epoch),
      admit: () => this.mayStart(handle) === epoch,
    };
  }

  /** Screening before anything runs: not owned here, a stale renew or another epoch. */
  private admitted(handle: string, epoch: number): boolean {
    const admitted = this.mayStart(handle);
    if (admitted !== false && admitted === epoch) return true;
    this.recordDeferral(handle, epoch);
    return false;
  }

  private screened(handle: string, epoch: number, handler: InboxHandler): Handler {
    const batch = this.screenedBatch(handle, epoch, async (ds, turn) => [await handler(ds[0]!, turn)]);
    return async (delivery) => (await batch([delivery]))[0]!;
  }

  /** The same screening for a whole drain: it runs as one, or is deferred as one. Probes
   * are taken out first: acked, reported, never run. */
  private screenedBatch(handle: string, epoch: number, handler: BatchInboxHandler): BatchHandler {
    return async (deliveries) => {
      const outs: Outcome[] = deliveries.map(() => ack());
      const mail: number[] = [];
      deliveries.forEach((d, i) => {
        const probe = probeIdOf(d.headers);
        if (probe === null) mail.push(i);
        else this.opts.onProbe?.(handle, probe);
      });
      try {
        if (mail.length === 0) return outs;
        if (!this.admitted(handle, epoch)) {
          for (const i of mail) outs[i] = defer(`seat "${handle}" is not owned here`);
          return outs;
        }
        const ran = await handler(
          mail.map((i) => deliveries[i]!),
          this.turnContext(handle, epoch),
        );
        // An answer shorter than the mail hands the rest back unrun, as the queue would.
        mail.forEach((i, k) => (outs[i] = ran[k] ?? nak()));
        if (ran.some((o) => o.kind === "defer")) this.recordDeferral(handle, epoch);
        return outs;
      } finally {
        const s = this.seats.get(handle);
        if (s && s.epoch === epoch) s.settled_at_ms = this.clock.now();
      }
    };
  }

  // ---- heartbeat --------------------------------------------------------------------------

  private presenceMeta(): PresenceMeta {
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

  /** A presence refused to this process is held by another live one under the same node id. */
  private afterPresenceBeat(beat: PresenceBeat): void {
    if (beat === "acquired" || beat === "renewed") this.nodeIdInUse = false;
    if (beat !== "refused" || this.nodeIdInUse) return;
    // Until this process holds its presence row it claims nothing: the holder may be a
    // live process (the node stops on the hook) or a predecessor not proved dead, whose
    // row lapses within a TTL.
    this.nodeIdInUse = true;
    this.opts.onNodeIdInUse?.(this.presence.refusedBy ?? "unknown");
  }

  private async heartbeat(): Promise<void> {
    const started = this.clock.now();
    const presence = this.draining ? Promise.resolve() : this.presence.beat(this.presenceMeta()).then((beat) => this.afterPresenceBeat(beat));
    // The stalest first, so a beat that runs out of time leaves the freshest for the next.
    const held = [...this.seats.values()].filter((s) => s.lease_held).sort((a, b) => a.last_renew_ok_ms - b.last_renew_ok_ms);
    const renewals = eachInFlight(held, LEASE_CALLS_IN_FLIGHT, async (s) => {
      // Past one heartbeat the next beat is due and starts with these: a store that answers
      // slowly never stretches one turn (which the watchdog times) beyond two heartbeats.
      if (this.clock.now() - started >= this.heartbeat_ms) return;
      if (this.seats.get(s.handle) === s && s.lease_held) await this.renewSeat(s);
    });
    await Promise.all([presence, renewals]);
    this.armGrantDeadline();
    this.retryUndead();
    this.retryPendingReleasesBeside();
  }

  private async renewSeat(s: SeatState): Promise<void> {
    // Stamped when this seat's turn in the beat's pool comes, not when the beat began. The
    // store's in-flight limit may hold the call a moment more, which only makes the stamp
    // earlier than the send, and the store stamps the write later still: never late.
    const sent = this.clock.now();
    const r = await this.store.renew(s.key, this.owner, s.epoch);
    if (this.seats.get(s.handle) !== s || !s.lease_held) return;
    if (r.status === "renewed") {
      s.last_renew_ok_ms = Math.max(s.last_renew_ok_ms, sent);
      const wasStale = s.stale;
      s.stale = false;
      if (s.phase === "established" && !s.fenced && s.attachment && (wasStale || s.deferred)) {
        s.deferred = false;
        s.attachment.resume();
        if (wasStale) {
          this.log.info("seat_admission_restored", { seat: s.handle, epoch: s.epoch });
          this.hooks.onAdmitted?.(this.grantOf(s));
        }
      }
      return;
    }
    if (r.status === "lost") {
      s.lease_held = false;
      this.fenceSeat(s, "lease_lost");
      return;
    }
    // Unknown says nothing about ownership: keep the seat, stop starting turns on it.
    if (!s.stale) {
      s.stale = true;
      if (s.phase === "established") s.attachment?.quiesce();
      this.log.warn("seat_renew_unknown", { seat: s.handle, epoch: s.epoch, error: r.error });
    }
    this.expireIfLapsed(s);
  }

  /** The grant is gone at its lease's lapse whatever the store would answer. */
  private expireIfLapsed(s: SeatState): void {
    if (!s.lease_held || s.fenced || !this.lapsed(s)) return;
    s.lease_held = false;
    this.fenceSeat(s, "ttl_grace_expired");
  }

  /**
   * Arms the one timer that ends a grant at its lease's lapse when no renew has come back.
   * A renew is bounded by a heartbeat, but one that hangs to its bound and the beats after
   * it would otherwise fence the seat only when an answer arrived — in a chaos run (seed 7)
   * 52–80 ms after a peer had claimed the lapsed lease. Re-armed after every heartbeat and
   * claim, for the earliest deadline only, so it costs one timer per host.
   */
  private armGrantDeadline(): void {
    let at_ms = Number.POSITIVE_INFINITY;
    for (const s of this.seats.values()) if (s.lease_held && !s.fenced) at_ms = Math.min(at_ms, s.last_renew_ok_ms + this.ttl_ms);
    if (this.grantDeadline?.at_ms === at_ms) return;
    this.grantDeadline?.timer.cancel();
    this.grantDeadline = null;
    if (at_ms === Number.POSITIVE_INFINITY || this.stopped) return;
    const timer = this.clock.setTimeout(() => {
      this.grantDeadline = null;
      for (const s of this.seats.values()) this.expireIfLapsed(s);
      this.armGrantDeadline();
    }, at_ms - this.clock.now());
    this.grantDeadline = { at_ms, timer };
  }

  // ---- sweep ------------------------------------------------------------------------------

  private selfFacts(): SelfFacts {
    return {
      node_id: this.node_id,
      roles: this.opts.roles,
      labels: this.opts.labels ?? {},
      protocol: this.protocol,
      draining: this.draining,
      withdrawn: this.withdrawn,
      behind: this.behind,
      takeover: this.takeover !== undefined,
    };
  }

  private holdings(): Holdings {
    const healthy: string[] = [];
    const undead: string[] = [];
    const not_ready: string[] = [];
    const idle: string[] = [];
    const now = this.clock.now();
    for (const s of this.seats.values()) {
      if (s.phase === "undead") {
        if (s.lease_held) undead.push(s.handle);
      } else if (s.phase === "established" && !s.fenced) {
        healthy.push(s.handle);
        // No turn running and none settled within a pass: a give-back interrupts nobody.
        if (s.attachment && s.attachment.inFlight === 0 && now - s.settled_at_ms >= SWEEP_INTERVAL_MS) idle.push(s.handle);
      } else if (s.lease_held || !s.finished) not_ready.push(s.handle);
    }
    return { healthy, undead, not_ready, idle };
  }

  private async sweep(): Promise<void> {
    if (this.draining || this.stopped || this.nodeIdInUse) return;
    const sweep_started_ms = this.clock.now();
    // From a standing watch of the presence rows while it hears every heartbeat's rewrite
    // (PRESENCE_WATCH_FRESH_HEARTBEATS), else a listing.
    const views = await this.store.listWatched(PRESENCE_PREFIX, PRESENCE_WATCH_FRESH_HEARTBEATS * this.heartbeat_ms);
    const listed = this.listedAt(views);
    const presences = views.filter((v) => v.live).map((v) => parsePresence(v, this.log));
    this.livePresences = presences;
    let floor = minProtocol(presences.map((p) => p.protocol));
    const base = {
      self: this.selfFacts(),
      seats: this.seatsSpec,
      presences: presences as PresenceFact[],
      holdings: this.holdings(),
      preferred: new Map([...this.seats.keys()].map((h) => [h, this.node_id] as const)),
    };
    let p = plan({ ...base, leases: null, protocol_floor: floor });
    let leases: Map<string, SeatLeaseFact> | null = null;
    if (p.leases_needed) {
      const seatViews = await this.store.list(SEAT_PREFIX);
      listed.push(...this.listedAt(seatViews));
      leases = new Map<string, SeatLeaseFact>();
      const preferred = new Map<string, string>();
      for (const v of seatViews) {
        const handle = v.key.slice(SEAT_PREFIX.length);
        const mine = v.owner === this.owner;
        leases.set(handle, { node_id: ownerNodeId(v.owner), mine, predecessor: !mine && (this.takeover?.(v.owner) ?? false), live: v.live, protocol: v.protocol });
        if (v.preferred) preferred.set(handle, v.preferred);
      }
      floor = minProtocol([...presences.map((x) => x.protocol), ...seatViews.filter((v) => v.live).map((v) => v.protocol)]);
      // Holdings are re-read: a heartbeat may have fenced a seat while the list was out.
      p = plan({ ...base, holdings: this.holdings(), preferred, leases, protocol_floor: floor });
    }
    this.lastPlan = p;
    this.protocolFloor = floor;
    this.reportFleet(p, presences);

    if (p.withheld === "protocol") {
      // Once per floor: the wait lasts until the last lower lease lapses, every pass.
      if (floor !== this.lastBlockedFloor) this.log.warn("seat_claims_blocked_by_older_protocol", { floor, protocol: this.protocol });
      this.lastBlockedFloor = floor;
    } else if (p.withheld === "behind") {
      this.log.debug("seat_claims_withheld", { reason: "behind" });
    }
    if (p.withheld !== "protocol") this.lastBlockedFloor = null;

    for (const r of p.releases) {
      const s = this.seats.get(r.handle);
      if (!s) continue;
      if (r.reason === "role_gone") this.log.info("seat_released_role_gone", { seat: r.handle, epoch: s.epoch });
      this.track(this.withLock(r.handle, () => this.releaseVoluntarilyLocked(s, r.reason)));
    }
    for (const h of p.orphans) this.track(this.withLock(h, () => this.releaseOrphanLocked(h)));

    // The pass decides; its claims run beside it. Establishing a seat waits on the broker
    // (a consumer whose leader just died answers only after its election, seconds later),
    // and a sweep turn held past the lease TTL is one the watchdog ends the process for:
    // a short TTL would turn one member's death into a peer's. A pass whose predecessor's
    // claims are still running claims nothing, so the per-pass limit still holds.
    const claiming = this.claiming === null ? p.claims : [];
    if (claiming.length > 0) {
      const run = this.claimInOrder(claiming, leases).finally(() => {
        if (this.claiming === run) this.claiming = null;
      });
      this.claiming = run;
      this.track(run);
    } else if (p.releases.length > 0) await this.advertise();
    this.wakeAtLapse(listed, sweep_started_ms);
    this.log.info("seat_sweep", {
      held: this.heldHandles().length,
      capacity: p.capacity,
      live_nodes: presences.filter((x) => x.node_id !== this.node_id).length + 1,
      claiming: claiming.length,
      released: p.releases.length,
      fleet_full: p.fleetFull,
      withheld: p.withheld,
      elapsed_ms: this.clock.now() - sweep_started_ms,
    });
  }

  /** What a listing said, with each lease's time left counted from when the listing came back. */
  private listedAt(views: readonly LeaseView[]): (ListedLease & { listed_at_ms: number })[] {
    const listed_at_ms = this.clock.now();
    return views.map((v) => ({ owner: v.owner, live: v.live, remaining_ms: v.remaining_ms, listed_at_ms }));
  }

  /**
   * Arms one early pass for the first lapse, among the leases this pass listed, of another
   * node's lease that is going unrenewed, when it comes before the next regular pass
   * (lapse-wake.ts decides). So a dead node's presence and then its seats are taken at their
   * lapse, not up to a sweep interval later. Nothing is taken on the timer's word: the
   * pass judges every lease on the store's clock as any pass does.
   */
  private wakeAtLapse(listed: readonly (ListedLease & { listed_at_ms: number })[], pass_started_ms: number): void {
    const now = this.clock.now();
    const in_ms = lapseWakeIn({
      leases: listed.map((l) => ({ ...l, remaining_ms: l.remaining_ms - (now - l.listed_at_ms) })),
      self_owner: this.owner,
      ttl_ms: this.ttl_ms,
      next_pass_in_ms: pass_started_ms + SWEEP_INTERVAL_MS - now,
    });
    this.lapseWake?.cancel();
    this.lapseWake = null;
    if (in_ms === null) return;
    this.lapseWake = this.clock.setTimeout(() => {
      this.lapseWake = null;
      if (this.stopped) return;
      this.log.info("seat_sweep_at_lapse", { waited_ms: in_ms });
      this.sweepLoop.poke();
    }, in_ms);
  }

  /** One pass's claims, in the planner's order, CLAIMS_IN_FLIGHT at a time; the presence row
   * says the new count after. */
  private async claimInOrder(handles: readonly string[], seen: ReadonlyMap<string, SeatLeaseFact> | null): Promise<void> {
    let claimed = 0;
    let next = 0;
    let refused = false;
    const worker = async (): Promise<void> => {
      while (next < handles.length && !refused) {
        const h = handles[next++]!;
        const out = await this.claim(h, seen?.get(h));
        if (out === "claimed") claimed++;
        if (out === "protocol") refused = true; // every other claim in the pass would be refused alike
      }
    };
    await Promise.all(Array.from({ length: Math.min(CLAIMS_IN_FLIGHT, handles.length) }, worker));
    if (claimed > 0) await this.advertise();
    this.log.debug("seat_claims_done", { tried: handles.length, claimed });
  }

  private reportFleet(p: Plan, presences: PresenceRow[]): void {
    const unplaceable = JSON.stringify(p.unplaceable);
    if (unplaceable !== this.lastUnplaceable) {
      this.lastUnplaceable = unplaceable;
      if (p.unplaceable.length > 0) this.log.warn("seats_unplaceable", { seats: p.unplaceable });
    }
    const unmanned = unmannedRoles(presences, this.selfFacts());
    const key = JSON.stringify(unmanned);
    if (key !== this.lastUnmanned) {
      this.lastUnmanned = key;
      if (unmanned.length > 0) this.log.warn("fleet_role_unmanned", { roles: unmanned });
    }
  }

  /**
   * The presence row says the new count now, so a seat given back is taken at the next
   * sweep rather than after this node's next heartbeat. One write at a time: a caller that
   * finds one in flight (which may carry an older count) waits for the single write after
   * it, which carries every change made meanwhile. Seats fenced together (a lost store
   * fences a node's whole share at its lapse) each asked for their own write, and 660 of
   * them on one key were 660 compare-and-set races on a row every peer reads.
   */
  private advertise(): Promise<void> {
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

  // ---- claiming ---------------------------------------------------------------------------

  /** Claims and establishes one seat (the sweep's unit of work; exposed for tests). */
  /**
   * A named hold on a seat's inbox (a person's pause): kept for the seat whenever this node
   * attaches it, and put on (or taken off) the attachment it has now. Mail waits in the
   * mailbox while held; the seat stays held and attached.
   */
  setHold(handle: string, name: string, on: boolean): void {
    const want = this.wantedHolds.get(handle) ?? new Set<string>();
    if (on) want.add(name);
    else want.delete(name);
    if (want.size > 0) this.wantedHolds.set(handle, want);
    else this.wantedHolds.delete(handle);
    const att = this.seats.get(handle)?.attachment;
    if (!att) return;
    if (on) att.hold(name);
    else att.releaseHold(name);
    this.log.info(on ? "seat_hold_set" : "seat_hold_released", { seat: handle, hold: name });
  }

  /** `seen`: the seat's lease as the pass that chose it read it (for the claim's reason). */
  claim(handle: string, seen?: SeatLeaseFact): Promise<ClaimOutcome> {
    return this.withLock(handle, () => this.claimLocked(handle, seen));
  }

  private async claimLocked(handle: string, seen: SeatLeaseFact | undefined): Promise<ClaimOutcome> {
    if (this.draining || this.stopped || this.seats.has(handle)) return "skipped";
    const key = seatKey(handle);
    const sent = this.clock.now();
    const r = await this.store.acquire(key, {
      owner: this.owner,
      preferred: this.node_id,
      ttl_ms: this.ttl_ms,
      meta: { node: this.node_id },
      gate: true,
      takeover: this.takeover,
    });
    if (!r.ok) {
      if (r.rule === "protocol") this.log.warn("seat_claims_blocked_by_older_protocol", { seat: handle, floor: r.floor });
      else if (r.rule === "unknown") this.log.warn("seat_claim_unknown", { seat: handle, error: r.error });
      else this.log.debug("seat_claim_lost", { seat: handle, holder: r.holder });
      return r.rule;
    }
    // Re-checked under the seat's own lock: a lease taken while a drain began goes straight
    // back before anything attaches, or the pass would keep a seat on a node that is leaving.
    if (this.draining || this.stopped) {
      await this.giveBackLease(key, r.lease.epoch);
      this.log.info("seat_claim_handed_back", { seat: handle, epoch: r.lease.epoch, reason: "draining" });
      return "skipped";
    }
    const s: SeatState = {
      handle,
      key,
      epoch: r.lease.epoch,
      acquired_at: r.lease.acquired_at,
      phase: "establishing",
      lease_held: true,
      fenced: false,
      finished: false,
      attachment: null,
      last_renew_ok_ms: sent,
      stale: false,
      deferred: false,
      undead: null,
      cancel: new AbortController(),
      settled_at_ms: 0,
    };
    this.seats.set(handle, s);
    this.log.info("seat_claimed", { seat: handle, epoch: s.epoch, reason: claimReason(s.epoch, seen) });
    this.armGrantDeadline();
    const grant = this.grantOf(s);
    try {
      for (const step of this.hooks.prepare ?? []) {
        await step(grant);
        if (s.fenced) throw new Error(`seat fenced while establishing`);
      }
      if (this.draining || this.stopped) {
        await this.releaseVoluntarilyLocked(s, "drain");
        return "skipped";
      }
      if (this.opts.attachInbox ?? true) {
        const holds = [...new Set([...((await this.hooks.attachHolds?.(handle)) ?? []), ...(this.wantedHolds.get(handle) ?? [])])];
        const { subject, group } = mailbox(handle, "inbox");
        const { batchHandler, handler } = this.opts;
        s.attachment = batchHandler
          ? await this.queue.attachBatch(subject, group, this.screenedBatch(handle, s.epoch, batchHandler), { holds, batch: INBOX_DRAIN_MAX })
          : await this.queue.attach(subject, group, this.screened(handle, s.epoch, handler!), { holds });
        if (s.fenced) throw new Error(`seat fenced while attaching`);
        if (s.stale) s.attachment.quiesce();
        this.log.info("seat_attached", { seat: handle, epoch: s.epoch, holds, claim_ms: this.clock.now() - sent });
      }
      s.phase = "established";
    } catch (err) {
      this.log.error("seat_acquire_failed", { seat: handle, epoch: s.epoch, error: err as Error });
      s.fenced = true;
      await this.releaseFencedLocked(s, s.lease_held ? "acquire_hook_failed" : "lease_lost");
      return "failed";
    }
    this.hooks.onEstablished?.(grant);
    return "claimed";
  }

  // ---- releasing --------------------------------------------------------------------------

  /** Gives a held seat back voluntarily (rebalance, drain, role gone …); exposed for the
   * node's own reasons (unprepared). */
  release(handle: string, reason: string): Promise<void> {
    const s = this.seats.get(handle);
    if (!s) return Promise.resolve();
    return this.withLock(handle, () => this.releaseVoluntarilyLocked(s, reason));
  }

  /** Fenced release for a posture that went shed/stuck: detach first, abandon, republish
   * nothing. */
  fenceRelease(handle: string, reason: string): void {
    const s = this.seats.get(handle);
    if (s) this.fenceSeat(s, reason);
  }

  /** Quiesce → bounded wait for the in-flight handler → detach → teardown → release. */
  private async releaseVoluntarilyLocked(s: SeatState, reason: string): Promise<void> {
    if (this.seats.get(s.handle) !== s || s.finished || s.fenced || s.phase === "undead") return;
    s.phase = "releasing";
    const att = s.attachment;
    if (att) {
      att.quiesce();
      const wait_ms = reason === "drain" ? Math.min(DRAIN_TURN_WAIT_MS, VOLUNTARY_WAIT_HEARTBEATS * this.heartbeat_ms) : VOLUNTARY_WAIT_HEARTBEATS * this.heartbeat_ms;
      if (att.inFlight > 0) await this.idleWithin(att, wait_ms);
      if (att.inFlight > 0) {
        // Cancelled at its next await: its deliveries are handed back (NAK) on this
        // connection before the attachment goes, so the successor runs them at once
        // rather than after the ack wait.
        this.log.warn("seat_turn_cancelled", { seat: s.handle, epoch: s.epoch, reason, waited_ms: wait_ms });
        s.cancel.abort(new Error(`seat ${s.handle} released (${reason})`));
        await this.idleWithin(att, CANCEL_SETTLE_WAIT_MS);
      }
      s.attachment = null;
      await att.detach();
    }
    // Logged with or without an inbox (a drain that met a seat still establishing): every
    // tenure's end is on record before its lease goes back, for the failover count and the
    // chaos checker alike.
    this.log.info("seat_detached", { seat: s.handle, epoch: s.epoch, reason, mode: "voluntary", attached: att !== null });
    await this.teardown(s, { mode: "voluntary", reason });
  }

  /** Resolves when the attachment is idle or after `ms`, whichever is first. */
  private async idleWithin(att: Attachment, ms: number): Promise<void> {
    const stop = new AbortController();
    await Promise.race([att.idle(), this.clock.sleep(ms, stop.signal).catch(() => {})]);
    stop.abort();
  }

  /** Revokes the grant at once (sync: fence fails, nothing new starts), then tears down
   * under the seat's lock. */
  private fenceSeat(s: SeatState, reason: string): void {
    if (s.fenced) return;
    s.fenced = true;
    // The grant ends here, not at the detach that follows under the seat's lock (which may
    // wait on a release or an acquire step): this line is when ownership stopped.
    this.log.info("seat_fenced", { seat: s.handle, epoch: s.epoch, reason });
    // Nothing this grant runs may finish now: a turn waiting on its model stops waiting.
    s.cancel.abort(new Error(`seat ${s.handle} fenced (${reason})`));
    s.attachment?.quiesce();
    this.track(this.withLock(s.handle, () => this.releaseFencedLocked(s, reason)));
  }

  /** Detach first, abandon in-flight work, republish nothing, then teardown. */
  private async releaseFencedLocked(s: SeatState, reason: string): Promise<void> {
    if (this.seats.get(s.handle) !== s || s.finished) return;
    s.fenced = true;
    const att = s.attachment;
    s.attachment = null;
    if (att) {
      await att.detach();
      this.log.info("seat_detached", { seat: s.handle, epoch: s.epoch, reason, mode: "fenced" });
    }
    if (s.phase === "undead") return; // its retries own the teardown
    await this.teardown(s, { mode: "fenced", reason });
  }

  private async teardown(s: SeatState, info: ReleaseInfo): Promise<void> {
    try {
      await this.hooks.onRelease?.(this.grantOf(s), info);
    } catch (err) {
      // Not proven torn down: the lease is not released (one released too early costs
      // correctness, one held too long only latency). Out of the held set, still renewed.
      s.phase = "undead";
      s.undead = { since_ms: this.clock.now(), attempts: 1, heartbeats: 0, info, retrying: false };
      this.log.error("seat_release_unproven", { seat: s.handle, epoch: s.epoch, reason: info.reason, error: err as Error });
      return;
    }
    await this.finish(s);
  }

  private async finish(s: SeatState): Promise<void> {
    s.finished = true;
    this.seats.delete(s.handle);
    if (s.lease_held) {
      s.lease_held = false;
      await this.giveBackLease(s.key, s.epoch);
    }
    await this.advertise();
  }

  private async giveBackLease(key: string, epoch: number): Promise<void> {
    const r = await this.store.release(key, this.owner, epoch);
    if (r === "unknown") this.pendingReleases.set(key, { epoch, until_ms: this.clock.now() + PENDING_RELEASE_TTLS * this.ttl_ms });
  }

  private async releaseOrphanLocked(handle: string): Promise<void> {
    if (this.seats.has(handle)) return;
    const v = await this.store.get(seatKey(handle)).catch(() => null);
    if (!v || !v.live || v.owner !== this.owner) return;
    this.log.info("seat_orphan_released", { seat: handle, epoch: v.epoch });
    await this.giveBackLease(v.key, v.epoch);
  }

  /**
   * The heartbeat's pass over unanswered give-backs runs beside it, one pass at a time, never
   * in its turn: a store that leaves them unanswered (a member cut off) would otherwise hold
   * the turn — and the renewals of every seat kept — for as long as the pass takes.
   */
  private retryPendingReleasesBeside(): void {
    if (this.retryingReleases || this.pendingReleases.size === 0) return;
    const pass = this.retryPendingReleases().finally(() => (this.retryingReleases = null));
    this.retryingReleases = pass;
    this.track(pass);
  }

  /**
   * Asks again for every unanswered give-back, LEASE_CALLS_IN_FLIGHT at once: one after
   * another, 660 give-backs left unanswered in a 2,000-seat chaos run took a bound each
   * (15 s at the shipped TTL), past the TTL. The pass runs beside the heartbeat, so however
   * long it takes no kept seat waits for it; an entry whose lease has lapsed by its turn is
   * dropped unasked.
   */
  private async retryPendingReleases(): Promise<void> {
    await eachInFlight([...this.pendingReleases], LEASE_CALLS_IN_FLIGHT, async ([key, p]) => {
      if (this.clock.now() >= p.until_ms) {
        if (this.pendingReleases.get(key) === p) this.pendingReleases.delete(key);
        return;
      }
      const r = await this.store.release(key, this.owner, p.epoch);
      // Only this entry: the key may have been claimed and given back again meanwhile.
      if (r !== "unknown" && this.pendingReleases.get(key) === p) this.pendingReleases.delete(key);
    });
  }

  /** Undead is a state, not a grave: the teardown is retried every heartbeat and the lease
   * goes the instant one succeeds. Still failing re-raises the alarm every 20 heartbeats. */
  private retryUndead(): void {
    for (const s of this.seats.values()) {
      const u = s.undead;
      if (s.phase !== "undead" || !u || u.retrying) continue;
      u.heartbeats++;
      u.retrying = true;
      this.track(
        this.withLock(s.handle, async () => {
          try {
            await this.hooks.onRelease?.(this.grantOf(s), u.info);
          } catch {
            u.attempts++;
            if (u.heartbeats % UNDEAD_ALARM_EVERY_HEARTBEATS === 0) {
              this.log.error("seat_still_unproven", {
                seat: s.handle,
                epoch: s.epoch,
                attempts: u.attempts,
                elapsed_seconds: Math.round((this.clock.now() - u.since_ms) / 1000),
              });
            }
            return;
          } finally {
            u.retrying = false;
          }
          this.log.info("seat_release_recovered", {
            seat: s.handle,
            epoch: s.epoch,
            attempts: u.attempts + 1,
            elapsed_seconds: Math.round((this.clock.now() - u.since_ms) / 1000),
          });
          await this.finish(s);
        }),
      );
    }
  }

  // ---- plumbing ---------------------------------------------------------------------------

  private grantOf(s: SeatState): SeatGrant {
    return { handle: s.handle, epoch: s.epoch, acquired_at: s.acquired_at };
  }

  /** One seat's acquisition, release and teardown never interleave. */
  private withLock<T>(handle: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(handle) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.catch(() => {});
    this.locks.set(handle, tail);
    void tail.then(() => {
      if (this.locks.get(handle) === tail) this.locks.delete(handle);
    });
    return run;
  }

  private track(p: Promise<unknown>): void {
    const t = p.catch((err) => this.log.error("seat_task_failed", { error: err as Error }));
    this.background.add(t);
    void t.finally(() => this.background.delete(t));
  }

  private heldHandles(): string[] {
    return [...this.seats.values()].filter((s) => s.phase === "established" && !s.fenced).map((s) => s.handle).sort();
  }

  // ---- what ownership looks like from outside ---------------------------------------------

  /** Seats this node runs now (established, admitting turns once fresh). */
  held(): string[] {
    return this.heldHandles();
  }

  /** For GET /health: answered from what the host already knows, no store read. */
  health(): HealthSeats {
    const unproven: Record<string, number> = {};
    for (const s of this.seats.values()) {
      if (s.phase === "undead" && s.undead) unproven[s.handle] = Math.round((this.clock.now() - s.undead.since_ms) / 1000);
    }
    const out: HealthSeats = {
      node_id: this.node_id,
      held: this.heldHandles(),
      capacity: this.lastPlan?.capacity ?? 0,
      live_nodes: this.livePresences.filter((p) => p.node_id !== this.node_id).length + (this.draining ? 0 : 1),
      protocol_floor: this.protocolFloor,
      fleet_full: this.lastPlan?.fleetFull ?? false,
      draining: this.draining,
      withdrawn: this.withdrawn,
      behind: this.behind,
      unplaceable: this.lastPlan?.unplaceable ?? [],
      seat_mailbox_deaf: this.opts.deafSeats?.() ?? [],
    };
    if (Object.keys(unproven).length > 0) out.unproven_seconds = unproven;
    return out;
  }

  /** For GET /fleet and /query/fleet: every live node and every live seat lease, read now. */
  async fleet(): Promise<FleetView> {
    const [nodeViews, seatViews, now] = await Promise.all([this.store.list(PRESENCE_PREFIX), this.store.list(SEAT_PREFIX), this.store.now()]);
    const presences = nodeViews.filter((v) => v.live).map((v) => parsePresence(v, this.log));
    const nodes: FleetNode[] = presences.map((p) => ({
      id: p.node_id,
      roles: [...p.roles],
      labels: { ...p.labels },
      protocol: p.protocol,
      broker: p.broker,
      seats_held: p.seats_held,
      expires_in_ms: Math.max(0, p.expires_at - now),
      draining: p.draining,
      withdrawn: p.withdrawn,
      behind: p.behind ?? false,
      seat_mailbox_deaf: p.seat_mailbox_deaf,
      ...(p.estate_applied ? { estate_applied: p.estate_applied } : {}),
    }));
    const leases: FleetLease[] = seatViews
      // A claim in flight (epoch 0 until its second write mints one) is not a tenure yet:
      // showing it would report a seat held at an epoch nobody holds.
      .filter((v: LeaseView) => v.live && v.epoch > 0)
      .map((v) => ({
        handle: v.key.slice(SEAT_PREFIX.length),
        node: ownerNodeId(v.owner),
        owner: v.owner,
        epoch: v.epoch,
        since: v.acquired_at,
        expires_in_ms: Math.max(0, v.expires_at - now),
      }));
    const p = plan({
      self: this.selfFacts(),
      seats: this.seatsSpec,
      presences,
      holdings: this.holdings(),
      preferred: new Map(),
      leases: null,
      protocol_floor: null,
    });
    return { nodes, leases, unplaceable: p.unplaceable, unmanned_roles: unmannedRoles(presences, this.selfFacts()) };
  }

  /** Per-seat facts for tests and simulations. */
  seatState(handle: string): SeatStateView | null {
    const s = this.seats.get(handle);
    if (!s) return null;
    return {
      phase: s.phase,
      epoch: s.epoch,
      fenced: s.fenced,
      lease_held: s.lease_held,
      stale: s.stale,
      attached: s.attachment !== null,
      renewed_at_ms: s.last_renew_ok_ms,
      taking_mail: s.attachment !== null && !s.attachment.quiesced && s.attachment.inFlight === 0,
      settled_at_ms: s.settled_at_ms,
      backing_off_until_ms: s.attachment?.backingOffUntil ?? 0,
    };
  }

  /** Every seat this host tracks, in any phase. */
  tracked(): string[] {
    return [...this.seats.keys()].sort();
  }
}

function minProtocol(values: number[]): number | null {
  return values.length === 0 ? null : Math.min(...values);
}
