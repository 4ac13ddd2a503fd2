// Reads answered by the holder, on a real nats-server: two nodes' MemoryReads, each with
// its own node.db; the lease view is given (the seat host's own tests cover leases).
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { systemClock } from "../../src/clock.ts";
import { silentLogger } from "../../src/log.ts";
import { MemoryChangelog } from "../../src/memory/changelog.ts";
import { MemoryReads, type LeaseFact } from "../../src/agent/holder-reads.ts";
import { MemoryStore } from "../../src/memory/store.ts";
import { MemorySync } from "../../src/memory/sync.ts";
import { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { TranscriptRecorder } from "../../src/agent/transcript.ts";
import { TranscriptStore } from "../../src/agent/transcripts.ts";

let nats: TestNats;
const closers: (() => Promise<void> | void)[] = [];
beforeAll(async () => {
  nats = await startNats(1);
});
afterAll(async () => {
  for (const c of closers.reverse()) await c();
  await nats.stop();
});

const changelog = new MemoryChangelog();
let leases: LeaseFact[] = [];

async function node(id: string, owner: string, opts: { serve?: boolean } = {}) {
  const nc = await nats.connect({ name: id });
  const queue = new JetStreamQueue({ nc, replicas: 1, clock: systemClock, log: silentLogger });
  const store = new MemoryStore(new Database(":memory:", { strict: true }), systemClock);
  const sync = new MemorySync({ store, changelog, clock: systemClock, log: silentLogger });
  const held = new Set<string>();
  const transcripts = new TranscriptStore(new Database(":memory:", { strict: true }));
  const reads = new MemoryReads({
    store,
    sync,
    queue,
    log: silentLogger,
    transcripts,
    tools: (h) => (held.has(h) ? [`${id}_tool`, "files__read"] : []),
    holder: { node_id: id, owner, held: () => [...held], leases: async () => leases },
  });
  if (opts.serve !== false) await reads.serve();
  closers.push(async () => {
    reads.stop();
    await queue.close();
    await nc.close();
  });
  return { store, sync, reads, held, transcripts };
}

function turn(handle: string, id: string, text: string) {
  const r = new TranscriptRecorder({ id, handle, node: "x", epoch: 1, provider: null, model: null, trigger: { type: "chat_mention", from: "ana", conversation: "c", text: "hi", count: 1 }, started_at: 1_000 });
  r.opened("s", "o");
  r.round({ n: 1, started_at: 1_000, model_ms: 1, sent: [], text, usage: { input_tokens: 1, output_tokens: 1 }, cost_micros: null });
  return r.finish({ ended_at: 1_001, outcome: "completed", end: "completed", error: null, usage: { input_tokens: 1, output_tokens: 1 } });
}

describe("memory reads answered by the holder", () => {
  test("local holder, remote holder, no holder, a silent holder, a hydrating holder, the overview", async () => {
    const a = await node("na", "na:1");
    const b = await node("nb", "nb:1");
    // nc holds a seat but answers nothing (a wedged process).
    await node("nc", "nc:1", { serve: false });

    // s1 on a, s2 on b (each hydrated, so ready), s3 on the silent node, s4 on nobody.
    a.store.writeDiary({ handle: "s1", content: "a's note", source: "note", turn_id: null, work_key: null });
    b.store.writeDiary({ handle: "s2", content: "b's note", source: "note", turn_id: null, work_key: null });
    // A stale copy of s2 on a: never the answer, since a does not hold s2.
    a.store.writeDiary({ handle: "s2", content: "stale copy on a", source: "note", turn_id: null, work_key: null });
    await a.sync.hydrate("s1");
    await b.sync.hydrate("s2");
    a.held.add("s1");
    b.held.add("s2");
    leases = [
      { handle: "s1", node: "na", owner: "na:1", epoch: 3 },
      { handle: "s2", node: "nb", owner: "nb:1", epoch: 5 },
      { handle: "s3", node: "nc", owner: "nc:1", epoch: 1 },
    ];

    const own = await a.reads.seat("s1");
    expect(own).toMatchObject({ state: "ok", holder: { node: "na", epoch: 3 } });
    expect(own.memory!.diary.map((d) => d.content)).toEqual(["a's note"]);

    const remote = await a.reads.seat("s2");
    expect(remote).toMatchObject({ state: "ok", holder: { node: "nb", epoch: 5 } });
    expect(remote.memory!.diary.map((d) => d.content)).toEqual(["b's note"]);

    const silent = await a.reads.seat("s3");
    expect(silent.state).toBe("unavailable");
    expect(silent.memory).toBeNull();
    expect(silent.reason).toContain("did not answer");

    const nobody = await a.reads.seat("s4");
    expect(nobody).toMatchObject({ state: "no_holder", holder: null });
    expect(nobody.memory!.diary).toEqual([]);

    // A lease naming another incarnation of b (b restarted): b does not answer for it.
    leases[1] = { handle: "s2", node: "nb", owner: "nb:0", epoch: 4 };
    expect((await a.reads.seat("s2")).state).toBe("unavailable");
    leases[1] = { handle: "s2", node: "nb", owner: "nb:1", epoch: 5 };

    // A holder still hydrating the seat: unavailable, never empty.
    changelog.failReplays = true;
    const hydrating = b.sync.hydrate("s2"); // retries while the replays fail
    await Bun.sleep(50);
    const mid = await a.reads.seat("s2");
    expect(mid.state).toBe("unavailable");
    expect(mid.reason).toContain("hydrating");
    changelog.failReplays = false;
    await hydrating;
    expect((await a.reads.seat("s2")).state).toBe("ok");

    // The overview: one request per holding node, the silent one named in the coverage.
    const o = await a.reads.overview(["s1", "s2", "s3", "s4"]);
    expect(o.coverage).toEqual({ asked: ["nb", "nc"], answered: ["nb"], silent: ["nc"] });
    expect(o.seats.map((s) => [s.handle, s.state])).toEqual([
      ["s1", "ok"],
      ["s2", "ok"],
      ["s3", "unavailable"],
      ["s4", "no_holder"],
    ]);
    expect(o.seats[1]!.summary).toMatchObject({ counts: { diary: 1 }, newest_note: "b's note" });
  }, 30_000);

  test("turn transcripts: a page and one turn from the holder, never a stale copy elsewhere", async () => {
    const a = await node("ta", "ta:1");
    const b = await node("tb", "tb:1");
    await b.sync.hydrate("t2");
    b.held.add("t2");
    leases = [{ handle: "t2", node: "tb", owner: "tb:1", epoch: 2 }];
    for (let i = 1; i <= 3; i++) b.transcripts.insert(turn("t2", `turn-${i}`, `answer ${i}`), 2_000);
    // A copy on a (it held t2 before): not the answer.
    a.transcripts.insert(turn("t2", "old-on-a", "stale"), 2_000);

    const p1 = await a.reads.turns("t2", 2, null);
    expect(p1).toMatchObject({ state: "ok", holder: { node: "tb", epoch: 2 } });
    expect(p1.turns.map((t) => t.id)).toEqual(["turn-3", "turn-2"]);
    const p2 = await a.reads.turns("t2", 2, p1.next);
    expect(p2.turns.map((t) => t.id)).toEqual(["turn-1"]);
    expect(p2.next).toBeNull();

    const one = await a.reads.turn("t2", "turn-2");
    expect(one.state).toBe("ok");
    expect(one.turn!.rounds[0]!.text).toBe("answer 2");
    expect((await a.reads.turn("t2", "old-on-a")).turn).toBeNull();

    expect(await a.reads.turns("nobody", 5, null)).toMatchObject({ state: "no_holder", turns: [], next: null });

    // The tools a seat is offered are the holder's to say (its MCP servers run there).
    expect(await a.reads.tools("t2")).toMatchObject({ state: "ok", holder: { node: "tb" }, tools: ["tb_tool", "files__read"] });
    expect(await a.reads.tools("nobody")).toMatchObject({ state: "no_holder", tools: null });
  }, 30_000);
});
