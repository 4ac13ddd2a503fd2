// Issue 12, item 6: chat_read reads the newest messages of a 5,100-message channel. Issue 32:
// chat_search is ranked full-text search over the whole channel (FTS5), so the oldest match
// is found as surely as the newest, ties newest first, and DMs only for their participants.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { systemClock } from "../../src/clock.ts";
import { builtinTools } from "../../src/agent/tools/builtins.ts";
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

test("chat_search ranks the whole channel: equal matches newest first, the oldest found too", async () => {
  type Hits = { searched: boolean; hits: { snippet: string; channel: string }[] };
  const call = async (a: Record<string, unknown>) => JSON.parse((await tools.get("chat_search")!.call(a, ctx)).content) as Hits;
  const one = await call({ text: "zebra", channel: "general", limit: 1 });
  expect(one.searched).toBe(true);
  expect(one.hits.map((h) => h.snippet)).toEqual(["the newest says [zebra]"]);
  const both = await call({ text: "zebra", limit: 5 });
  expect(both.hits.map((h) => h.snippet)).toEqual(["the newest says [zebra]", "the oldest says [zebra]"]);
  // Every word is required: one message holds both.
  const exact = await call({ text: `message ${MESSAGES - 1}`, limit: 5 });
  expect(exact.hits.map((h) => h.snippet)).toEqual([`[message] [${MESSAGES - 1}]`]);
  // FTS syntax in the model's text is literal, never an error.
  expect((await call({ text: 'zebra" OR NEAR(* "x', limit: 5 })).hits).toEqual([]);
});

test("chat_search covers the seat's own DMs and nobody else's", async () => {
  const mine = await estate.write("chat", { op: "chat.post", channel: "dm.cto.founder", author: "founder", body: "the okapi plan", thread_parent: null, mentions: [], dm: { members: ["cto", "founder"] } });
  expect(mine.status === "applied" && mine.outcome.ok).toBe(true);
  const call = async (seat: string) => JSON.parse((await tools.get("chat_search")!.call({ text: "okapi" }, { ...ctx, seat })).content) as { hits: { channel: string }[] };
  expect((await call("cto")).hits.map((h) => h.channel)).toEqual(["dm.cto.founder"]);
  expect((await call("someone-else")).hits).toEqual([]);
});
