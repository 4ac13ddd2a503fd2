// A person's stop (POST /agents/{handle}/stop reaches TurnEngine.stopSeat on the node
// running the turn), on real parts (failure-rig.ts): the turn ends at its next fence check,
// within one model round — the round in flight finishes, the next call is not made — and it
// is recorded and acked (no retry, no dead letter), the thread told "stopped by <person>".
import { afterAll, beforeAll, expect, test } from "bun:test";
import { NOTICE_PREFIX } from "../../src/agent/notice.ts";
import type { Tool } from "../../src/agent/tools/contract.ts";
import { FailureRig } from "../agent/failure-rig.ts";
import { openAiTextReply, openAiToolReply, startModelServer, type ModelServer } from "../agent/model-server.ts";
import { startNats, type TestNats } from "../support/nats.ts";

let server: ModelServer;
let nats: TestNats;
beforeAll(async () => {
  server = startModelServer();
  nats = await startNats(1);
});
afterAll(async () => {
  server.stop();
  await nats.stop();
});

test("a stop during a tool call: no further model call, outcome stopped, acked and recorded, the person told who stopped it", async () => {
  let entered!: () => void;
  const inTool = new Promise<void>((r) => (entered = r));
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const slow: Tool = {
    name: "slow_lookup",
    description: "a read that takes a while",
    input_schema: { type: "object", properties: {} },
    annotations: { readOnly: true, openWorld: false, estateWrite: false, source: "mcp" },
    async call() {
      entered();
      await gate;
      return { content: "looked up", is_error: false, reached: false };
    },
  };
  const r = await FailureRig.start({ wire: "openai", base_url: server.url, extraTools: [slow] }, nats);
  try {
    await r.attach("cto");
    // Three rounds scripted; a stop during round 1's tool call must leave rounds 2 and 3 unmade.
    server.script([
      openAiToolReply([{ id: "c1", name: "slow_lookup", args: {} }, { id: "c2", name: "slow_lookup", args: {} }]),
      openAiToolReply([{ id: "c3", name: "slow_lookup", args: {} }]),
      openAiTextReply("done"),
    ]);
    const { message_id, trigger } = await r.ask("cto", "dig into the logs");
    await inTool;
    expect(r.engine.stopSeat("cto", "alice")).toHaveLength(1);
    release();
    const end = await r.ending("cto", message_id, trigger.event_id);
    expect(server.requests.length).toBe(1);
    expect(end.where).toBe("answered"); // acked, not a dead letter
    expect(end.dead_letter).toBeNull();
    expect(r.turnsOn(trigger.event_id).map((t) => [t.outcome, t.settle, t.rounds])).toEqual([["stopped", "ack", 1]]);
    // The second tool call of round 1 was not run: the fence check before it saw the stop.
    expect(r.events.named("tool_called")).toHaveLength(1);
    const notice = end.thread.find(([a, b]) => a === "cto" && b.startsWith(NOTICE_PREFIX));
    expect(notice?.[1]).toBe(`${NOTICE_PREFIX}I could not answer this: stopped by alice.`);
    // Recorded: a redelivery of the same message runs nothing.
    expect((await r.ledger.check([trigger])).skip).toHaveLength(1);
    // A stop with no turn running marks nothing (the next message runs normally).
    expect(r.engine.stopSeat("cto", "alice")).toEqual([]);
  } finally {
    release();
    await r.stop(true);
  }
});
