import { afterEach, describe, expect, test } from "bun:test";
import { systemClock } from "../../src/clock.ts";
import { MemoryCoordination } from "../../src/coord/index.ts";
import { memoryLogger } from "../../src/log.ts";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { SeatInbox, Semaphore } from "../../src/agent/inbox.ts";
import { partitionByConversation } from "../../src/agent/partition.ts";
import { buildProviders, ProviderError, type Provider } from "../../src/agent/providers/index.ts";
import { TurnEngine, type TurnReport, type TurnRequest } from "../../src/agent/turn.ts";
import { buildOrg } from "../../src/org/org.ts";
import { encodeTrigger, type Trigger } from "../../src/org/trigger.ts";
import { ack, type Delivery } from "../../src/queue/contract.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { mailbox } from "../../src/queue/topics.ts";
import { SeatHost } from "../../src/seat/host.ts";
import { LocalEstate, mentionTrigger, rootCompany, taskTrigger } from "./support.ts";

const company = rootCompany();
const org = buildOrg(company);
const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

function delivery(t: Trigger | string, seq: number): Delivery {
  const data = typeof t === "string" ? new TextEncoder().encode(t) : encodeTrigger(t);
  return { subject: mailbox(typeof t === "string" ? "ceo" : t.seat, "inbox").subject, data, headers: {}, msgId: undefined, deliveryCount: 1, streamSeq: seq };
}

function world() {
  const { log, sink } = memoryLogger("debug");
  const estate = new LocalEstate(company);
  const queue = new MemoryQueue({ clock: systemClock, log });
  cleanup.push(() => estate.close(), () => queue.close());
  const events = new MemoryEventSink();
  const providers = buildProviders(company.providers.llm, systemClock);
  const engine = new TurnEngine({
    org: () => org,
    node_id: "node-a",
    clock: systemClock,
    log,
    estate,
    queue,
    providerFor: (s) => providers.get(s.llm ?? ""),
    ledger: null,
    events,
  });
  return { log, sink, estate, queue, events, engine };
}

describe("partitioning (pure)", () => {
  test("by conversation, first appearance order, duplicates settle together", () => {
    const a1 = { ...mentionTrigger("ceo", "general", "m1aaaaaaaa", "a"), conversation: "chat:general:m1" };
    const b = taskTrigger("ceo", "ENG-1", "task");
    const a2 = { ...mentionTrigger("ceo", "general", "m2aaaaaaaa", "b"), conversation: "chat:general:m1" };
    const parts = partitionByConversation([a1, b, a2, a1], (t) => t);
    expect(parts.map((p) => [p.conversation, p.triggers.map((t) => t.event_id), p.items.length])).toEqual([
      ["chat:general:m1", [a1.event_id, a2.event_id], 3],
      ["work:ENG-1", [b.event_id], 1],
    ]);
  });
});

