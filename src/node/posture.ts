// What the estate's state means for this node's seats (spec: "A copy that is behind, and
// a copy that is wrong"). Pure: facts in, flags out; the node applies them to the host.
//
//   behind        records wait that this copy has not applied: keep every seat, claim
//                 none until level (a node that is catching up will, and then takes its
//                 share).
//   withdrawn     this node's seats need another data node (it holds no data, or its own
//                 copy is out of service) and it has not been able to read who serves
//                 the estate for longer than every cached coordination fact may be held:
//                 it cannot route at all, so it gives its seats back (unserviceable).
//
// A copy that is wrong is neither: its seats stay, and their calls are routed to peers.

/** Every cached coordination fact is held at most this long before it counts as unread. */
export const ROUTE_VIEW_STALE_MS = 60_000;

export interface PostureFacts {
  /** This node holds a copy (data role). */
  data: boolean;
  /** Its copy serves (false: out of service, calls go to peers). */
  in_service: boolean;
  /** Any domain with records on the log this copy has not applied. */
  behind: boolean;
  /** How long the data-node view has gone unread (0 when it was read just now). */
  route_view_unread_ms: number;
}

export interface Posture {
  behind: boolean;
  withdrawn: boolean;
}

export function judgePosture(f: PostureFacts): Posture {
  const servedLocally = f.data && f.in_service;
  return {
    behind: servedLocally && f.behind,
    withdrawn: !servedLocally && f.route_view_unread_ms > ROUTE_VIEW_STALE_MS,
  };
}
