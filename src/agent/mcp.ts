// A seat's MCP children (spec: Seat Ownership § the acquire and release hooks; Tools &
// MCP): each role's mcp_servers are spawned over stdio with the official SDK client when
// the seat is acquired, their tools listed and offered to the seat's turns, and stopped
// when the seat is released. The children die with the lease: a child's credentials are
// the seat's identity, so one left running would let this node keep acting as an agent a
// peer now serves. Stop therefore kills the whole process tree and proves it gone.
import { readdirSync, readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import type { McpServerConfig } from "../org/org.ts";
import { TOOL_NAME_RE, type Tool, type ToolResult } from "./tools/contract.ts";

/** How long a child has to start and answer initialize + tools/list. A server that is
 * slower than this at boot refuses the seat, which a peer may then prepare instead. */
export const MCP_START_TIMEOUT_MS = 30_000;
/** One tool call's budget: long enough for a real remote call, bounded so a wedged child
 * cannot hold a turn (and its seat) indefinitely. */
export const MCP_CALL_TIMEOUT_MS = 120_000;
/** How long stop() waits for a killed tree to vanish before calling the teardown failed
 * (the seat then goes undead and the teardown is retried on the next heartbeat). */
export const MCP_REAP_WAIT_MS = 5_000;
const REAP_POLL_MS = 25;
/** Tools one child may contribute: a model's tool list is context it pays for on every round. */
export const MCP_MAX_TOOLS_PER_SERVER = 128;
/** Descendants walked when collecting a tree: far above any real server's helpers. */
const MAX_TREE = 256;
const STDERR_LINE_CHARS = 500;

interface Child {
  server: string;
  client: Client;
  transport: StdioClientTransport;
  pid: number | null;
}

/** Every live descendant of `pid` (not including it), from /proc. Linux only. */
export function descendantsOf(pid: number): number[] {
  const children = new Map<number, number[]>();
  let entries: string[] = [];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, "utf8");
      // Field 4 is the ppid; the command (field 2) may hold spaces, so split after ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(e));
      children.set(ppid, list);
    } catch {
      // The process exited while we looked.
    }
  }
  const out: number[] = [];
  const queue = [pid];
  while (queue.length > 0 && out.length < MAX_TREE) {
    for (const c of children.get(queue.shift()!) ?? []) {
      out.push(c);
      queue.push(c);
    }
  }
  return out;
}

/** A process is alive while /proc has it and it is not a zombie awaiting its reaper. */
export function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

function toolName(server: string, tool: string): string {
  const raw = `${server}__${tool}`.replace(/[^a-zA-Z0-9_-]/g, "_");
  return raw.slice(0, 64);
}

export interface SeatMcpOptions {
  handle: string;
  servers: Readonly<Record<string, McpServerConfig>>;
  clock: Clock;
  log: Logger;
  start_timeout_ms?: number;
  call_timeout_ms?: number;
}

/** One seat's children and the tools they offer. */
export class SeatMcp {
  private constructor(
    private readonly opts: SeatMcpOptions,
    private readonly children: Child[],
    readonly tools: readonly Tool[],
  ) {}

  /** Spawns every server, lists its tools. Any failure stops what started and throws. */
  static async start(opts: SeatMcpOptions): Promise<SeatMcp> {
    const children: Child[] = [];
    const tools: Tool[] = [];
    const seat = new SeatMcp(opts, children, tools);
    try {
      for (const [server, cfg] of Object.entries(opts.servers)) {
        const transport = new StdioClientTransport({
          command: cfg.command,
          args: [...cfg.args],
          env: { ...getDefaultEnvironment(), ...cfg.env },
          stderr: "pipe",
        });
        transport.stderr?.on("data", (chunk: Buffer) => {
          for (const line of chunk.toString("utf8").split("\n")) {
            if (line.trim()) opts.log.debug("mcp_stderr", { seat: opts.handle, server, line: line.slice(0, STDERR_LINE_CHARS) });
          }
        });
        const client = new Client({ name: `crewlet-${opts.handle}`, version: "1" }, { capabilities: {} });
        const child: Child = { server, client, transport, pid: null };
        children.push(child);
        const timeout_ms = opts.start_timeout_ms ?? MCP_START_TIMEOUT_MS;
        await client.connect(transport, { timeout: timeout_ms });
        child.pid = transport.pid;
        const listed = await client.listTools(undefined, { timeout: timeout_ms });
        for (const t of listed.tools.slice(0, MCP_MAX_TOOLS_PER_SERVER)) {
          const name = toolName(server, t.name);
          if (!TOOL_NAME_RE.test(name) || tools.some((x) => x.name === name)) continue;
          tools.push(seat.wrap(child, t.name, name, t));
        }
        opts.log.info("mcp_server_started", { seat: opts.handle, server, pid: child.pid, tools: listed.tools.length });
      }
    } catch (err) {
      await seat.stop().catch(() => undefined);
      throw new Error(`seat ${opts.handle}: MCP server failed to start: ${(err as Error).message}`);
    }
    return seat;
  }

