// Turn receipts, built from transcripts: a table of transcripts and what their receipts say
// (trigger, final words, tools, tokens, cost, outcome, error, links, the company's day), the
// bounds every cut text keeps, and the writer's retry under the turn id (a lost answer is
// written again, applied once).
import { describe, expect, test } from "bun:test";
import { systemClock } from "../../src/clock.ts";
import { memoryLogger } from "../../src/log.ts";
import { buildReceipt, finalWords, receiptLinks, ReceiptWriter, toolsCalled } from "../../src/agent/receipt.ts";
import { dayIn } from "../../src/estate/turn-receipts.ts";
import type { TurnTranscript } from "../../src/agent/transcript.ts";
import { MAX_RECEIPT_ERROR_BYTES, MAX_RECEIPT_SUMMARY_BYTES, MAX_RECEIPT_TOOLS, turnReceipt } from "../../src/estate/records.ts";
import { LocalEstate, mentionTrigger, rootCompany } from "./support.ts";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { CompletionLedger } from "../../src/agent/ledger.ts";
import { buildProviders } from "../../src/agent/providers/index.ts";
import { TurnEngine } from "../../src/agent/turn.ts";
import { MemoryCoordination } from "../../src/coord/index.ts";
import { buildOrg } from "../../src/org/org.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";

const TURN = "0b6f2a8e-0d1c-4c55-9a37-1f0e9d1c2b3a";
const ROOT = "5c1d7f3e-2a4b-4c6d-8e9f-0a1b2c3d4e5f";

function call(name: string, o: { input?: string; output?: string; is_error?: boolean } = {}) {
  return { id: `c-${name}`, name, input: o.input ?? "{}", output: o.output ?? "ok", is_error: o.is_error ?? false, reached: false, duration_ms: 3 };
}

function round(n: number, text: string, calls: ReturnType<typeof call>[] = []) {
  return { n, started_at: 1_000 + n, model_ms: 5, duration_ms: 9, sent: { messages: 2, chars: 40 }, text, usage: { input_tokens: 10, output_tokens: 5 }, cost_micros: null, tool_calls: calls };
}

function transcript(o: Partial<TurnTranscript> = {}): TurnTranscript {
  return {
    id: TURN,
    handle: "cto",
    node: "node-a",
    epoch: 2,
    skills: [],
    provider: "s",
    model: "scripted",
    trigger: { type: "chat_mention", from: "founder", conversation: `chat:general:${ROOT}`, text: "@cto plan it", count: 1 },
    opening: "",
    system_chars: 100,
    started_at: Date.UTC(2026, 11, 6, 22, 59, 0),
    ended_at: Date.UTC(2026, 11, 6, 23, 30, 0),
    duration_ms: 31 * 60_000,
    outcome: "completed",
    end: "completed",
    error: null,
    usage: { input_tokens: 120, output_tokens: 45 },
    cost_micros: 1_250,
    rounds: [round(1, "Let me look.", [call("work_create", { output: '{"key": "ENG-7"}' }), call("chat_post")]), round(2, "Planned in ENG-7; first draft today.")],
    truncated: false,
    ...o,
  };
}

