// Shared key cooldowns: two nodes (each its own connection and coordination handle on a
// real nats-server), one model endpoint with two keys. The first key answers 429 once on
// node A → the cooldown lands in crewlet_cooldowns → node B's next call does not use it.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { buildProviders } from "../../src/agent/providers/index.ts";
import { systemClock } from "../../src/clock.ts";
import type { ProviderConfig } from "../../src/config/company.ts";
import { createCoordination, type CoordinationHandle } from "../../src/coord/index.ts";
import { memoryLogger } from "../../src/log.ts";
import { keyId, SharedCooldowns } from "../../src/spend/cooldowns.ts";
import { openAiTextReply, startModelServer, type ModelServer } from "../agent/model-server.ts";
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

const KEYS = ["sk-key-one-0000000001", "sk-key-two-0000000002"];

test("a 429 on node A's key → node B's next call uses the other key; events name the key by its id only", async () => {
  const { log } = memoryLogger("warn");
  const nodes: { coord: CoordinationHandle; cooldowns: SharedCooldowns; events: MemoryEventSink; nc: Awaited<ReturnType<TestNats["connect"]>> }[] = [];
  for (const id of ["a", "b"]) {
    const nc = await nats.connect({ name: id });
    const coord = await createCoordination({ type: "embedded-kv", nc, replicas: 1, clock: systemClock, log });
    const events = new MemoryEventSink();
    const cooldowns = new SharedCooldowns({ slot: coord.slot("cooldowns"), clock: systemClock, log, events, node_id: id });
    await cooldowns.start();
    nodes.push({ coord, cooldowns, events, nc });
  }
  try {
    const cfg = { type: "openai", base_url: server.url, model: "m", api_keys: KEYS, timeout_seconds: 10, retry_budget_seconds: 5, stream: false } as ProviderConfig;
    const [A, B] = nodes.map((n) => buildProviders({ model: cfg }, systemClock, { cooldowns: n.cooldowns, random: () => 0 }).get("model")!);
    const req = { system: "s", messages: [{ role: "user" as const, content: "hi" }], tools: [], facts: { seat: "cto", trigger_type: "chat_mention", vars: {} } };
    // A: key one answers 429 asking for 30 s, more than A's retry budget: A gives up.
    server.script([{ status: 429, headers: { "retry-after": "30" }, json: { error: { message: "slow down", type: "rate_limit" } } }]);
    await expect(A!.complete(req)).rejects.toThrow("429");
    expect(server.requests.map((r) => r.headers.authorization)).toEqual([`Bearer ${KEYS[0]}`]);
    // B: its own rotation would start on key one; it must not use it.
    const seen = Date.now() + 5_000;
    while (!nodes[1]!.cooldowns.cooling("model", KEYS[0]!) && Date.now() < seen) await Bun.sleep(10);
    server.script([openAiTextReply("b"), openAiTextReply("b"), openAiTextReply("b")]);
    for (let i = 0; i < 3; i++) await B!.complete(req);
    const bKeys = server.requests.map((r) => r.headers.authorization?.replace("Bearer ", ""));
    expect(bKeys).toEqual([KEYS[1], KEYS[1], KEYS[1]]);
    const cooling = nodes[0]!.events.named("provider_key_cooling");
    expect(cooling).toHaveLength(1);
    expect(cooling[0]).toMatchObject({ provider: "model", key_id: keyId(KEYS[0]!) });
    expect(JSON.stringify(cooling)).not.toContain(KEYS[0]);
  } finally {
    for (const n of nodes) {
      n.cooldowns.stop();
      await n.coord.close();
      await n.nc.close();
    }
  }
});

test("a 529 overloaded answer (no Retry-After) rests the key too: the other node's next calls use the other key", async () => {
  const { log } = memoryLogger("warn");
  const nodes: { coord: CoordinationHandle; cooldowns: SharedCooldowns; events: MemoryEventSink; nc: Awaited<ReturnType<TestNats["connect"]>> }[] = [];
  for (const id of ["c", "d"]) {
    const nc = await nats.connect({ name: id });
    const coord = await createCoordination({ type: "embedded-kv", nc, replicas: 1, clock: systemClock, log });
    const events = new MemoryEventSink();
    const cooldowns = new SharedCooldowns({ slot: coord.slot("cooldowns"), clock: systemClock, log, events, node_id: id });
    await cooldowns.start();
    nodes.push({ coord, cooldowns, events, nc });
  }
  const keys = ["sk-key-three-000000003", "sk-key-four-0000000004"];
  try {
    // retry budget 0: C makes one attempt and gives up, as a turn whose budget is spent would.
    const cfg = { type: "openai", base_url: server.url, model: "m", api_keys: keys, timeout_seconds: 10, retry_budget_seconds: 0, stream: false } as ProviderConfig;
    const [C, D] = nodes.map((n) => buildProviders({ model: cfg }, systemClock, { cooldowns: n.cooldowns, random: () => 0 }).get("model")!);
    const req = { system: "s", messages: [{ role: "user" as const, content: "hi" }], tools: [], facts: { seat: "cto", trigger_type: "chat_mention", vars: {} } };
    server.script([{ status: 529, json: { type: "error", error: { type: "overloaded_error", message: "Overloaded" } } }]);
    await expect(C!.complete(req)).rejects.toThrow("529");
    expect(server.requests.map((r) => r.headers.authorization)).toEqual([`Bearer ${keys[0]}`]);
    const seen = Date.now() + 5_000;
    while (!nodes[1]!.cooldowns.cooling("model", keys[0]!) && Date.now() < seen) await Bun.sleep(10);
    server.script([openAiTextReply("d"), openAiTextReply("d")]);
    for (let i = 0; i < 2; i++) await D!.complete(req);
    expect(server.requests.map((r) => r.headers.authorization?.replace("Bearer ", ""))).toEqual([keys[1], keys[1]]);
    const cooling = nodes[0]!.events.named("provider_key_cooling");
    expect(cooling).toHaveLength(1);
    expect(String(cooling[0]!.reason)).toContain("529 overloaded");
  } finally {
    for (const n of nodes) {
      n.cooldowns.stop();
      await n.coord.close();
      await n.nc.close();
    }
  }
});