describe("the inbox handler", () => {
  test("a drained batch: one turn per conversation with its constituent ids; bad input acked and logged", async () => {
    const w = world();
    const root = await w.estate.post("general", "founder", "@ceo hello");
    const follow = await w.estate.post("general", "founder", "@ceo are you there?", root);
    const t1 = { ...mentionTrigger("ceo", "general", root, "hello"), conversation: `chat:general:${root}` };
    const t2 = { ...mentionTrigger("ceo", "general", follow, "are you there?"), conversation: `chat:general:${root}` };
    const other = await w.estate.post("general", "founder", "@ceo separate topic");
    const t3 = { ...mentionTrigger("ceo", "general", other, "separate"), conversation: `chat:general:${other}` };
    const inbox = new SeatInbox({ engine: w.engine, log: w.log, max_concurrent: 4 });
    const out = await inbox.handleBatch([delivery(t1, 1), delivery("{not json", 2), delivery(t2, 3), delivery(t3, 4)], { handle: "ceo", epoch: 1, fence: () => true });
    expect(out.map((o) => o.kind)).toEqual(["ack", "ack", "ack", "ack"]);
    expect(w.events.named("turn_started").map((e) => e.trigger_ids)).toEqual([[t1.event_id, t2.event_id], [t3.event_id]]);
    expect(w.sink.events("inbox_trigger_invalid").length).toBe(1);
    // One reply for the two-message thread, in that thread.
    expect((await w.estate.thread("general", root)).filter((m) => m.author === "ceo").length).toBe(1);
  });

  test("screening: posture shed/stuck and a failed fence defer everything, running nothing", async () => {
    const w = world();
    const msg = await w.estate.post("general", "founder", "@ceo hi");
    const d = delivery(mentionTrigger("ceo", "general", msg, "hi"), 1);
    for (const posture of ["shed", "stuck"] as const) {
      const inbox = new SeatInbox({ engine: w.engine, log: w.log, max_concurrent: 1, posture: () => posture });
      const [o] = await inbox.handleBatch([d], { handle: "ceo", epoch: 1, fence: () => true });
      expect(o).toEqual({ kind: "defer", reason: `config posture is ${posture}` });
    }
    const inbox = new SeatInbox({ engine: w.engine, log: w.log, max_concurrent: 1 });
    const [o] = await inbox.handleBatch([d], { handle: "ceo", epoch: 1, fence: () => false });
    expect(o!.kind).toBe("defer");
    expect(w.events.named("turn_started")).toEqual([]);
  });

  test("a drain's later turns are admitted again: a renew gone stale defers what has not run", async () => {
    const w = world();
    const x = await w.estate.post("general", "founder", "@ceo one");
    const y = await w.estate.post("general", "founder", "@ceo two");
    const tx = mentionTrigger("ceo", "general", x, "one");
    const ty = mentionTrigger("ceo", "general", y, "two");
    const inbox = new SeatInbox({ engine: w.engine, log: w.log, max_concurrent: 1 });
    // Fresh for the first conversation's turn, stale by the time the second would start.
    let admissions = 0;
    const out = await inbox.batchHandler([delivery(tx, 1), delivery(ty, 2)], { handle: "ceo", epoch: 1, fence: () => true, admit: () => ++admissions === 1 });
    expect(out.map((o) => o.kind)).toEqual(["ack", "defer"]);
    expect(w.events.named("turn_started").map((e) => e.trigger_ids)).toEqual([[tx.event_id]]);
  });

  test("max_concurrent bounds turns across seats on one node", async () => {
    const { log } = memoryLogger("warn");
    let running = 0;
    let peak = 0;
    const engine = {
      run: async (req: TurnRequest): Promise<TurnReport> => {
        running += 1;
        peak = Math.max(peak, running);
        await Bun.sleep(10);
        running -= 1;
        return { turn_id: "t", settle: "ack", outcome: "completed", rounds: 1, tool_calls: 0, usage: { input_tokens: 0, output_tokens: 0 }, reached_outside: false, skipped: [], ran: req.triggers.map((t) => t.event_id), final_text: "", error: null };
      },
    };
    const inbox = new SeatInbox({ engine, log, max_concurrent: 2 });
    const seats = ["ceo", "cto", "pm", "engineer"];
    await Promise.all(seats.map((s, i) => inbox.handler(delivery(taskTrigger(s, `ENG-${i + 1}`, "x"), i), { handle: s, epoch: 1, fence: () => true })));
    expect(peak).toBe(2);
  });

  test("semaphore hands slots over in order and never exceeds its limit", async () => {
    const s = new Semaphore(1);
    const order: number[] = [];
    const r1 = await s.acquire();
    const p2 = s.acquire().then((r) => (order.push(2), r));
    const p3 = s.acquire().then((r) => (order.push(3), r));
    expect(s.inUse).toBe(1);
    r1();
    (await p2)();
    (await p3)();
    expect(order).toEqual([2, 3]);
    expect(s.inUse).toBe(0);
    expect(() => new Semaphore(0)).toThrow();
  });

  test("through a real queue attachment: published trigger → turn → acked", async () => {
    const w = world();
    await w.queue.ensureStreams();
    const { subject, group } = mailbox("pm", "inbox");
    await w.queue.ensureMailbox(subject, group);
    const msg = await w.estate.post("general", "founder", "@pm ping");
    const t = mentionTrigger("pm", "general", msg, "ping");
    await w.queue.publish(subject, encodeTrigger(t), { msgId: t.event_id });
    const inbox = new SeatInbox({ engine: w.engine, log: w.log, max_concurrent: 1 });
    const att = await w.queue.attach(subject, group, (d) => inbox.handler(d, { handle: "pm", epoch: 1, fence: () => true }), { batch: 8 });
    cleanup.push(() => att.detach());
    for (let i = 0; i < 200 && w.events.named("turn_completed").length === 0; i++) await Bun.sleep(5);
    await att.idle();
    expect(w.events.named("turn_completed")[0]).toMatchObject({ seat: "pm", outcome: "completed", settle: "ack" });
    // Acked: a second attachment gets nothing.
    await att.detach();
    let redelivered = 0;
    const att2 = await w.queue.attach(subject, group, async () => ((redelivered += 1), { kind: "ack" }));
    cleanup.push(() => att2.detach());
    await Bun.sleep(30);
    expect(redelivered).toBe(0);
  });

  test("through the seat host: mail that piled up while the seat was busy drains as one turn per conversation", async () => {
    const w = world();
    await w.queue.ensureStreams();
    const coord = new MemoryCoordination({ clock: systemClock, log: w.log });
    // The seat's first turn is held open: the seat is busy while the rest piles up.
    let openBusy!: () => void;
    const busy = new Promise<void>((r) => (openBusy = r));
    const requests: TurnRequest[] = [];
    const engine = {
      run: async (req: TurnRequest): Promise<TurnReport> => {
        requests.push(req);
        if (requests.length === 1) await busy;
        return w.engine.run(req);
      },
    };
    const inbox = new SeatInbox({ engine, log: w.log, max_concurrent: 2 });
    const host = new SeatHost({
      node_id: "node-a",
      roles: ["seats"],
      leases: coord.node().leases,
      queue: w.queue,
      clock: systemClock,
      log: w.log,
      lease_ttl_ms: 45_000,
      batchHandler: inbox.batchHandler,
    });
    cleanup.push(async () => {
      openBusy();
      await host.drain();
      await host.stop();
    });
    await host.start([{ handle: "ceo" }]);
    for (let i = 0; i < 400 && !host.held().includes("ceo"); i++) await Bun.sleep(5);
    expect(host.held()).toEqual(["ceo"]);
    const { subject, group } = mailbox("ceo", "inbox");
    const send = (t: Trigger) => w.queue.publish(subject, encodeTrigger(t), { msgId: t.event_id });

    const warm = await w.estate.post("general", "founder", "@ceo good morning");
    const tWarm = mentionTrigger("ceo", "general", warm, "good morning");
    await send(tWarm);
    for (let i = 0; i < 400 && requests.length === 0; i++) await Bun.sleep(5);
    expect(requests).toHaveLength(1);

    // While that turn runs: two threads, interleaved.
    const rootA = await w.estate.post("general", "founder", "@ceo what is the plan?");
    const rootB = await w.estate.post("general", "founder", "@ceo lunch?");
    const a1 = mentionTrigger("ceo", "general", rootA, "what is the plan?");
    const b1 = mentionTrigger("ceo", "general", rootB, "lunch?");
    const a2 = { ...mentionTrigger("ceo", "general", await w.estate.post("general", "founder", "@ceo and the budget?", rootA), "and the budget?"), conversation: a1.conversation };
    const b2 = { ...mentionTrigger("ceo", "general", await w.estate.post("general", "founder", "@ceo noon works", rootB), "noon works"), conversation: b1.conversation };
    const a3 = { ...mentionTrigger("ceo", "general", await w.estate.post("general", "founder", "@ceo and hiring?", rootA), "and hiring?"), conversation: a1.conversation };
    for (const t of [a1, b1, a2, b2, a3]) await send(t);
    expect(requests).toHaveLength(1); // nothing of the backlog was taken while the seat was busy

    openBusy();
    for (let i = 0; i < 2000 && w.events.named("turn_completed").length < 3; i++) await Bun.sleep(5);
    // Three turns: the first, then one per conversation of the backlog, each with its ids.
    expect(w.events.named("turn_started").map((e) => e.trigger_ids)).toEqual([
      [tWarm.event_id],
      [a1.event_id, a2.event_id, a3.event_id],
      [b1.event_id, b2.event_id],
    ]);
    expect(requests.map((r) => r.triggers.map((t) => t.conversation))).toEqual([[tWarm.conversation], [a1.conversation, a1.conversation, a1.conversation], [b1.conversation, b1.conversation]]);
    expect(w.events.named("turn_completed").map((e) => e.settle)).toEqual(["ack", "ack", "ack"]);
    // One reply per thread, in that thread.
    expect((await w.estate.thread("general", rootA)).filter((m) => m.author === "ceo")).toHaveLength(1);
    expect((await w.estate.thread("general", rootB)).filter((m) => m.author === "ceo")).toHaveLength(1);

    // Every delivery of the drain was acked: after the seat is given back, nothing is left.
    await host.drain();
    let left = 0;
    const att = await w.queue.attach(subject, group, async () => ((left += 1), ack()));
    cleanup.push(() => att.detach());
    await Bun.sleep(30);
    expect(left).toBe(0);
  });

  test("a drain cancels a turn stuck on its model call: its delivery is handed back at once and the successor runs it", async () => {
    const w = world();
    await w.queue.ensureStreams();
    const coord = new MemoryCoordination({ clock: systemClock, log: w.log });
    // A model that never answers but honours its cancellation, as an HTTP provider does.
    const hung: Provider = {
      name: "hung",
      complete: (req) =>
        new Promise((_, reject) => req.signal?.addEventListener("abort", () => reject(new ProviderError("hung", "aborted", "cancelled by the caller")), { once: true })),
    };
    const events = new MemoryEventSink();
    const engine = new TurnEngine({ org: () => org, node_id: "node-a", clock: systemClock, log: w.log, estate: w.estate, queue: w.queue, providerFor: () => hung, ledger: null, events });
    const inbox = new SeatInbox({ engine, log: w.log, max_concurrent: 1 });
    // Lease TTL 1.5 s: heartbeat 0.5 s, so the drain waits two heartbeats (1 s) before cancelling.
    const host = new SeatHost({ node_id: "node-a", roles: ["seats"], leases: coord.node().leases, queue: w.queue, clock: systemClock, log: w.log, lease_ttl_ms: 1_500, batchHandler: inbox.batchHandler });
    cleanup.push(() => host.stop());
    await host.start([{ handle: "ceo" }]);
    for (let i = 0; i < 400 && !host.held().includes("ceo"); i++) await Bun.sleep(5);
    const { subject, group } = mailbox("ceo", "inbox");
    const msg = await w.estate.post("general", "founder", "@ceo status?");
    const t = mentionTrigger("ceo", "general", msg, "status?");
    await w.queue.publish(subject, encodeTrigger(t), { msgId: t.event_id });
    for (let i = 0; i < 400 && events.named("turn_started").length === 0; i++) await Bun.sleep(5);
    expect(events.named("turn_started")).toHaveLength(1);

    await host.drain();
    expect(w.sink.events("seat_turn_cancelled").map((l) => l.fields.seat)).toEqual(["ceo"]);
    expect(events.named("turn_completed")[0]).toMatchObject({ outcome: "handed_back", settle: "nak", failure: "cancelled" });
    // Nobody was told: the message is handed on, not given up.
    expect((await w.estate.thread("general", msg)).map((m) => m.author)).toEqual(["founder"]);
    // The successor gets it straight away (no ack wait), as its second delivery.
    const seen: number[] = [];
    const att = await w.queue.attach(subject, group, async (d) => (seen.push(d.deliveryCount), ack()));
    cleanup.push(() => att.detach());
    for (let i = 0; i < 400 && seen.length === 0; i++) await Bun.sleep(5);
    expect(seen).toEqual([2]);
  });
});