describe("buildReceipt: what a receipt says of a turn", () => {
  const cases: { name: string; t: TurnTranscript; tz?: string; want: Record<string, unknown> }[] = [
    {
      name: "a chat mention that created work: thread and work item linked, last words as summary",
      t: transcript(),
      want: {
        seat: "cto",
        turn_id: TURN,
        day: "2026-12-06",
        trigger: { type: "chat_mention", from: "founder", conversation: `chat:general:${ROOT}`, count: 1 },
        summary: "Planned in ENG-7; first draft today.",
        tools: [{ name: "work_create", calls: 1, errors: 0 }, { name: "chat_post", calls: 1, errors: 0 }],
        input_tokens: 120,
        output_tokens: 45,
        cost_micros: 1_250,
        outcome: "completed",
        error: null,
        links: { channel: "general", thread_root: ROOT, work_key: "ENG-7" },
      },
    },
    {
      name: "the company's time zone decides the day (23:30 UTC is the next morning in Tokyo)",
      t: transcript(),
      tz: "Asia/Tokyo",
      want: { day: "2026-12-07" },
    },
    {
      name: "a failed turn: no words, the error in words, tools' failures counted, unpriced",
      t: transcript({
        outcome: "failed",
        error: "provider s: 401 unauthorized — check the key",
        cost_micros: null,
        rounds: [round(1, "", [call("work_comment", { is_error: true }), call("work_comment")])],
      }),
      want: { summary: "", outcome: "failed", error: "provider s: 401 unauthorized — check the key", cost_micros: null, tools: [{ name: "work_comment", calls: 2, errors: 1 }] },
    },
    {
      name: "a task on a work item: the work conversation links the item, no thread",
      t: transcript({ trigger: { type: "task_assigned", from: "founder", conversation: "work:ENG-12", text: "", count: 2 }, rounds: [round(1, "On it.")] }),
      want: { links: { channel: null, thread_root: null, work_key: "ENG-12" }, trigger: { type: "task_assigned", from: "founder", conversation: "work:ENG-12", count: 2 } },
    },
    {
      name: "a colleague's ask: no thread, no work item",
      t: transcript({ trigger: { type: "a2a_request", from: "ceo", conversation: "a2a:x1", text: "", count: 1 }, rounds: [round(1, "Done.")] }),
      want: { links: { channel: null, thread_root: null, work_key: null } },
    },
    {
      name: "a word the schema would refuse is named unknown rather than losing the receipt",
      t: transcript({ trigger: { type: "Weird.Type", from: "x", conversation: "c", text: "", count: 1 }, outcome: "Odd Outcome" }),
      want: { trigger: { type: "unknown", from: "x", conversation: "c", count: 1 }, outcome: "unknown" },
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const r = buildReceipt(c.t, c.tz ?? "UTC");
      expect(r).toMatchObject(c.want);
      expect(turnReceipt.safeParse(r).success).toBe(true);
    });
  }

  test("every cut text keeps its bound, and says it was cut", () => {
    const long = "é".repeat(10_000);
    const many = Array.from({ length: MAX_RECEIPT_TOOLS + 8 }, (_, i) => call(`tool_${i}`));
    const r = buildReceipt(transcript({ error: long, rounds: [round(1, long, many)] }), "UTC");
    expect(Buffer.byteLength(r.summary)).toBeLessThanOrEqual(MAX_RECEIPT_SUMMARY_BYTES);
    expect(r.summary.endsWith("…")).toBe(true);
    expect(Buffer.byteLength(r.error!)).toBeLessThanOrEqual(MAX_RECEIPT_ERROR_BYTES);
    expect(r.tools.length).toBe(MAX_RECEIPT_TOOLS);
  });

  test("the engine's facts: its words for a failure over the raw error, the work items it named", () => {
    const t = transcript({ outcome: "failed", error: "provider s: HTTP 401 from http://x/v1: {\"error\":…}", trigger: { type: "a2a_request", from: "ceo", conversation: "a2a:x", text: "", count: 1 } });
    const r = buildReceipt(t, "UTC", { error_words: "my model endpoint refused the API key (401) — check providers.llm.s.api_keys", work_items: ["not a key", "ENG-9", "ENG-7"] });
    expect(r.error).toBe("my model endpoint refused the API key (401) — check providers.llm.s.api_keys");
    expect(r.links.work_key).toBe("ENG-9");
    // The conversation's own work item comes first.
    expect(buildReceipt(transcript({ trigger: { type: "task_assigned", from: "x", conversation: "work:ENG-3", text: "", count: 1 } }), "UTC", { error_words: null, work_items: ["ENG-9"] }).links.work_key).toBe("ENG-3");
  });

  test("the parts: final words skip a silent last round; tools in order of first call; links only what the schema takes", () => {
    expect(finalWords({ rounds: [round(1, "said this"), round(2, "  ")] })).toBe("said this");
    expect(toolsCalled({ rounds: [round(1, "", [call("b"), call("a"), call("b")])] }).map((t) => [t.name, t.calls])).toEqual([["b", 2], ["a", 1]]);
    expect(receiptLinks({ trigger: { ...transcript().trigger, conversation: "chat:Not A Channel:x" }, rounds: [] })).toEqual({ channel: null, thread_root: null, work_key: null });
    expect(dayIn(Date.UTC(2026, 0, 1, 3, 0), "America/New_York")).toBe("2025-12-31");
  });
});

