// The claim loop: each sweep reads the presence rows (and the seat leases when the planner
// asks for them), hands the snapshot to the pure planner (placement.ts) and applies its
// decisions — releases and orphans under each seat's lock, claims beside the pass, at most
// CLAIMS_IN_FLIGHT at once — then arms one early pass for the next lapse it saw coming.
import type { Timer } from "../clock.ts";
import type { LeaseView } from "../coord/contract.ts";
import type { GiveBacks } from "./give-back.ts";
import type { HostState } from "./host-state.ts";
import { lapseWakeIn, type ListedLease } from "./lapse-wake.ts";
import {
  CLAIMS_IN_FLIGHT,
  ownerNodeId,
  plan,
  unmannedRoles,
  SWEEP_INTERVAL_MS,
  type Holdings,
  type Plan,
  type PresenceFact,
  type SeatLeaseFact,
  type SelfFacts,
} from "./placement.ts";
import { PRESENCE_PREFIX, parsePresence, SEAT_PREFIX, type PresenceRow } from "./presence.ts";
import type { Tenures } from "./tenure.ts";

/** How recently the presence watch must have heard a row for a sweep to trust it: every node
 * rewrites its row each heartbeat, so past 1.5 the watch is rebuilt from a listing, and a live
 * node never reads as lapsed inside the TTL's three heartbeats. */
export const PRESENCE_WATCH_FRESH_HEARTBEATS = 1.5;

export class ClaimLoop {
  /** The claims a pass started, still running (see sweep). */
  claiming: Promise<void> | null = null;
  /** The one early pass armed for a lapse another node's lease is heading to (wakeAtLapse). */
  private lapseWake: Timer | null = null;
  private lastUnplaceable = "";
  private lastUnmanned = "";
  private lastBlockedFloor: number | null = null;

  constructor(
    private readonly h: HostState,
    private readonly tenures: Tenures,
    private readonly giveBacks: GiveBacks,
    /** Runs a pass now (the sweep loop's poke). */
    private readonly pokeSweep: () => void,
  ) {}

  selfFacts(): SelfFacts {
    const h = this.h;
    return {
      node_id: h.node_id,
      roles: h.opts.roles,
      labels: h.opts.labels ?? {},
      protocol: h.protocol,
      draining: h.draining,
      withdrawn: h.withdrawn,
      behind: h.behind,
      takeover: h.takeover !== undefined,
    };
  }

