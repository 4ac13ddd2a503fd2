// The sandbox-waiter duty: its judge as a table, and its ticks on the twins — a run whose
// supervisor stays silent past SILENT_MAX_MS is ended through the seat's control subject
// (its holder collects and tells it), one that answers is left alone, and a run told long
// ago is forgotten.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { encodedSlot } from "../../src/coord/bucket.ts";
import { MemoryBucket } from "../../src/coord/local.ts";
import { judgeRun, RUN_KEEP_MS, SandboxWaiter, SILENT_MAX_MS } from "../../src/duty/sandbox-waiter.ts";
import { silentLogger } from "../../src/log.ts";
import { ack } from "../../src/queue/contract.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { mailbox } from "../../src/queue/topics.ts";
import { decodeControl, type ControlEvent } from "../../src/sandbox/control.ts";
import { RunStore, type RunRecord } from "../../src/sandbox/runs.ts";

const NOW = 10_000_000_000;
const rec = (over: Partial<RunRecord> = {}): RunRecord => ({
  v: 1, id: "run-waiter01", seat: "engineer", engine: "e", task: "t", conversation: "work:ENG-1", from: "founder", owner: "a:1", owner_epoch: 1,
  node: "a", pid: 7, state: "running", question: null, answer: null, cancel: null, result: null, reported: false, created_at: NOW, updated_at: NOW, ...over,
});

describe("judgeRun", () => {
  test.each([
    ["running, never silent", rec(), null, NOW, "ask"],
    ["parked, silent a while", rec({ state: "parked" }), NOW, NOW + SILENT_MAX_MS - 1, "ask"],
    ["running, silent past the bound", rec(), NOW, NOW + SILENT_MAX_MS, "end"],
    ["starting: no supervisor to ask", rec({ state: "starting", pid: null }), NOW - SILENT_MAX_MS * 2, NOW, "none"],
    ["done, told, recent", rec({ state: "done", reported: true }), null, NOW + 1000, "none"],
    ["done, told long ago", rec({ state: "done", reported: true }), null, NOW + RUN_KEEP_MS, "forget"],
    ["done, never told: the seat's recovery tells it", rec({ state: "done", reported: false }), null, NOW + RUN_KEEP_MS, "none"],
  ] as const)("%s → %s", (_n, r, silent, now, want) => {
    expect(judgeRun(r, silent, now).kind).toBe(want);
  });
});

describe("SandboxWaiter ticks", () => {
  test("a silent supervisor's run is ended through the control subject, once; an answering one is left; a told one forgotten", async () => {
    const clock = new FakeClock(NOW);
    const queue = new MemoryQueue({ clock, log: silentLogger });
    await queue.ensureStreams();
    const store = new RunStore(encodedSlot(new MemoryBucket("crewlet_runs", 0, clock)), clock);
    await store.create(rec({ id: "run-silent01" }));
    await store.create(rec({ id: "run-alive001" }));
    await store.create(rec({ id: "run-history1", state: "done", reported: true, updated_at: NOW - RUN_KEEP_MS }));
    const heard: ControlEvent[] = [];
    const mb = mailbox("engineer", "control");
    const att = await queue.attach(mb.subject, mb.group, async (d) => {
      const e = decodeControl(d.data);
      if (e.ok) heard.push(e.value);
      return ack();
    });
    const waiter = new SandboxWaiter({ store, queue, ping: async (id) => id === "run-alive001", clock, log: silentLogger });
    const ctx = { epoch: 1, signal: new AbortController().signal, beat: () => undefined };
    expect(await waiter.tick(ctx)).toBe("runs: 2 asked, 1 silent, 0 ended, 1 forgotten");
    expect(await store.get("engineer", "run-history1")).toBeNull();
    for (let t = 0; t < SILENT_MAX_MS / 60_000; t++) {
      await clock.advance(60_000);
      await waiter.tick(ctx);
    }
    await clock.advance(10);
    expect(heard.map((e) => [e.kind, e.run_id])).toEqual([["finished", "run-silent01"]]);
    const e = heard[0]!;
    expect(e.kind === "finished" && e.result.reason).toContain("stopped answering");
    // The record is the holder's to write: the waiter only offered the result.
    expect((await store.get("engineer", "run-silent01"))!.state).toBe("running");
    await att.detach();
  });
});
