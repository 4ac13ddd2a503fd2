// GET /agents and GET /agents/{handle}: each agent seat with who holds it (node, epoch,
// since) and, for seats this node runs, its turn state (busy, last turn, last error,
// token totals). A seat held by a peer says so rather than showing this node's zeros.
import { Hono, type Context } from "hono";
import type { SeatTurnStatus } from "../../agent/index.ts";
import type { Org } from "../../org/org.ts";
import type { FleetView } from "../../seat/host.ts";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { ApiError, parseNoBody, parseNoQuery } from "../errors.ts";

export interface AgentsSource {
  nodeId: string;
  org(): Org;
  status(handle: string): SeatTurnStatus;
  leases(): Promise<FleetView>;
  /** A person's controls (src/seat/controls.ts); absent: the routes answer 404 for them. */
  controls?: {
    paused(handle: string): { by: string; at: number } | null;
    pause(handle: string, by: string): Promise<{ changed: boolean; control: { by: string; at: number } }>;
    resume(handle: string): Promise<{ changed: boolean }>;
    stop(handle: string, by: string): Promise<{ by: string; at: number; id?: string }>;
  };
  /** The model a provider key names ("scripted" for the offline provider), null if unknown. */
  model?(llm: string): string | null;
  /** Tool names a seat held here is offered (builtins, integrations, its MCP servers' tools). */
  tools?(handle: string): string[];
  /** The same, asked of the seat's holder when a peer holds it (null: it did not answer). */
  holderTools?(handle: string): Promise<string[] | null>;
}

/** What the company file says of a seat, for its agent page. */
async function profile(src: AgentsSource, handle: string, here: boolean, held: boolean) {
  const seat = src.org().agentSeat(handle)!;
  return {
    goal: seat.goal,
    backstory: seat.backstory,
    llm: seat.llm ?? null,
    model: seat.llm ? (src.model?.(seat.llm) ?? null) : null,
    reports: [...seat.reports],
    units: [...seat.units],
    mcp_servers: Object.keys(seat.mcp_servers),
    /** Where the seat may run (labels to match, a pinned node); empty: any seats node. */
    placement: seat.placement,
    // A seat's MCP tools are known only where its servers run: its holder, asked when a
    // peer holds the seat (null when nobody holds it or the holder did not answer).
    tools: here && src.tools ? src.tools(handle) : held && src.holderTools ? await src.holderTools(handle) : null,
  };
}

async function describe(src: AgentsSource, handles: string[]) {
  const org = src.org();
  const view = await src.leases();
  const byHandle = new Map(view.leases.map((l) => [l.handle, l]));
  return handles.map((h) => {
    const seat = org.agentSeat(h)!;
    const lease = byHandle.get(h);
    // This node's engine only knows the turns it ran: a seat a peer holds is that peer's
    // to describe, and zeros from here would read as an idle seat.
    const here = lease?.node === src.nodeId;
    return {
      handle: h,
      name: seat.name,
      agent_id: seat.agent_id,
      manager: seat.manager,
      holder: lease ? { node: lease.node, epoch: lease.epoch, since: new Date(lease.since).toISOString(), expires_in_ms: lease.expires_in_ms } : null,
      turns: here ? src.status(h) : null,
      paused: pausedView(src.controls?.paused(h) ?? null),
      turns_known_on: lease ? lease.node : null,
    };
  });
}

function pausedView(p: { by: string; at: number } | null) {
  return p ? { by: p.by, since: new Date(p.at).toISOString() } : null;
}

export function agentsGroup(src: AgentsSource): RouteGroup {
  return {
    prefix: "/agents",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/", auth.require("state:read"), async (c) => {
        parseNoQuery(c);
        const handles = src.org().agentSeats().map((s) => s.handle);
        return c.json({ agents: await describe(src, handles) });
      });
      app.get("/:handle", auth.require("state:read"), async (c) => {
        const handle = c.req.param("handle");
        parseNoQuery(c);
        if (!src.org().agentSeat(handle)) throw new ApiError(404, "unknown_seat", `no agent seat "${handle}" in this company`, "handle");
        const [agent] = await describe(src, [handle]);
        return c.json({ ...agent!, ...(await profile(src, handle, agent!.holder?.node === src.nodeId, agent!.holder !== null)) });
      });
      const controls = src.controls;
      if (controls) {
        const seatParam = (c: Context, handle: string) => {
          if (!src.org().agentSeat(handle)) throw new ApiError(404, "unknown_seat", `no agent seat "${handle}" in this company`, "handle");
          parseNoQuery(c);
          return handle;
        };
        // Pause: fleet state; the holder puts the seat's inbox on hold (mail waits).
        app.post("/:handle/pause", auth.require("agents:operate"), async (c) => {
          const handle = seatParam(c, c.req.param("handle"));
          await parseNoBody(c);
          const r = await controls.pause(handle, c.get("principal").tokenId);
          return c.json({ handle, paused: pausedView(r.control), changed: r.changed });
        });
        app.post("/:handle/resume", auth.require("agents:operate"), async (c) => {
          const handle = seatParam(c, c.req.param("handle"));
          await parseNoBody(c);
          const r = await controls.resume(handle);
          return c.json({ handle, paused: null, changed: r.changed });
        });
        // Stop: the turn in flight (wherever it runs) ends at its next fence check.
        app.post("/:handle/stop", auth.require("agents:operate"), async (c) => {
          const handle = seatParam(c, c.req.param("handle"));
          await parseNoBody(c);
          const r = await controls.stop(handle, c.get("principal").tokenId);
          return c.json({ handle, stop: { by: r.by, at: new Date(r.at).toISOString(), id: r.id ?? null } }, 202);
        });
      }
      return app;
    },
  };
}
