// The agent engine's side of the seat hooks (src/seat/host.ts SeatHooks): on acquire,
// spawn the role's MCP children (a prepare step, before the host attaches the inbox
// last); on release, stop them and prove them gone (a throw leaves the seat undead and
// the host retries the teardown on every heartbeat).
import type { Logger } from "../log.ts";
import type { Org } from "../org/org.ts";
import type { McpPool } from "./mcp.ts";

export interface SeatGrantLike {
  handle: string;
  epoch: number;
}

/** Prepare step: the seat's MCP children, up before its first turn can run. */
export function mcpPrepareStep(pool: McpPool, org: () => Org, log: Logger): (grant: SeatGrantLike) => Promise<void> {
  return async (grant) => {
    const seat = org().agentSeat(grant.handle);
    if (!seat) throw new Error(`seat ${grant.handle} is not an agent seat of this company`);
    const tools = await pool.start(grant.handle, seat.mcp_servers);
    if (tools.length > 0) log.info("seat_mcp_ready", { seat: grant.handle, epoch: grant.epoch, tools: tools.length, pids: pool.pids(grant.handle) });
  };
}

/** Release step: the children die with the lease. */
export function mcpReleaseStep(pool: McpPool): (grant: SeatGrantLike) => Promise<void> {
  return async (grant) => {
    await pool.stop(grant.handle);
  };
}
