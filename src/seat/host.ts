// The seat host (spec: Seat Ownership). A seat is not a thing you can half-own: this node
// either holds a seat's lease, runs its agent and consumes its inbox, or does none of it.
// This file wires the host's parts and is its one face to the node and the tests:
//   host-state.ts  the state, in one place, and the plumbing the parts share
//   grant.ts       admission, the fence, renewal and the deadline of a held grant
//   tenure.ts      a seat's establishment and teardown (the acquire and release hooks)
//   give-back.ts   leases going back, asked again when the answer was lost
//   claim-loop.ts  the sweep applying the pure planner's decisions (placement.ts)
//   drain.ts       giving every seat back, within a bound
// The heartbeat (presence row and every renew, on one beat of TTL / 3, probing between
// beats while a renewal's answer is unknown) lives here.
import { eachInFlight } from "../in-flight.ts";
import { RENEW_PROBE_MS, type LeaseView } from "../coord/contract.ts";
import { LEASE_CALLS_IN_FLIGHT } from "./bounded-store.ts";
import { ClaimLoop } from "./claim-loop.ts";
import { Drain } from "./drain.ts";
import { GiveBacks } from "./give-back.ts";
import { Grants } from "./grant.ts";
import { HostState, type SeatHostOptions, type SeatPhase } from "./host-state.ts";
import { DutyLoop } from "./loop.ts";
import { ownerNodeId, placementKey, plan, unmannedRoles, SWEEP_INTERVAL_MS, type SeatLeaseFact, type SeatSpec } from "./placement.ts";
import { PRESENCE_PREFIX, parsePresence, SEAT_PREFIX, type PresenceBeat } from "./presence.ts";
import { Tenures, type ClaimOutcome } from "./tenure.ts";

export type { BatchInboxHandler, InboxHandler, ReleaseInfo, ReleaseMode, SeatGrant, SeatHooks, SeatHostOptions, SeatPhase, TurnContext } from "./host-state.ts";
export { PRESENCE_WATCH_FRESH_HEARTBEATS } from "./claim-loop.ts";
export { DRAIN_RELEASE_RETRY_MS } from "./drain.ts";
export { PENDING_RELEASE_TTLS } from "./give-back.ts";
export { CANCEL_SETTLE_WAIT_MS, claimReason, DRAIN_TURN_WAIT_MS, INBOX_DRAIN_MAX, VOLUNTARY_WAIT_HEARTBEATS, type ClaimOutcome, type ClaimReason } from "./tenure.ts";

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
  /** The inbox is attached and not quiesced (a turn may be running). */
  inbox_live: boolean;
  /** Stream sequences the inbox attachment holds unsettled (Attachment.holding). */
  holding: ReadonlySet<number>;
}

export class SeatHost {
  readonly node_id: string;
  readonly owner: string;
  private readonly h: HostState;
  private readonly grants: Grants;
  private readonly tenures: Tenures;
  private readonly giveBacks: GiveBacks;
  private readonly claimLoop: ClaimLoop;
  private readonly drainer: Drain;
  private readonly heartbeatLoop: DutyLoop;
  private readonly sweepLoop: DutyLoop;
  private lastEarlySweep_ms = Number.NEGATIVE_INFINITY;
  private lastFullBeat_ms = Number.NEGATIVE_INFINITY;

  constructor(opts: SeatHostOptions) {
    const h = new HostState(opts);
    this.h = h;
    this.node_id = h.node_id;
    this.owner = h.owner;
    const beat_ms = () => (this.grants.anyStale() ? Math.min(RENEW_PROBE_MS, h.heartbeat_ms) : h.heartbeat_ms);
    this.heartbeatLoop = new DutyLoop("seat_heartbeat", opts.clock, beat_ms, () => this.heartbeat(), opts.log, opts.watchdog);
    this.sweepLoop = new DutyLoop("seat_sweep", opts.clock, () => SWEEP_INTERVAL_MS, () => this.claimLoop.sweep(), opts.log, opts.watchdog);
    this.giveBacks = new GiveBacks(h);
    this.grants = new Grants(h, (s, reason) => this.tenures.fence(s, reason));
    this.tenures = new Tenures(h, this.grants, this.giveBacks);
    this.claimLoop = new ClaimLoop(h, this.tenures, this.giveBacks, () => this.sweepLoop.poke());
    this.drainer = new Drain(h, this.sweepLoop, this.claimLoop, this.tenures, this.giveBacks);
  }

  get ttl_ms(): number {
    return this.h.ttl_ms;
  }

  get heartbeat_ms(): number {
    return this.h.heartbeat_ms;
  }

