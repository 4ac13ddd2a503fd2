// Which nodes serve the estate: live presences whose roles include data. Read from the
// lease store and cached briefly, because the router asks on every routed call and a
// presence moves on a heartbeat, not per request.
import type { Clock } from "../clock.ts";
import type { LeaseStore } from "../coord/contract.ts";
import { PRESENCE_PREFIX, parsePresence } from "../seat/presence.ts";

/** A presence row changes at most once a heartbeat (15 s); 2 s keeps a joiner's wait short. */
const DATA_NODES_CACHE_MS = 2_000;
/** Every cached coordination fact is bounded: past a minute unread, say nothing rather than guess. */
const DATA_NODES_STALE_MS = 60_000;

export function dataNodesFrom(leases: LeaseStore, clock: Clock): () => Promise<readonly string[]> {
  let cached: string[] = [];
  let read_ms = -Infinity;
  let inflight: Promise<readonly string[]> | null = null;
  const refresh = async (): Promise<readonly string[]> => {
    try {
      const views = await leases.list(PRESENCE_PREFIX);
      cached = views
        .filter((v) => v.live)
        .map((v) => parsePresence(v))
        .filter((p) => p.roles.includes("data"))
        .map((p) => p.node_id)
        .sort();
      read_ms = clock.now();
    } catch {
      if (clock.now() - read_ms > DATA_NODES_STALE_MS) cached = [];
    }
    return cached;
  };
  return () => {
    if (clock.now() - read_ms < DATA_NODES_CACHE_MS) return Promise.resolve(cached);
    inflight ??= refresh().finally(() => (inflight = null));
    return inflight;
  };
}