describe("ReceiptWriter", () => {
  test("a lost answer is written again under the turn id: the estate holds one receipt", async () => {
    const estate = new LocalEstate(rootCompany());
    let lost = 0;
    estate.loseAnswer = (_d, body) => (body as { op: string }).op === "turn.receipt" && lost++ === 0;
    const w = new ReceiptWriter({ estate, clock: systemClock, log: memoryLogger().log, timezone: () => "UTC", retry_ms: 0 });
    w.keep(transcript());
    await w.settled();
    expect(estate.writes.filter((x) => (x.body as { op: string }).op === "turn.receipt").length).toBe(2);
    const page = await estate.read({ q: "turns.list", limit: 10 });
    expect(page.turns.map((t) => t.turn_id)).toEqual([TURN]);
    expect(page.turns[0]).toMatchObject({ seat: "cto", summary: "Planned in ENG-7; first draft today.", links: { work_key: "ENG-7" } });
  });

  test("a receipt the estate refuses is logged, never thrown into the turn", async () => {
    const estate = new LocalEstate(rootCompany());
    estate.beforeWrite = () => {
      throw new Error("no data node answered");
    };
    const { log, sink } = memoryLogger();
    const w = new ReceiptWriter({ estate, clock: systemClock, log, timezone: () => "UTC", attempts: 2, retry_ms: 0 });
    w.keep(transcript());
    await w.settled();
    expect(sink.events("turn_receipt_write_failed").map((l) => l.fields.attempts)).toEqual([2]);
  });

  test("a stop waits for the receipts in flight, but no longer than its bound", async () => {
    let release: () => void = () => undefined;
    const hung = new Promise<void>((r) => (release = r));
    const estate = {
      write: async () => {
        await hung;
        return { status: "unknown" as const, domain: "tracker" as const, op_id: TURN, error: "never answered" };
      },
    };
    const w = new ReceiptWriter({ estate, clock: systemClock, log: memoryLogger().log, timezone: () => "UTC", attempts: 1 });
    w.keep(transcript());
    const t0 = Date.now();
    await w.settled(systemClock, 100);
    expect(Date.now() - t0).toBeLessThan(5_000);
    release();
    await w.settled();
    // With nothing in flight, a stop does not wait at all.
    const t1 = Date.now();
    await w.settled(systemClock, 60_000);
    expect(Date.now() - t1).toBeLessThan(1_000);
  });
});

describe("the turn engine hands each finished turn to the ledger", () => {
  test("a real turn of the scripted @ceo, and a seat with no model: one receipt each, the failure in words", async () => {
    const company = rootCompany();
    const org = buildOrg(company);
    const estate = new LocalEstate(company);
    const { log } = memoryLogger();
    const coord = new MemoryCoordination({ clock: systemClock, log });
    const scripted = buildProviders(company.providers.llm, systemClock);
    const writer = new ReceiptWriter({ estate, clock: systemClock, log, timezone: () => company.timezone, retry_ms: 0 });
    const engine = new TurnEngine({
      org: () => org,
      node_id: "node-a",
      clock: systemClock,
      log,
      estate,
      queue: new MemoryQueue({ clock: systemClock, log }),
      providerFor: (seat) => (seat.handle === "cto" ? undefined : scripted.get(seat.llm ?? "")),
      ledger: new CompletionLedger(coord.node({}).slot("ledger"), systemClock, log),
      events: new MemoryEventSink(),
      transcripts: { keep: (t, facts) => writer.keep(t, facts), costOf: () => null, modelOf: () => "scripted" },
    });
    const asked = await estate.post("general", "founder", "@ceo we need a plan for the Q3 launch");
    const ok = await engine.run({ seat: "ceo", epoch: 1, fence: () => true, triggers: [mentionTrigger("ceo", "general", asked, "@ceo we need a plan for the Q3 launch")] });
    const broken = await estate.post("general", "founder", "@cto status?");
    const failed = await engine.run({ seat: "cto", epoch: 1, fence: () => true, triggers: [mentionTrigger("cto", "general", broken, "@cto status?")] });
    await writer.settled();
    const page = await estate.read({ q: "turns.list", limit: 10 });
    expect(page.turns.map((t) => [t.seat, t.turn_id, t.outcome])).toEqual([
      ["cto", failed.turn_id!, "failed"],
      ["ceo", ok.turn_id!, "completed"],
    ]);
    const [cto, ceo] = page.turns;
    // The summary is the turn's final words, as its reply said them.
    expect(ok.final_text.trim().length).toBeGreaterThan(0);
    expect(ceo!).toMatchObject({ summary: ok.final_text.trim(), error: null, links: { channel: "general", thread_root: asked } });
    expect(ceo!.tools.reduce((n, x) => n + x.calls, 0)).toBe(ok.tool_calls);
    expect(cto!.error).toStartWith("I have no model configured");
  });
});
