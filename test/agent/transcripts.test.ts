// Turn transcripts: the recorder's cuts and budget, the store's schema gate, caps, horizon
// and paging (a real SQLite file), and a real turn of the root company's scripted @ceo
// recorded round by round with its tool calls' inputs and outputs.
import { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { systemClock } from "../../src/clock.ts";
import { MemoryCoordination } from "../../src/coord/index.ts";
import { memoryLogger } from "../../src/log.ts";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { CompletionLedger } from "../../src/agent/ledger.ts";
import { buildProviders } from "../../src/agent/providers/index.ts";
import { TurnEngine } from "../../src/agent/turn.ts";
import { buildOrg } from "../../src/org/org.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { TRANSCRIPT_MAX_BYTES, TRANSCRIPT_SPENT_TEXT_MAX, TRANSCRIPT_TOOL_TEXT_MAX, TranscriptRecorder, type TurnTranscript } from "../../src/agent/transcript.ts";
import { TRANSCRIPT_HORIZON_MS, TranscriptStore } from "../../src/agent/transcripts.ts";
import { runRetention } from "../../src/duty/retention.ts";
import { LocalEstate, mentionTrigger, rootCompany } from "./support.ts";

const dir = mkdtempSync(join(tmpdir(), "crewlet-transcripts-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let dbs = 0;
const openDb = () => new Database(join(dir, `node-${++dbs}.db`), { create: true, strict: true });

function recorder(handle = "ceo", id = "t1", started_at = 1_000) {
  return new TranscriptRecorder({ id, handle, node: "node-a", epoch: 3, provider: "llm", model: "m", trigger: { type: "chat_mention", from: "founder", conversation: "chat:general:1", text: "hi", count: 1 }, started_at });
}

function transcript(handle: string, id: string, started_at: number, fill = 0): TurnTranscript {
  const r = recorder(handle, id, started_at);
  r.opened("system", "x".repeat(fill));
  r.round({ n: 1, started_at, model_ms: 5, sent: [{ role: "user", content: "hello" }], text: "done", usage: { input_tokens: 10, output_tokens: 2 }, cost_micros: null });
  r.roundEnded(started_at + 6);
  return r.finish({ ended_at: started_at + 10, outcome: "completed", end: "completed", error: null, usage: { input_tokens: 10, output_tokens: 2 } });
}

describe("the recorder", () => {
  test("keeps each round's text, tool inputs and outputs, tokens, cost and times", () => {
    const r = recorder();
    r.opened("You are the CEO.", "@ceo plan please");
    r.round({ n: 1, started_at: 1_000, model_ms: 40, sent: [{ role: "user", content: "@ceo plan please" }], text: "Let me file work.", usage: { input_tokens: 100, output_tokens: 20 }, cost_micros: 700 });
    r.toolCalled({ id: "c1", name: "work_create", arguments: { title: "Plan" }, raw_arguments: '{"title":"Plan"}' }, '{"key":"ENG-1"}', false, true, 12);
    r.toolCalled({ id: "c2", name: "bad", arguments: null, raw_arguments: "{nope" }, "arguments are not a JSON object", true, false, 0);
    r.roundEnded(1_060);
    r.round({ n: 2, started_at: 1_060, model_ms: 30, sent: [{ role: "user", content: "x" }, { role: "assistant", content: "y", tool_calls: [] }], text: "Filed ENG-1.", usage: { input_tokens: 150, output_tokens: 10 }, cost_micros: 900 });
    r.roundEnded(1_090);
    const t = r.finish({ ended_at: 1_100, outcome: "completed", end: "completed", error: null, usage: { input_tokens: 250, output_tokens: 30 } });
    expect(t.duration_ms).toBe(100);
    expect(t.cost_micros).toBe(1_600);
    expect(t.system_chars).toBe("You are the CEO.".length);
    expect(t.rounds.map((x) => [x.n, x.duration_ms, x.model_ms, x.sent.messages, x.text])).toEqual([
      [1, 60, 40, 1, "Let me file work."],
      [2, 30, 30, 2, "Filed ENG-1."],
    ]);
    expect(t.rounds[0]!.tool_calls).toEqual([
      { id: "c1", name: "work_create", input: '{\n  "title": "Plan"\n}', output: '{"key":"ENG-1"}', is_error: false, reached: true, duration_ms: 12 },
      { id: "c2", name: "bad", input: "{nope", output: "arguments are not a JSON object", is_error: true, reached: false, duration_ms: 0 },
    ]);
    expect(t.truncated).toBe(false);
  });

  test("a long tool output is cut at its limit; past the transcript's budget every text keeps a stub and says so", () => {
    const r = recorder();
    r.opened("s", "o");
    const big = "z".repeat(TRANSCRIPT_TOOL_TEXT_MAX * 2);
    let n = 0;
    // Enough rounds of two 8 KiB tool texts to spend the budget several times over.
    for (let round = 1; round <= 40; round++) {
      r.round({ n: round, started_at: 1_000, model_ms: 1, sent: [], text: "t", usage: { input_tokens: 1, output_tokens: 1 }, cost_micros: null });
      for (let i = 0; i < 4; i++) r.toolCalled({ id: `c${n++}`, name: "read", arguments: {}, raw_arguments: "{}" }, big, false, false, 1);
    }
    const t = r.finish({ ended_at: 2_000, outcome: "completed", end: "round_limit", error: null, usage: { input_tokens: 40, output_tokens: 40 } });
    const first = t.rounds[0]!.tool_calls[0]!.output;
    expect(first.startsWith("z".repeat(TRANSCRIPT_TOOL_TEXT_MAX))).toBe(true);
    expect(first).toContain(`cut at ${TRANSCRIPT_TOOL_TEXT_MAX} characters`);
    const last = t.rounds[39]!.tool_calls[3]!.output;
    expect(last).toContain(`cut at ${TRANSCRIPT_SPENT_TEXT_MAX} characters`);
    expect(t.truncated).toBe(true);
    // The whole stays within one request/reply answer.
    expect(Buffer.byteLength(JSON.stringify(t))).toBeLessThan(TRANSCRIPT_MAX_BYTES + 128 * 1024);
  });
});

describe("the store (node.db)", () => {
  test("every write is decoded first: a bad transcript is refused naming the field, nothing written", () => {
    const store = new TranscriptStore(openDb());
    const bad = { ...transcript("ceo", "t1", 1_000), outcome: "" };
    expect(() => store.insert(bad, 1_000)).toThrow(/outcome/);
    expect(() => store.insert({ ...transcript("ceo", "t2", 1_000), extra: 1 }, 1_000)).toThrow(/transcript invalid/);
    expect(store.count("ceo")).toBe(0);
  });

  test("pages newest first with a cursor; one turn is read back whole; a repeat write keeps the first", () => {
    const store = new TranscriptStore(openDb());
    for (let i = 1; i <= 5; i++) store.insert(transcript("ceo", `t${i}`, 1_000 + i), 2_000);
    store.insert(transcript("cto", "other", 1_000), 2_000);
    store.insert({ ...transcript("ceo", "t3", 1_003), outcome: "failed" }, 2_000);
    const p1 = store.list("ceo", 2);
    expect(p1.turns.map((t) => t.id)).toEqual(["t5", "t4"]);
    expect(p1.turns[0]).toMatchObject({ rounds: 1, tool_calls: 0, usage: { input_tokens: 10, output_tokens: 2 } });
    const p2 = store.list("ceo", 2, p1.next);
    expect(p2.turns.map((t) => t.id)).toEqual(["t3", "t2"]);
    const p3 = store.list("ceo", 2, p2.next);
    expect(p3).toEqual({ turns: [expect.objectContaining({ id: "t1" })], next: null });
    expect(store.get("ceo", "t3")?.outcome).toBe("completed");
    expect(store.get("ceo", "t3")?.rounds[0]?.text).toBe("done");
    expect(store.get("cto", "t3")).toBeNull();
  });

  test("bounded: a seat keeps its newest N and at most its byte cap; the horizon drops old turns of every seat", () => {
    const store = new TranscriptStore(openDb(), { per_seat: 3, seat_bytes: 10_000, horizon_ms: 1_000_000 });
    for (let i = 1; i <= 6; i++) store.insert(transcript("ceo", `t${i}`, 10_000 + i), 20_000);
    expect(store.list("ceo", 10).turns.map((t) => t.id)).toEqual(["t6", "t5", "t4"]);
    // Two 4 KB transcripts fit in 10 KB, a third does not.
    for (let i = 1; i <= 3; i++) store.insert(transcript("pm", `b${i}`, 10_000 + i, 4_000), 20_000);
    expect(store.list("pm", 10).turns.map((t) => t.id)).toEqual(["b3", "b2"]);
    // The newest is always kept, even alone over the cap.
    store.insert(transcript("cto", "huge", 10_000, 12_000), 20_000);
    expect(store.count("cto")).toBe(1);
    // A write a horizon later trims every seat's old rows.
    store.insert(transcript("ceo", "late", 2_000_000), 2_000_000);
    expect(store.count("pm")).toBe(0);
    expect(store.list("ceo", 10).turns.map((t) => t.id)).toEqual(["late"]);
  });
});

test("the maintenance sweep lets the horizon go on a node that runs no more turns", () => {
  const db = openDb();
  const store = new TranscriptStore(db);
  store.insert(transcript("ceo", "old", 1_000), 1_000);
  store.insert(transcript("ceo", "new", 1_000 + TRANSCRIPT_HORIZON_MS), 1_000 + TRANSCRIPT_HORIZON_MS);
  const out = runRetention(db, 2_000 + TRANSCRIPT_HORIZON_MS);
  expect(out.find((r) => r.table === "turn_transcripts")).toEqual({ table: "turn_transcripts", deleted: 1, horizon: "7 days" });
  expect(store.list("ceo", 10).turns.map((t) => t.id)).toEqual(["new"]);
  expect(runRetention(db, 2_000 + 2 * TRANSCRIPT_HORIZON_MS).find((r) => r.table === "turn_transcripts")?.deleted).toBe(1);
  expect(store.list("ceo", 10).turns).toEqual([]);
});

describe("a real turn", () => {
  test("@ceo's scripted plan is recorded: trigger, two rounds, each tool call's input and output, tokens, outcome", async () => {
    const company = rootCompany();
    const org = buildOrg(company);
    const { log } = memoryLogger("warn");
    const estate = new LocalEstate(company);
    const queue = new MemoryQueue({ clock: systemClock, log });
    const store = new TranscriptStore(openDb());
    const scripted = buildProviders(company.providers.llm, systemClock);
    const coord = new MemoryCoordination({ clock: systemClock, log });
    try {
      const engine = new TurnEngine({
        org: () => org,
        node_id: "node-a",
        clock: systemClock,
        log,
        estate,
        queue,
        providerFor: (seat) => scripted.get(seat.llm ?? ""),
        ledger: new CompletionLedger(coord.node({}).slot("ledger"), systemClock, log),
        events: new MemoryEventSink(),
        transcripts: { keep: (t) => store.insert(t, systemClock.now()), costOf: () => 1_234, modelOf: () => "scripted" },
      });
      const msg = await estate.post("general", "founder", "@ceo we need a plan for the Q3 launch");
      const trigger = mentionTrigger("ceo", "general", msg, "@ceo we need a plan for the Q3 launch");
      const report = await engine.run({ seat: "ceo", epoch: 7, fence: () => true, triggers: [trigger] });
      expect(report.outcome).toBe("completed");
      const page = store.list("ceo", 10);
      expect(page.turns.map((t) => t.id)).toEqual([report.turn_id!]);
      const t = store.get("ceo", report.turn_id!)!;
      expect(t).toMatchObject({ handle: "ceo", node: "node-a", epoch: 7, model: "scripted", outcome: "completed", end: "completed", error: null });
      expect(t.trigger).toMatchObject({ type: trigger.type, from: "founder", conversation: trigger.conversation, count: 1 });
      expect(t.opening).toContain("we need a plan for the Q3 launch");
      expect(t.rounds.length).toBe(report.rounds);
      const calls = t.rounds.flatMap((r) => r.tool_calls);
      expect(calls.length).toBe(report.tool_calls);
      expect(calls[0]!.input).toContain("Technical plan");
      expect(calls[0]!.output).toContain("ENG-1");
      expect(t.usage).toEqual(report.usage);
      expect(t.rounds.reduce((n, r) => n + r.usage.input_tokens, 0)).toBe(report.usage.input_tokens);
      expect(t.cost_micros).toBe(1_234 * t.rounds.length);
      expect(t.rounds.at(-1)!.text).toContain("@cto owns the technical plan");
    } finally {
      estate.close();
      await queue.close();
    }
  });
});