  holdings(): Holdings {
    const healthy: string[] = [];
    const undead: string[] = [];
    const not_ready: string[] = [];
    const idle: string[] = [];
    const now = this.h.clock.now();
    for (const s of this.h.seats.values()) {
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

  async sweep(): Promise<void> {
    const h = this.h;
    if (h.draining || h.stopped || h.nodeIdInUse) return;
    const sweep_started_ms = h.clock.now();
    // From a standing watch of the presence rows while it hears every heartbeat's rewrite
    // (PRESENCE_WATCH_FRESH_HEARTBEATS), else a listing.
    const views = await h.store.listWatched(PRESENCE_PREFIX, PRESENCE_WATCH_FRESH_HEARTBEATS * h.heartbeat_ms);
    const listed = this.listedAt(views);
    const presences = views.filter((v) => v.live).map((v) => parsePresence(v, h.log));
    h.livePresences = presences;
    let floor = minProtocol(presences.map((p) => p.protocol));
    const base = {
      self: this.selfFacts(),
      seats: h.seatsSpec,
      presences: presences as PresenceFact[],
      holdings: this.holdings(),
      preferred: new Map([...h.seats.keys()].map((x) => [x, h.node_id] as const)),
    };
    let p = plan({ ...base, leases: null, protocol_floor: floor });
    let leases: Map<string, SeatLeaseFact> | null = null;
    if (p.leases_needed) {
      const seatViews = await h.store.list(SEAT_PREFIX);
      listed.push(...this.listedAt(seatViews));
      leases = new Map<string, SeatLeaseFact>();
      const preferred = new Map<string, string>();
      for (const v of seatViews) {
        const handle = v.key.slice(SEAT_PREFIX.length);
        const mine = v.owner === h.owner;
        leases.set(handle, { node_id: ownerNodeId(v.owner), mine, predecessor: !mine && (h.takeover?.(v.owner) ?? false), live: v.live, protocol: v.protocol });
        if (v.preferred) preferred.set(handle, v.preferred);
      }
      floor = minProtocol([...presences.map((x) => x.protocol), ...seatViews.filter((v) => v.live).map((v) => v.protocol)]);
      // Holdings are re-read: a heartbeat may have fenced a seat while the list was out.
      p = plan({ ...base, holdings: this.holdings(), preferred, leases, protocol_floor: floor });
    }
    h.lastPlan = p;
    h.protocolFloor = floor;
    this.reportFleet(p, presences);

    if (p.withheld === "protocol") {
      // Once per floor: the wait lasts until the last lower lease lapses, every pass.
      if (floor !== this.lastBlockedFloor) h.log.warn("seat_claims_blocked_by_older_protocol", { floor, protocol: h.protocol });
      this.lastBlockedFloor = floor;
    } else if (p.withheld === "behind") {
      h.log.debug("seat_claims_withheld", { reason: "behind" });
    }
    if (p.withheld !== "protocol") this.lastBlockedFloor = null;

    for (const r of p.releases) {
      const s = h.seats.get(r.handle);
      if (!s) continue;
      if (r.reason === "role_gone") h.log.info("seat_released_role_gone", { seat: r.handle, epoch: s.epoch });
      h.track(h.withLock(r.handle, () => this.tenures.releaseVoluntarilyLocked(s, r.reason)));
    }
    for (const x of p.orphans) h.track(h.withLock(x, () => this.giveBacks.releaseOrphanLocked(x)));

    // The pass decides; its claims run beside it. Establishing a seat waits on the broker
    // (a consumer whose leader just died answers only after its election, seconds later),
    // and a sweep turn held past the lease TTL is one the watchdog ends the process for.
    // A pass whose predecessor's claims are still running claims nothing, so the per-pass
    // limit still holds.
    const claiming = this.claiming === null ? p.claims : [];
    if (claiming.length > 0) {
      const run = this.claimInOrder(claiming, leases).finally(() => {
        if (this.claiming === run) this.claiming = null;
      });
      this.claiming = run;
      h.track(run);
    } else if (p.releases.length > 0) await h.advertise();
    this.wakeAtLapse(listed, sweep_started_ms);
    h.log.info("seat_sweep", {
      held: h.heldHandles().length,
      capacity: p.capacity,
      live_nodes: presences.filter((x) => x.node_id !== h.node_id).length + 1,
      claiming: claiming.length,
      released: p.releases.length,
      fleet_full: p.fleetFull,
      withheld: p.withheld,
      elapsed_ms: h.clock.now() - sweep_started_ms,
    });
  }

  /** What a listing said, with each lease's time left counted from when the listing came back. */
  private listedAt(views: readonly LeaseView[]): (ListedLease & { listed_at_ms: number })[] {
    const listed_at_ms = this.h.clock.now();
    return views.map((v) => ({ owner: v.owner, live: v.live, remaining_ms: v.remaining_ms, listed_at_ms }));
  }

  /** Arms one early pass for the first lapse of another node's unrenewed lease when it comes
   * before the next regular pass, so a dead node's seats are taken at their lapse. The pass still
   * judges every lease on the store's clock. */
  private wakeAtLapse(listed: readonly (ListedLease & { listed_at_ms: number })[], pass_started_ms: number): void {
    const h = this.h;
    const now = h.clock.now();
    const in_ms = lapseWakeIn({
      leases: listed.map((l) => ({ ...l, remaining_ms: l.remaining_ms - (now - l.listed_at_ms) })),
      self_owner: h.owner,
      ttl_ms: h.ttl_ms,
      next_pass_in_ms: pass_started_ms + SWEEP_INTERVAL_MS - now,
    });
    this.lapseWake?.cancel();
    this.lapseWake = null;
    if (in_ms === null) return;
    this.lapseWake = h.clock.setTimeout(() => {
      this.lapseWake = null;
      if (h.stopped) return;
      h.log.info("seat_sweep_at_lapse", { waited_ms: in_ms });
      this.pokeSweep();
    }, in_ms);
  }

  /** The host stops: no early pass after it. */
  cancelLapseWake(): void {
    this.lapseWake?.cancel();
  }

  /** One pass's claims, in the planner's order, CLAIMS_IN_FLIGHT at a time; the presence row
   * says the new count after. */
  private async claimInOrder(handles: readonly string[], seen: ReadonlyMap<string, SeatLeaseFact> | null): Promise<void> {
    let claimed = 0;
    let next = 0;
    let refused = false;
    const worker = async (): Promise<void> => {
      while (next < handles.length && !refused) {
        const x = handles[next++]!;
        const out = await this.tenures.claim(x, seen?.get(x));
        if (out === "claimed") claimed++;
        if (out === "protocol") refused = true; // every other claim in the pass would be refused alike
      }
    };
    await Promise.all(Array.from({ length: Math.min(CLAIMS_IN_FLIGHT, handles.length) }, worker));
    if (claimed > 0) await this.h.advertise();
    this.h.log.debug("seat_claims_done", { tried: handles.length, claimed });
  }

  private reportFleet(p: Plan, presences: PresenceRow[]): void {
    const unplaceable = JSON.stringify(p.unplaceable);
    if (unplaceable !== this.lastUnplaceable) {
      this.lastUnplaceable = unplaceable;
      if (p.unplaceable.length > 0) this.h.log.warn("seats_unplaceable", { seats: p.unplaceable });
    }
    const unmanned = unmannedRoles(presences, this.selfFacts());
    const key = JSON.stringify(unmanned);
    if (key !== this.lastUnmanned) {
      this.lastUnmanned = key;
      if (unmanned.length > 0) this.h.log.warn("fleet_role_unmanned", { roles: unmanned });
    }
  }
}

function minProtocol(values: number[]): number | null {
  return values.length === 0 ? null : Math.min(...values);
}
