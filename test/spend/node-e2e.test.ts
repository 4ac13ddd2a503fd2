// Budgets end to end on a real `crewlet run` process (real nats-server, node.db, estate) with
// a priced OpenAI-wire endpoint the test serves: each round's reported usage is charged in
// tokens and money — a turn's rounds and the memory reflection after it alike, so the
// counters equal the usage of every call the endpoint answered; GET /budgets reads both for
// the org and the seat; `crewlet budgets` prints the same against the live node; and the
// seat's soft alert reaches its manager as a DM from the seat, once.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { resolve } from "node:path";
import { dmChannelId } from "../../src/estate/mentions.ts";
import { openAiTextReply, startModelServer, type ModelServer } from "../agent/model-server.ts";
import { makeFleet, TEST_TOKEN, waitFor as waitUntil, type Fleet, type FleetNode } from "../support/fleet.ts";

const WAIT_MS = 60_000;
/** The endpoint's usage per round (openAiTextReply): 11 prompt + 7 completion tokens. */
const ROUND = { input: 11, output: 7 };
const PRICE = { input_per_million: 3, output_per_million: 15 };
const ROUNDS = 3;
const SEAT_CAP = 200;
const PER_CALL = ROUND.input + ROUND.output;

let server: ModelServer;
let fleet: Fleet;
let node: FleetNode;
beforeAll(async () => {
  server = startModelServer();
  server.script([openAiTextReply("done")]);
  fleet = await makeFleet({
    nodes: [{ id: "a", kind: "member" }],
    company: {
      name: "Spend Co",
      default_llm: "paid",
      providers: { llm: { paid: { type: "openai", base_url: server.url, model: "m", api_keys: ["sk-spend-0123456789abcdef"], stream: false, pricing: PRICE } } },
      // The seat's soft alert (0.25 of 200 tokens) is crossed by the third call (54 tokens).
      budgets: { soft_alert: 0.25, org: { day: { tokens: 100_000, money: 1 } }, seats: { default: { day: { tokens: SEAT_CAP } } } },
      roles: [
        { name: "Boss", handle: "boss", kind: "human", manages: ["dev"] },
        { name: "Dev", handle: "dev" },
      ],
    },
  });
  node = fleet.node("a");
  await node.start();
  await node.waitReady(120_000);
}, 180_000);
afterAll(async () => {
  await fleet?.stop();
  server?.stop();
});

const waitFor = <T>(what: string, probe: () => Promise<T | null | undefined>) =>
  waitUntil(what, probe, WAIT_MS, () => node.log().split("\n").filter((l) => /budget|turn_|error/.test(l)).slice(-30).join("\n"));

async function messages(channel: string): Promise<{ author: string; body: string }[]> {
  const res = await node.get(`/chat/channels/${channel}/messages?limit=500`);
  if (res.status === 404) return [];
  return ((await res.json()) as { messages: { author: string; body: string }[] }).messages;
}

type Row = { scope: string; window: string; cap: { tokens?: number; money?: number }; spent: { tokens: number; input_tokens: number; output_tokens: number; money: number; charges: number }; exhausted: boolean; reset_at: string };