  // ---- lifecycle --------------------------------------------------------------------------

  /** Takes the presence row and starts the heartbeat and the sweep (first pass at once). */
  async start(seats?: readonly SeatSpec[]): Promise<void> {
    if (this.h.started) return;
    this.h.started = true;
    if (seats) this.h.seatsSpec = [...seats];
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
    const changed = key(seats) !== key(this.h.seatsSpec);
    this.h.seatsSpec = [...seats];
    if (!changed || !this.h.started) return;
    const now = this.h.clock.now();
    if (now - this.lastEarlySweep_ms >= SWEEP_INTERVAL_MS) {
      this.lastEarlySweep_ms = now;
      this.sweepLoop.poke();
    }
  }

  /** Unserviceable: give every seat back, say so on the presence row, claim nothing. */
  setWithdrawn(withdrawn: boolean): void {
    if (this.h.withdrawn === withdrawn) return;
    this.h.withdrawn = withdrawn;
    this.h.log.warn(withdrawn ? "seats_withdrawn" : "seats_withdrawn_cleared", {});
    this.sweepLoop.poke();
  }

  /** The estate copy is catching up: keep every seat, claim none until level. */
  setBehind(behind: boolean): void {
    if (this.h.behind === behind) return;
    this.h.behind = behind;
    this.h.log.info(behind ? "seats_behind" : "seats_behind_cleared", {});
  }

  /**
   * Drain (drain.ts): presence given up, claim nothing, every seat given back voluntarily;
   * the heartbeat keeps renewing what is still being handed over; call stop() afterwards.
   * Bounded by `within_ms` (the node's stop gives it SEAT_DRAIN_WITHIN_MS): a seat not given
   * back by then is logged seat_release_abandoned and its lease lapses at its TTL.
   */
  drain(within_ms = Number.POSITIVE_INFINITY): Promise<void> {
    return this.drainer.run(within_ms);
  }

  /** Stops the loops. Leases still held lapse at their TTL; drain() first to hand them over. */
  async stop(): Promise<void> {
    if (this.h.stopped) return;
    this.h.stopped = true;
    this.claimLoop.cancelLapseWake();
    this.grants.cancelDeadline();
    await Promise.all([this.sweepLoop.stop(), this.heartbeatLoop.stop()]);
    await this.h.settleBackground();
  }

  /**
   * The process died under it (a simulation's crash): stop every loop and forget without
   * releasing or detaching anything, as a kill -9 would.
   */
  async abandon(): Promise<void> {
    this.h.stopped = true;
    this.claimLoop.cancelLapseWake();
    this.grants.cancelDeadline();
    await Promise.all([this.sweepLoop.stop(false), this.heartbeatLoop.stop(false)]);
  }

  // ---- admission and fencing (grant.ts) ---------------------------------------------------

  /** The epoch to run a turn under, or false (fresh within one heartbeat). */
  mayStart(handle: string): number | false {
    return this.grants.mayStart(handle);
  }

  /** False once the seat's current grant here is not `epoch`, or its lease has lapsed. */
  fence(handle: string, epoch: number): boolean {
    return this.grants.fence(handle, epoch);
  }

  /** A screening path deferred a delivery: the next successful renew resumes the inbox. */
  recordDeferral(handle: string, epoch?: number): void {
    this.grants.recordDeferral(handle, epoch);
  }

  // ---- heartbeat --------------------------------------------------------------------------

  /** A presence refused to this process is held by another live one under the same node id. */
  private afterPresenceBeat(beat: PresenceBeat): void {
    const h = this.h;
    if (beat === "acquired" || beat === "renewed") h.nodeIdInUse = false;
    if (beat !== "refused" || h.nodeIdInUse) return;
    // Until this process holds its presence row it claims nothing: the holder may be a
    // live process (the node stops on the hook) or a predecessor not proved dead, whose
    // row lapses within a TTL.
    h.nodeIdInUse = true;
    h.opts.onNodeIdInUse?.(h.presence.refusedBy ?? "unknown");
  }

