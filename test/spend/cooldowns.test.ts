// Shared key cooldowns: two nodes (each its own connection and coordination handle on a
// real nats-server), one model endpoint. The first key answers 429 once on node A → the
// cooldown lands in crewlet_cooldowns → node B's next call does not use it: another key,
// or, every key cooling, the fallback provider with no request made, or (no fallback) a
// wait for the key's end inside the retry budget. A cooldown's end is told once for the
// fleet (provider_key_ready), by whichever node still up removes the ended record.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { ProviderError } from "../../src/agent/providers/contract.ts";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { buildProviders } from "../../src/agent/providers/index.ts";
import { systemClock } from "../../src/clock.ts";
import type { ProviderConfig } from "../../src/config/company.ts";
import { createCoordination, type CoordinationHandle } from "../../src/coord/index.ts";
import { memoryLogger } from "../../src/log.ts";
import { keyId, SharedCooldowns } from "../../src/spend/cooldowns.ts";
import { openAiTextReply, startModelServer, type ModelServer } from "../agent/model-server.ts";
import { waitFor } from "../support/fleet.ts";
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

interface CoolingNode {
  coord: CoordinationHandle;
  cooldowns: SharedCooldowns;
  events: MemoryEventSink;
  nc: Awaited<ReturnType<TestNats["connect"]>>;
}

/** Nodes `ids`, each its own connection, coordination handle and cooldown mirror. */
async function coolingNodes(...ids: string[]): Promise<{ nodes: CoolingNode[]; close: () => Promise<void> }> {
  const { log } = memoryLogger("warn");
  const nodes: CoolingNode[] = [];
  for (const id of ids) {
    const nc = await nats.connect({ name: id });
    const coord = await createCoordination({ type: "embedded-kv", nc, replicas: 1, clock: systemClock, log });
    const events = new MemoryEventSink();
    const cooldowns = new SharedCooldowns({ slot: coord.slot("cooldowns"), clock: systemClock, log, events, node_id: id });
    await cooldowns.start();
    nodes.push({ coord, cooldowns, events, nc });
  }
  return {
    nodes,
    close: async () => {
      for (const n of nodes) {
        n.cooldowns.stop();
        await n.coord.close();
        await n.nc.close();
      }
    },
  };
}

/** Generous: a mirror hears a write, or a timer fires, within milliseconds on an idle box. */
const SEEN_MS = 5_000;
const until = (what: string, ok: () => boolean) => waitFor(what, async () => ok() || null, SEEN_MS);

const REQ = { system: "s", messages: [{ role: "user" as const, content: "hi" }], tools: [], facts: { seat: "cto", trigger_type: "chat_mention", vars: {} } };
const openai = (keys: string[], extra: Record<string, unknown> = {}) =>
  ({ type: "openai", base_url: server.url, model: "m", api_keys: keys, timeout_seconds: 10, retry_budget_seconds: 5, stream: false, ...extra }) as ProviderConfig;
const auth = () => server.requests.map((r) => r.headers.authorization?.replace("Bearer ", ""));

const KEYS = ["sk-key-one-0000000001", "sk-key-two-0000000002"];