test("charged rounds read in tokens and money in GET /budgets and `crewlet budgets`; the soft alert reaches the manager once", async () => {
  for (let i = 1; i <= ROUNDS; i++) {
    const posted = await node.post("/chat/channels/general/messages", { body: `@dev task ${i}`, author: "boss" });
    expect(posted.status).toBeLessThan(300);
    await waitFor(`dev's answer ${i}`, async () => ((await messages("general")).filter((m) => m.author === "dev").length >= i ? true : null));
  }
  // Every call the endpoint answered (each turn's round, each reflection) is charged once.
  const budgets = async () => ((await (await node.get("/budgets")).json()) as { budgets: Row[] }).budgets;
  const rows = await waitFor("every call charged", async () => {
    const r = await budgets();
    const calls = server.requests.length;
    return calls >= 2 * ROUNDS && r.find((x) => x.scope === "seat:dev")?.spent.charges === calls ? r : null;
  });
  const calls = server.requests.length;
  const want = {
    tokens: calls * PER_CALL,
    money: (calls * (ROUND.input * PRICE.input_per_million + ROUND.output * PRICE.output_per_million)) / 1_000_000,
  };
  const seat = rows.find((r) => r.scope === "seat:dev")!;
  const org = rows.find((r) => r.scope === "org")!;
  expect(seat).toMatchObject({ window: "day", cap: { tokens: SEAT_CAP }, exhausted: false, spent: { tokens: want.tokens, input_tokens: calls * ROUND.input, output_tokens: calls * ROUND.output, charges: calls } });
  expect(seat.spent.money).toBeCloseTo(want.money, 9);
  expect(org).toMatchObject({ window: "day", cap: { tokens: 100_000, money: 1 }, spent: { tokens: want.tokens, charges: calls } });
  expect(org.spent.money).toBeCloseTo(want.money, 9);
  expect(Date.parse(seat.reset_at)).toBeGreaterThan(Date.now());

  // The CLI against the live node: the same figures, as a table and as JSON.
  const cli = (...args: string[]) => Bun.spawnSync([process.execPath, resolve(import.meta.dir, "../../src/main.ts"), "budgets", "--url", node.apiUrl, "--token", TEST_TOKEN, ...args]);
  const table = cli();
  expect(table.exitCode).toBe(0);
  const lines = table.stdout.toString().trim().split("\n");
  expect(lines[0]).toMatch(/^SCOPE\s+WINDOW\s+CAP\s+SPENT\s+USED\s+RESETS$/);
  expect(lines.find((l) => l.startsWith("seat:dev"))).toMatch(new RegExp(`^seat:dev\\s+day\\s+${SEAT_CAP} tokens\\s+${want.tokens} tokens\\s+${Math.round((want.tokens / SEAT_CAP) * 100)}%\\s`));
  expect(lines.find((l) => l.startsWith("org"))).toContain(`${want.tokens} tokens + ${want.money.toFixed(4)} money`);
  const json = cli("--json");
  expect(json.exitCode).toBe(0);
  expect((JSON.parse(json.stdout.toString()) as { budgets: Row[] }).budgets.find((r) => r.scope === "seat:dev")!.spent).toEqual(seat.spent);
  // Refused without a token, as every route.
  const anon = Bun.spawnSync([process.execPath, resolve(import.meta.dir, "../../src/main.ts"), "budgets", "--url", node.apiUrl, "--token", "wrong-token-0123456789abcdef"]);
  expect(anon.exitCode).toBe(1);

  // The soft alert: one DM from dev to its manager, boss, naming the share and the cap.
  const dm = dmChannelId(["dev", "boss"]);
  const alerts = await waitFor("the manager's alert", async () => {
    const got = (await messages(dm)).filter((m) => m.author === "dev");
    return got.length > 0 ? got : null;
  });
  expect(alerts).toHaveLength(1);
  // Crossed by the third call: 54 of 200 tokens.
  expect(alerts[0]!.body).toContain(`I have used ${Math.floor(((3 * PER_CALL) / SEAT_CAP) * 100)}% of my day model budget (${3 * PER_CALL} of ${SEAT_CAP} tokens)`);
  // One more round stays past the fraction: no second alert in this window.
  const posted = await node.post("/chat/channels/general/messages", { body: "@dev one more", author: "boss" });
  expect(posted.status).toBeLessThan(300);
  await waitFor("dev's fourth answer", async () => ((await messages("general")).filter((m) => m.author === "dev").length >= ROUNDS + 1 ? true : null));
  await waitFor("the fourth turn's calls charged", async () => {
    const n = server.requests.length;
    return n > calls && (await budgets()).find((x) => x.scope === "seat:dev")?.spent.charges === n ? true : null;
  });
  expect((await messages(dm)).filter((m) => m.author === "dev")).toHaveLength(1);
}, 240_000);
