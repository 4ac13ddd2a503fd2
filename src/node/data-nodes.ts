// Which nodes serve the estate: live presences whose roles include data. Read from the
// lease store and cached briefly, because the router asks on every routed call and a
// presence moves on a heartbeat, not per request. The seat sweep lists every presence row
// each pass already (to size its share); that listing is taken in here too (feedingDataNodes),
// so a node that routes nothing reads no presence rows of its own beyond its sweep's.
import type { Clock } from "../clock.ts";
import type { LeaseStore, LeaseView } from "../coord/contract.ts";
import { PRESENCE_PREFIX, parsePresence } from "../seat/presence.ts";
import { ROUTE_VIEW_STALE_MS } from "./posture.ts";

/** A presence row changes at most once a heartbeat (15 s); 2 s keeps a joiner's wait short. */
const DATA_NODES_CACHE_MS = 2_000;
/**
 * With no routed call asking and no sweep listing taken in for this long, the posture check
 * reads the view itself (keepRead), so its age keeps saying whether this node can still learn
 * who serves the estate. One heartbeat (15 s, TTL / 3 at the default TTL): a presence row
 * changes at most that often, so a fresher unprompted read would learn nothing; and it leaves
 * three quarters of ROUTE_VIEW_STALE_MS (60 s) for retries, one per posture tick, before an
 * unreadable store withdraws the node. A seats node's sweep feeds the view every 5 s, so there
 * this read does not happen; before, the posture check read whenever DATA_NODES_CACHE_MS had
 * run out — with the sweep's own, 2.7 presence listings per sweep, 13.5 of an idle node's
 * 19.3 messages per sweep (bench/scale.ts breakdown, 2,000 seats, one member).
 */
export const DATA_NODES_KEEP_READ_MS = 15_000;

export class DataNodesView {
  private cached: string[] = [];
  /** Last successful read (store clock is not needed: this is a local cache age). */
  private read_ms = -Infinity;
  /** Before the first read, "unread" counts from boot rather than from the epoch. */
  private readonly since_ms: number;
  private inflight: Promise<readonly string[]> | null = null;

  constructor(
    private readonly leases: LeaseStore,
    private readonly clock: Clock,
  ) {
    this.since_ms = clock.now();
  }

  /** The live data nodes (for the estate router). */
  readonly list = (): Promise<readonly string[]> => {
    if (this.clock.now() - this.read_ms < DATA_NODES_CACHE_MS) return Promise.resolve(this.cached);
    this.inflight ??= this.refresh().finally(() => (this.inflight = null));
    return this.inflight;
  };

  /** A presence listing someone else just made (the seat sweep's): the view as if read now. */
  see(views: readonly LeaseView[]): void {
    this.cached = dataNodesOf(views);
    this.read_ms = this.clock.now();
  }

  /** The posture check's read: only when nothing has read the view for DATA_NODES_KEEP_READ_MS
   * (a failed read leaves it due, so it is tried again on the next tick). */
  readonly keepRead = (): void => {
    if (this.clock.now() - this.read_ms < DATA_NODES_KEEP_READ_MS) return;
    this.inflight ??= this.refresh().finally(() => (this.inflight = null));
  };

  /** How long the view has gone without a successful read. */
  unreadMs(): number {
    return Math.max(0, this.clock.now() - Math.max(this.read_ms, this.since_ms));
  }

  private async refresh(): Promise<readonly string[]> {
    try {
      this.see(await this.leases.list(PRESENCE_PREFIX));
    } catch {
      // Past the bound, an unread view names nobody rather than a guess.
      if (this.unreadMs() > ROUTE_VIEW_STALE_MS) this.cached = [];
    }
    return this.cached;
  }
}

function dataNodesOf(views: readonly LeaseView[]): string[] {
  return views
    .filter((v) => v.live)
    .map((v) => parsePresence(v))
    .filter((p) => p.roles.includes("data"))
    .map((p) => p.node_id)
    .sort();
}

/** The same lease store, with every presence listing made through it (the seat sweep's each
 * pass, GET /fleet's) also taken in by the view. Only a listing of the whole presence prefix
 * is: it is exactly the read refresh() makes. */
export function feedingDataNodes(leases: LeaseStore, view: DataNodesView): LeaseStore {
  const seen = (prefix: string) => (views: LeaseView[]) => {
    if (prefix === PRESENCE_PREFIX) view.see(views);
    return views;
  };
  return {
    acquire: (key, opts) => leases.acquire(key, opts),
    renew: (key, owner, epoch, meta) => leases.renew(key, owner, epoch, meta),
    release: (key, owner, epoch) => leases.release(key, owner, epoch),
    get: (key) => leases.get(key),
    list: (prefix) => leases.list(prefix).then(seen(prefix)),
    listWatched: (prefix, fresh_within_ms) => leases.listWatched(prefix, fresh_within_ms).then(seen(prefix)),
    protocolFloor: () => leases.protocolFloor(),
    now: () => leases.now(),
  };
}