test("a 429 on node A's key → node B's next call uses the other key; events name the key by its id only", async () => {
  const { nodes, close } = await coolingNodes("a", "b");
  try {
    const cfg = { type: "openai", base_url: server.url, model: "m", api_keys: KEYS, timeout_seconds: 10, retry_budget_seconds: 5, stream: false } as ProviderConfig;
    const [A, B] = nodes.map((n) => buildProviders({ model: cfg }, systemClock, { cooldowns: n.cooldowns, random: () => 0 }).get("model")!);
    // A: key one answers 429 asking for 30 s, more than A's retry budget: A gives up.
    server.script([{ status: 429, headers: { "retry-after": "30" }, json: { error: { message: "slow down", type: "rate_limit" } } }]);
    await expect(A!.complete(REQ)).rejects.toThrow("429");
    expect(server.requests.map((r) => r.headers.authorization)).toEqual([`Bearer ${KEYS[0]}`]);
    // B: its own rotation would start on key one; it must not use it.
    await until("B mirrors the cooldown", () => nodes[1]!.cooldowns.cooling("model", KEYS[0]!));
    server.script([openAiTextReply("b"), openAiTextReply("b"), openAiTextReply("b")]);
    for (let i = 0; i < 3; i++) await B!.complete(REQ);
    const bKeys = server.requests.map((r) => r.headers.authorization?.replace("Bearer ", ""));
    expect(bKeys).toEqual([KEYS[1], KEYS[1], KEYS[1]]);
    const cooling = nodes[0]!.events.named("provider_key_cooling");
    expect(cooling).toHaveLength(1);
    expect(cooling[0]).toMatchObject({ provider: "model", key_id: keyId(KEYS[0]!) });
    expect(JSON.stringify(cooling)).not.toContain(KEYS[0]);
  } finally {
    await close();
  }
});

test("a 529 overloaded answer (no Retry-After) rests the key too: the other node's next calls use the other key", async () => {
  const { nodes, close } = await coolingNodes("c", "d");
  const keys = ["sk-key-three-000000003", "sk-key-four-0000000004"];
  try {
    // retry budget 0: C makes one attempt and gives up, as a turn whose budget is spent would.
    const cfg = { type: "openai", base_url: server.url, model: "m", api_keys: keys, timeout_seconds: 10, retry_budget_seconds: 0, stream: false } as ProviderConfig;
    const [C, D] = nodes.map((n) => buildProviders({ model: cfg }, systemClock, { cooldowns: n.cooldowns, random: () => 0 }).get("model")!);
    server.script([{ status: 529, json: { type: "error", error: { type: "overloaded_error", message: "Overloaded" } } }]);
    await expect(C!.complete(REQ)).rejects.toThrow("529");
    expect(server.requests.map((r) => r.headers.authorization)).toEqual([`Bearer ${keys[0]}`]);
    await until("D mirrors the cooldown", () => nodes[1]!.cooldowns.cooling("model", keys[0]!));
    server.script([openAiTextReply("d"), openAiTextReply("d")]);
    for (let i = 0; i < 2; i++) await D!.complete(REQ);
    expect(server.requests.map((r) => r.headers.authorization?.replace("Bearer ", ""))).toEqual([keys[1], keys[1]]);
    const cooling = nodes[0]!.events.named("provider_key_cooling");
    expect(cooling).toHaveLength(1);
    expect(String(cooling[0]!.reason)).toContain("529 overloaded");
  } finally {
    await close();
  }
});

test("one key, cooling, and a fallback: node B makes no request with the cooled key, its call goes to the fallback at once", async () => {
  const { nodes, close } = await coolingNodes("e", "f");
  const solo = "sk-solo-key-000000000005";
  const backup = "sk-backup-key-0000000006";
  try {
    const llm = { solo: openai([solo], { fallback: "spare" }), spare: openai([backup]) };
    const [A, B] = nodes.map((n) => buildProviders(llm, systemClock, { cooldowns: n.cooldowns, random: () => 0 }).get("solo")!);
    // A: its one key answers 429 asking for 30 s; A's next attempt would use it again, so
    // the fallback answers instead, and the cooled key gets no second request.
    server.script([{ status: 429, headers: { "retry-after": "30" }, json: { error: { message: "slow down", type: "rate_limit" } } }, openAiTextReply("spare-a")]);
    expect((await A!.complete(REQ)).text).toBe("spare-a");
    expect(auth()).toEqual([solo, backup]);
    await until("B mirrors the cooldown", () => nodes[1]!.cooldowns.cooling("solo", solo));
    server.script([openAiTextReply("spare-b")]);
    expect((await B!.complete(REQ)).text).toBe("spare-b");
    expect(auth()).toEqual([backup]);
  } finally {
    await close();
  }
});