  /** Pids of the children this seat spawned (for tests and the health view). */
  pids(): number[] {
    return this.children.map((c) => c.pid).filter((p): p is number => p !== null);
  }

  private wrap(child: Child, remote: string, name: string, t: { description?: string; inputSchema: unknown; annotations?: { readOnlyHint?: boolean; openWorldHint?: boolean } }): Tool {
    return {
      name,
      description: `[${child.server}] ${t.description ?? remote}`,
      input_schema: (t.inputSchema as Record<string, unknown>) ?? { type: "object" },
      annotations: {
        // Only a positive annotation counts: a tool nobody classified is a possible write.
        readOnly: t.annotations?.readOnlyHint === true,
        openWorld: t.annotations?.openWorldHint === true,
        estateWrite: false,
        source: "mcp",
      },
      call: async (args, ctx): Promise<ToolResult> => {
        try {
          const res = await child.client.callTool({ name: remote, arguments: args }, undefined, {
            signal: ctx.signal,
            timeout: this.opts.call_timeout_ms ?? MCP_CALL_TIMEOUT_MS,
          });
          const content = Array.isArray(res.content)
            ? res.content.map((c: { type: string; text?: string }) => (c.type === "text" ? (c.text ?? "") : `[${c.type}]`)).join("\n")
            : JSON.stringify(res.structuredContent ?? res);
          return { content, is_error: res.isError === true };
        } catch (err) {
          // The request left for the child: it may have acted. The annotations decide.
          return { content: `MCP call failed: ${(err as Error).message}`, is_error: true };
        }
      },
    };
  }

  /**
   * Stops every child and proves each process tree gone. Throws if any process survives
   * MCP_REAP_WAIT_MS after SIGKILL (the seat's release then stays undead and retries).
   */
  async stop(): Promise<void> {
    const tree = new Set<number>();
    for (const c of this.children) {
      if (c.pid === null) c.pid = c.transport.pid;
      if (c.pid !== null) {
        tree.add(c.pid);
        for (const d of descendantsOf(c.pid)) tree.add(d);
      }
    }
    // Kill first, then close: a graceful close costs the SDK up to 4 s per child waiting
    // on stdin EOF and SIGTERM, and the lease is what is waiting.
    for (const pid of tree) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    }
    await Promise.all(this.children.map((c) => c.client.close().catch(() => undefined)));
    const deadline = this.opts.clock.now() + (MCP_REAP_WAIT_MS);
    for (;;) {
      const alive = [...tree].filter(isAlive);
      if (alive.length === 0) break;
      if (this.opts.clock.now() >= deadline) throw new Error(`seat ${this.opts.handle}: MCP processes still alive after SIGKILL: ${alive.join(", ")}`);
      await this.opts.clock.sleep(REAP_POLL_MS);
    }
    this.children.length = 0;
    if (tree.size > 0) this.opts.log.info("mcp_servers_stopped", { seat: this.opts.handle, pids: [...tree] });
  }
}

/** The node's seats' MCP children, by handle. */
export class McpPool {
  private readonly seats = new Map<string, SeatMcp>();

  constructor(private readonly opts: { clock: Clock; log: Logger; start_timeout_ms?: number; call_timeout_ms?: number }) {}

  /** Spawns the seat's servers (stopping any left from an earlier tenure first). */
  async start(handle: string, servers: Readonly<Record<string, McpServerConfig>>): Promise<readonly Tool[]> {
    await this.stop(handle);
    if (Object.keys(servers).length === 0) return [];
    const seat = await SeatMcp.start({ handle, servers, ...this.opts });
    this.seats.set(handle, seat);
    return seat.tools;
  }

  tools(handle: string): readonly Tool[] {
    return this.seats.get(handle)?.tools ?? [];
  }

  pids(handle: string): number[] {
    return this.seats.get(handle)?.pids() ?? [];
  }

  /** Stops the seat's children; throws if any survives (the caller's release goes undead). */
  async stop(handle: string): Promise<void> {
    const seat = this.seats.get(handle);
    if (!seat) return;
    await seat.stop();
    this.seats.delete(handle);
  }

  async stopAll(): Promise<void> {
    const errors: string[] = [];
    for (const h of [...this.seats.keys()]) {
      try {
        await this.stop(h);
      } catch (err) {
        errors.push((err as Error).message);
      }
    }
    if (errors.length > 0) throw new Error(errors.join("; "));
  }
}
