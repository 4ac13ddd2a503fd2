// Issue 12, item 6: chat_read and chat_search read the newest messages. On a 5,100-message
// channel (past the tools' 5,000-message walk) the newest are what they show; before the
// fix they walked forward from the oldest and stopped at 5,000.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { systemClock } from "../../src/clock.ts";
import { builtinTools, CHAT_SCAN_MAX } from "../../src/agent/tools/builtins.ts";
import type { Tool } from "../../src/agent/tools/contract.ts";
import { silentLogger } from "../../src/log.ts";
import { buildOrg } from "../../src/org/org.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { LocalEstate, rootCompany } from "./support.ts";

const company = rootCompany();
const MESSAGES = 5_100;
let estate: LocalEstate;
const queue = new MemoryQueue({ clock: systemClock, log: silentLogger });
let tools: Map<string, Tool>;
const ctx = { seat: "cto", epoch: 1, turn_id: "t", signal: new AbortController().signal };

beforeAll(async () => {
  expect(MESSAGES).toBeGreaterThan(CHAT_SCAN_MAX);
  estate = new LocalEstate(company);
  for (let i = 1; i <= MESSAGES; i++) await estate.post("general", "founder", i === MESSAGES ? "the newest says zebra" : i === 1 ? "the oldest says zebra" : `message ${i}`);
  tools = new Map(builtinTools({ org: () => buildOrg(company), estate, queue, clock: systemClock }).map((t) => [t.name, t]));
});
afterAll(async () => {
  estate.close();
  await queue.close();
});

test("chat_read shows the newest messages, oldest of them first", async () => {
  const out = await tools.get("chat_read")!.call({ channel: "general", limit: 3 }, ctx);
  expect(out.is_error).toBe(false);
  const { messages } = JSON.parse(out.content) as { messages: { body: string }[] };
  expect(messages.map((m) => m.body)).toEqual([`message ${MESSAGES - 2}`, `message ${MESSAGES - 1}`, "the newest says zebra"]);
});

test("chat_search finds the newest match first, and limits to the newest hits", async () => {
  const one = await tools.get("chat_search")!.call({ text: "zebra", channel: "general", limit: 1 }, ctx);
  expect((JSON.parse(one.content) as { hits: { body: string }[] }).hits.map((h) => h.body)).toEqual(["the newest says zebra"]);
  const newest = await tools.get("chat_search")!.call({ text: `message ${MESSAGES - 1}`, limit: 5 }, ctx);
  expect((JSON.parse(newest.content) as { hits: { body: string }[] }).hits.map((h) => h.body)).toEqual([`message ${MESSAGES - 1}`]);
  // The oldest lies beyond the walk's bound from the newest end: not found, by design.
  const both = await tools.get("chat_search")!.call({ text: "zebra", channel: "general", limit: 5 }, ctx);
  expect((JSON.parse(both.content) as { hits: { body: string }[] }).hits.map((h) => h.body)).toEqual(["the newest says zebra"]);
});
