// Which nodes serve the estate: live presences whose roles include data. Read from the
// lease store and cached briefly, because the router asks on every routed call and a
// presence moves on a heartbeat, not per request.
import type { Clock } from "../clock.ts";
import type { LeaseStore } from "../coord/contract.ts";
import { PRESENCE_PREFIX, parsePresence } from "../seat/presence.ts";
import { ROUTE_VIEW_STALE_MS } from "./posture.ts";

/** A presence row changes at most once a heartbeat (15 s); 2 s keeps a joiner's wait short. */
const DATA_NODES_CACHE_MS = 2_000;

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

  /** How long the view has gone without a successful read. */
  unreadMs(): number {
    return Math.max(0, this.clock.now() - Math.max(this.read_ms, this.since_ms));
  }

  private async refresh(): Promise<readonly string[]> {
    try {
      const views = await this.leases.list(PRESENCE_PREFIX);
      this.cached = views
        .filter((v) => v.live)
        .map((v) => parsePresence(v))
        .filter((p) => p.roles.includes("data"))
        .map((p) => p.node_id)
        .sort();
      this.read_ms = this.clock.now();
    } catch {
      // Past the bound, an unread view names nobody rather than a guess.
      if (this.unreadMs() > ROUTE_VIEW_STALE_MS) this.cached = [];
    }
    return this.cached;
  }
}