test("one key cooling, no fallback: past the retry budget no request is made and the turn hears a transient 'cooling' failure", async () => {
  const { nodes, close } = await coolingNodes("g", "h");
  const key = "sk-lone-key-000000000007";
  try {
    const llm = { lone: openai([key]) };
    const [A, B] = nodes.map((n) => buildProviders(llm, systemClock, { cooldowns: n.cooldowns, random: () => 0 }).get("lone")!);
    server.script([{ status: 429, headers: { "retry-after": "30" }, json: { error: { message: "slow down", type: "rate_limit" } } }]);
    await expect(A!.complete(REQ)).rejects.toThrow("429");
    expect(auth()).toEqual([key]);
    await until("B mirrors the cooldown", () => nodes[1]!.cooldowns.cooling("lone", key));
    server.script([openAiTextReply("must not be asked")]);
    const err = await B!.complete(REQ).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ProviderError);
    expect((err as ProviderError).kind).toBe("cooling");
    expect((err as ProviderError).failure).toBe("transient");
    expect(server.requests).toHaveLength(0);
  } finally {
    await close();
  }
});

test("one key cooling, no fallback, its end inside the budget: the call waits it out, then makes one request", async () => {
  const { nodes, close } = await coolingNodes("i", "j");
  const key = "sk-wait-key-000000000008";
  try {
    const llm = { wait: openai([key]) };
    const B = buildProviders(llm, systemClock, { cooldowns: nodes[1]!.cooldowns, random: () => 0 }).get("wait")!;
    nodes[0]!.cooldowns.cool("wait", key, 1_500, "429 rate limited, Retry-After 1.5");
    await until("B mirrors the cooldown", () => nodes[1]!.cooldowns.cooling("wait", key));
    const ready_at = nodes[1]!.cooldowns.untilOf("wait", key);
    server.script([openAiTextReply("after the rest")]);
    expect((await B.complete(REQ)).text).toBe("after the rest");
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]!.at).toBeGreaterThanOrEqual(ready_at);
  } finally {
    await close();
  }
});

test("a cooldown's end is told once for the fleet: by a node still up when the one that cooled the key has stopped, and once when both are up", async () => {
  const { nodes, close } = await coolingNodes("k", "l");
  const gone = "sk-gone-key-000000000009";
  const both = "sk-both-key-000000000010";
  try {
    const [A, B] = nodes as [CoolingNode, CoolingNode];
    // A cools the key and stops (its process gone) before the end: B tells it.
    A.cooldowns.cool("ends", gone, 800, "429 rate limited");
    await until("B mirrors the cooldown", () => B.cooldowns.cooling("ends", gone));
    A.cooldowns.stop();
    // Only this case's provider: the file's cases share one bucket, and an earlier case's
    // record whose end it had not yet told when its nodes closed is told by these (seen in CI).
    const ready = (n: CoolingNode) => n.events.named("provider_key_ready").filter((e) => e.provider === "ends");
    await until("B tells the end", () => ready(B).length > 0);
    expect(ready(B)).toEqual([{ node: "l", provider: "ends", key_id: keyId(gone) }]);
    expect(ready(A)).toEqual([]);
    expect(B.cooldowns.cooling("ends", gone)).toBe(false);
    expect(await B.coord.slot("cooldowns").get(`ends.${keyId(gone)}`)).toBeNull();

    // Both up: the end is told once, by one of them, and the record leaves the bucket.
    await A.cooldowns.start();
    B.cooldowns.cool("ends", both, 800, "429 rate limited");
    await until("A mirrors the cooldown", () => A.cooldowns.cooling("ends", both));
    const told = () => [...A.events.named("provider_key_ready"), ...B.events.named("provider_key_ready")].filter((e) => e.key_id === keyId(both));
    await until("the end told", () => told().length > 0);
    await Bun.sleep(500); // room for a second, wrong, telling
    expect(told()).toHaveLength(1);
    expect(A.cooldowns.cooling("ends", both) || B.cooldowns.cooling("ends", both)).toBe(false);
    expect(await A.coord.slot("cooldowns").get(`ends.${keyId(both)}`)).toBeNull();
  } finally {
    await close();
  }
});