  private async heartbeat(): Promise<void> {
    const h = this.h;
    // Between full beats the loop only probes a stale seat (RENEW_PROBE_MS): the first
    // renewal that comes back after an election brings the full beat forward.
    if (h.clock.now() - this.lastFullBeat_ms < h.heartbeat_ms && !(await this.grants.probe())) return;
    const started = h.clock.now();
    this.lastFullBeat_ms = started;
    const presence = h.draining ? Promise.resolve() : h.presence.beat(h.presenceMeta()).then((beat) => this.afterPresenceBeat(beat));
    // The stalest first, so a beat that runs out of time leaves the freshest for the next.
    const held = [...h.seats.values()].filter((s) => s.lease_held).sort((a, b) => a.last_renew_ok_ms - b.last_renew_ok_ms);
    const renewals = eachInFlight(held, LEASE_CALLS_IN_FLIGHT, async (s) => {
      // Past one heartbeat the next beat is due and starts with these: a store that answers
      // slowly never stretches one turn (which the watchdog times) beyond two heartbeats.
      if (h.clock.now() - started >= h.heartbeat_ms) return;
      if (h.seats.get(s.handle) === s && s.lease_held) await this.grants.renew(s);
    });
    await Promise.all([presence, renewals]);
    this.grants.armDeadline();
    this.tenures.retryUndead();
    this.giveBacks.retryBeside();
  }

  // ---- claiming and releasing (tenure.ts) -------------------------------------------------

  /** A named hold on a seat's inbox (a person's pause), kept whenever this node attaches it. */
  setHold(handle: string, name: string, on: boolean): void {
    this.tenures.setHold(handle, name, on);
  }

  /** Claims and establishes one seat (the sweep's unit of work; exposed for tests).
   * `seen`: the seat's lease as the pass that chose it read it (for the claim's reason). */
  claim(handle: string, seen?: SeatLeaseFact): Promise<ClaimOutcome> {
    return this.tenures.claim(handle, seen);
  }

  /** Gives a held seat back voluntarily (rebalance, drain, role gone …); exposed for the
   * node's own reasons (unprepared). */
  release(handle: string, reason: string): Promise<void> {
    return this.tenures.release(handle, reason);
  }

  /** Fenced release for a posture that went shed/stuck: detach first, abandon, republish
   * nothing. */
  fenceRelease(handle: string, reason: string): void {
    const s = this.h.seats.get(handle);
    if (s) this.tenures.fence(s, reason);
  }

  // ---- what ownership looks like from outside ---------------------------------------------

  /** Seats this node runs now (established, admitting turns once fresh). */
  held(): string[] {
    return this.h.heldHandles();
  }

  /** For GET /health: answered from what the host already knows, no store read. */
  health(): HealthSeats {
    const h = this.h;
    const unproven: Record<string, number> = {};
    for (const s of h.seats.values()) {
      if (s.phase === "undead" && s.undead) unproven[s.handle] = Math.round((h.clock.now() - s.undead.since_ms) / 1000);
    }
    const out: HealthSeats = {
      node_id: h.node_id,
      held: h.heldHandles(),
      capacity: h.lastPlan?.capacity ?? 0,
      live_nodes: h.livePresences.filter((p) => p.node_id !== h.node_id).length + (h.draining ? 0 : 1),
      protocol_floor: h.protocolFloor,
      fleet_full: h.lastPlan?.fleetFull ?? false,
      draining: h.draining,
      withdrawn: h.withdrawn,
      behind: h.behind,
      unplaceable: h.lastPlan?.unplaceable ?? [],
      seat_mailbox_deaf: h.opts.deafSeats?.() ?? [],
    };
    if (Object.keys(unproven).length > 0) out.unproven_seconds = unproven;
    return out;
  }

  /** For GET /fleet and /query/fleet: every live node and every live seat lease, read now. */
  async fleet(): Promise<FleetView> {
    const h = this.h;
    const [nodeViews, seatViews, now] = await Promise.all([h.store.list(PRESENCE_PREFIX), h.store.list(SEAT_PREFIX), h.store.now()]);
    const presences = nodeViews.filter((v) => v.live).map((v) => parsePresence(v, h.log));
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
      self: this.claimLoop.selfFacts(),
      seats: h.seatsSpec,
      presences,
      holdings: this.claimLoop.holdings(),
      preferred: new Map(),
      leases: null,
      protocol_floor: null,
    });
    return { nodes, leases, unplaceable: p.unplaceable, unmanned_roles: unmannedRoles(presences, this.claimLoop.selfFacts()) };
  }

  /** Mail waits in the seat's inbox that rang nobody (the deaf-seat watch saw it): pull now. */
  ringInbox(handle: string): void {
    this.h.seats.get(handle)?.attachment?.ring();
  }

  /** Per-seat facts for tests and simulations. */
  seatState(handle: string): SeatStateView | null {
    const s = this.h.seats.get(handle);
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
      inbox_live: s.attachment !== null && !s.attachment.quiesced,
      holding: s.attachment?.holding ?? new Set(),
    };
  }

  /** Every seat this host tracks, in any phase. */
  tracked(): string[] {
    return [...this.h.seats.keys()].sort();
  }
}
