import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { systemClock } from "../../src/clock.ts";
import { memoryLogger } from "../../src/log.ts";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { McpPool, descendantsOf, isAlive } from "../../src/agent/mcp.ts";
import { openAiProvider } from "../../src/agent/providers/openai.ts";
import { TurnEngine } from "../../src/agent/turn.ts";
import { companySchema } from "../../src/config/company.ts";
import { buildOrg } from "../../src/org/org.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { LocalEstate, mentionTrigger } from "./support.ts";
import { openAiTextReply, openAiToolReply, startModelServer, type ModelServer } from "./model-server.ts";

const SERVER_JS = resolve("node_modules/@modelcontextprotocol/server-memory/dist/index.js");
const dir = mkdtempSync(join(tmpdir(), "crewlet-mcp-"));
const memoryFile = join(dir, "memory.jsonl");
const { log } = memoryLogger("warn");
const company = companySchema.parse({
  name: "Acme Robotics",
  default_llm: "gpt",
  providers: { llm: { gpt: { type: "openai", base_url: "http://127.0.0.1:1", model: "m" } } },
  roles: [
    {
      name: "Archivist",
      handle: "archivist",
      // Run the npm package's server under node (it is a node program), as a company would.
      mcp_servers: { memory: { command: "node", args: [SERVER_JS], env: { MEMORY_FILE_PATH: memoryFile } } },
    },
    { name: "Founder", handle: "founder", kind: "human" },
  ],
});
const org = buildOrg(company);
let server: ModelServer;
const pool = new McpPool({ clock: systemClock, log });
let estate: LocalEstate;
let queue: MemoryQueue;

beforeAll(() => {
  server = startModelServer();
  estate = new LocalEstate(company);
  queue = new MemoryQueue({ clock: systemClock, log });
});
afterAll(async () => {
  await pool.stopAll().catch(() => undefined);
  server.stop();
  estate.close();
  await queue.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("a seat's MCP children (real @modelcontextprotocol/server-memory)", () => {
  test("spawned on acquire, tools called in a turn, the process tree gone after release", async () => {
    const seat = org.agentSeat("archivist")!;
    const tools = await pool.start("archivist", seat.mcp_servers);
    const byName = new Map(tools.map((t) => [t.name, t]));
    expect(byName.has("memory__create_entities")).toBe(true);
    expect(byName.get("memory__create_entities")!.annotations).toMatchObject({ source: "mcp", readOnly: false });
    expect(byName.get("memory__read_graph")!.annotations).toMatchObject({ source: "mcp", readOnly: true });
    const pids = pool.pids("archivist");
    expect(pids.length).toBe(1);
    expect(isAlive(pids[0]!)).toBe(true);

    const events = new MemoryEventSink();
    const engine = new TurnEngine({
      org: () => org,
      node_id: "node-a",
      clock: systemClock,
      log,
      estate,
      queue,
      providerFor: () => openAiProvider({ name: "gpt", base_url: server.url, model: "m", api_keys: [], timeout_ms: 5_000, clock: systemClock }),
      mcpTools: (h) => pool.tools(h),
      ledger: null,
      events,
    });
    server.script([
      openAiToolReply([
        { id: "c1", name: "memory__create_entities", args: { entities: [{ name: "Q3 launch", entityType: "project", observations: ["owned by @cto"] }] } },
      ]),
      openAiToolReply([{ id: "c2", name: "memory__search_nodes", args: { query: "Q3" } }]),
      openAiTextReply("Remembered the Q3 launch."),
    ]);
    const msg = await estate.post("general", "founder", "@archivist remember the Q3 launch");
    const report = await engine.run({ seat: "archivist", epoch: 1, fence: () => true, triggers: [mentionTrigger("archivist", "general", msg, "remember")] });
    expect(report).toMatchObject({ settle: "ack", outcome: "completed", tool_calls: 2, reached_outside: true });
    // The model saw the child's real answer to the search.
    const third = server.requests[2]!.body.messages as { role: string; content: string }[];
    expect(third.filter((m) => m.role === "tool").map((m) => m.content).join("\n")).toContain("Q3 launch");
    expect(readFileSync(memoryFile, "utf8")).toContain("Q3 launch");
    expect(events.named("tool_called").map((e) => [e.tool, e.reached])).toEqual([
      ["memory__create_entities", true],
      // Positively read-only: proves nothing reached outside.
      ["memory__search_nodes", false],
    ]);

    const tree = [pids[0]!, ...descendantsOf(pids[0]!)];
    await pool.stop("archivist");
    for (const pid of tree) expect(isAlive(pid)).toBe(false);
    expect(pool.tools("archivist")).toEqual([]);
  }, 30_000);

  test("a server that cannot start refuses the seat and leaves nothing running", async () => {
    const err = await pool.start("archivist", { broken: { command: "node", args: ["-e", "process.exit(3)"], env: {} } }).catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toContain("MCP server failed to start");
    expect(pool.pids("archivist")).toEqual([]);
  }, 30_000);
});
