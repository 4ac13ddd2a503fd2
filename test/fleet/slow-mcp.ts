// A stdio MCP server with one tool, `wait`, that answers after the milliseconds it is
// given: a seat that calls it is mid-turn for that long, so a fleet test can kill its
// holder while a turn is certainly in flight (the scripted provider itself answers at once).
//   bun test/fleet/slow-mcp.ts
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

/** Bound on one wait: past MCP_CALL_TIMEOUT_MS (120 s) the caller gives up anyway. */
const WAIT_MAX_MS = 60_000;

const server = new McpServer({ name: "slow", version: "1.0.0" });
server.registerTool(
  "wait",
  { description: "Answers after `ms` milliseconds.", inputSchema: { ms: z.number().int().min(0).max(WAIT_MAX_MS) } },
  async ({ ms }) => {
    await Bun.sleep(ms);
    return { content: [{ type: "text", text: `waited ${ms} ms` }] };
  },
);
await server.connect(new StdioServerTransport());
