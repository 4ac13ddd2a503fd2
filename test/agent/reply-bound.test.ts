// A reply the engine posts on its own account is bounded by the chat record's byte limit
// like any write: an over-long final answer is cut with a marker and posted, never refused
// (issue 12, item 1). LocalEstate passes every write through the router's record gate.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { systemClock } from "../../src/clock.ts";
import { MemoryCoordination, StoreFaults } from "../../src/coord/index.ts";
import { memoryLogger } from "../../src/log.ts";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { CompletionLedger } from "../../src/agent/ledger.ts";
import { openAiProvider } from "../../src/agent/providers/openai.ts";
import { TurnEngine } from "../../src/agent/turn.ts";
import { MAX_MESSAGE_BYTES, TRUNCATION_MARKER } from "../../src/estate/records.ts";
import { buildOrg } from "../../src/org/org.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { LocalEstate, mentionTrigger, rootCompany } from "./support.ts";
import { openAiTextReply, startModelServer, type ModelServer } from "./model-server.ts";

const company = rootCompany();
const org = buildOrg(company);
const { log } = memoryLogger("warn");
let server: ModelServer;

beforeAll(() => {
  server = startModelServer();
});
afterAll(() => server.stop());

test("a 20,000-character final answer (40,000 bytes) is posted cut to the 32 KiB chat limit, with a marker", async () => {
  const estate = new LocalEstate(company);
  const queue = new MemoryQueue({ clock: systemClock, log });
  try {
    const coord = new MemoryCoordination({ clock: systemClock, log });
    const ledger = new CompletionLedger(coord.node({ faults: new StoreFaults(systemClock) }).slot("ledger"), systemClock, log);
    const provider = openAiProvider({ name: "gpt", base_url: server.url, model: "m", api_keys: [], timeout_ms: 5_000, clock: systemClock });
    const engine = new TurnEngine({
      org: () => org,
      node_id: "node-a",
      clock: systemClock,
      log,
      estate,
      queue,
      providerFor: () => provider,
      mcpTools: () => [],
      ledger,
      events: new MemoryEventSink(),
    });
    const msg = await estate.post("general", "founder", "@cto write it all out");
    const long = "é".repeat(20_000);
    server.script([openAiTextReply(long)]);
    const report = await engine.run({ seat: "cto", epoch: 1, fence: () => true, triggers: [mentionTrigger("cto", "general", msg, "@cto write it all out")] });
    expect(report.settle).toBe("ack");
    const thread = await estate.thread("general", msg);
    expect(thread.map((m) => m.author)).toEqual(["founder", "cto"]);
    const reply = thread[1]!.body;
    expect(Buffer.byteLength(reply, "utf8")).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
    expect(reply.endsWith(TRUNCATION_MARKER)).toBe(true);
    expect(reply.startsWith("é".repeat(1000))).toBe(true);
  } finally {
    estate.close();
    await queue.close();
  }
});
