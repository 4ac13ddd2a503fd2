// The run record: its one schema, the owner_epoch fence (a table), and the store's writes
// on the coordination twin — a zombie's late write bounces, two writers never both win a
// flip, a person's cancel leaves the owner's fields alone.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { encodedSlot } from "../../src/coord/bucket.ts";
import { CasConflict } from "../../src/coord/contract.ts";
import { CAS_ATTEMPTS, CAS_RETRY_BASE_MS } from "../../src/coord/fenced-records.ts";
import { MemoryBucket } from "../../src/coord/local.ts";
import { decodeRun, encodeRun, fenceRefuses, isLive, RunFenced, RunNotFound, RunStore, type RunRecord } from "../../src/sandbox/runs.ts";

function record(over: Partial<RunRecord> = {}): RunRecord {
  return {
    v: 1, id: "run-00000001", seat: "engineer", engine: "fake", task: "fix the build", conversation: "chat:general:m1", from: "founder",
    owner: "node-a:1", owner_epoch: 3, node: "node-a", pid: null, state: "running",
    question: null, answer: null, cancel: null, result: null, reported: false, created_at: 1, updated_at: 1, ...over,
  };
}

function store() {
  const clock = new FakeClock(1_000);
  return { clock, runs: new RunStore(encodedSlot(new MemoryBucket("crewlet_runs", 0, clock)), clock) };
}

describe("the fence", () => {
  test.each([
    [3, 2, true],
    [3, 3, false],
    [3, 4, false],
    [1, 1, false],
  ])("record at epoch %d, writer at %d: refused=%p", (rec, writer, refused) => {
    expect(fenceRefuses({ owner_epoch: rec }, { owner: "x", epoch: writer })).toBe(refused);
  });
});

describe("the record's one schema", () => {
  test("round-trips, and a bad record names its field", () => {
    const r = record();
    const d = decodeRun(encodeRun(r));
    expect(d.ok && d.value).toEqual(r);
    const bad = decodeRun(new TextEncoder().encode(JSON.stringify({ ...r, owner_epoch: 0 })));
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.error).toContain("owner_epoch");
    expect(() => encodeRun({ ...r, task: "x".repeat(17 * 1024) })).toThrow();
  });

  test.each([
    ["running", false, true],
    ["parked", false, true],
    ["done", false, true],
    ["done", true, false],
  ] as const)("a %s run, reported=%p, is live: %p", (state, reported, live) => {
    expect(isLive(record({ state, reported }))).toBe(live);
  });
});

describe("RunStore", () => {
  test("a write takes the writer's owner and epoch; a zombie's late write is refused", async () => {
    const { runs } = store();
    await runs.create(record());
    const taken = await runs.mutate("engineer", "run-00000001", { owner: "node-b:1", epoch: 5 }, (r) => ({ ...r }));
    expect(taken).toMatchObject({ owner: "node-b:1", owner_epoch: 5 });
    await expect(runs.mutate("engineer", "run-00000001", { owner: "node-a:1", epoch: 3 }, (r) => ({ ...r, state: "done" }))).rejects.toBeInstanceOf(RunFenced);
    expect((await runs.get("engineer", "run-00000001"))!.state).toBe("running");
    await expect(runs.remove("engineer", "run-00000001", { owner: "node-a:1", epoch: 4 })).rejects.toBeInstanceOf(RunFenced);
  });

  test("two writers at one epoch race a flip: exactly one wins", async () => {
    const { runs, clock } = store();
    await runs.create(record());
    const flip = (tag: string) =>
      runs.mutate("engineer", "run-00000001", { owner: "node-a:1", epoch: 3 }, (r) => (r.state === "done" ? null : { ...r, state: "done", engine: tag }));
    const racing = Promise.all([flip("a"), flip("b"), flip("c")]);
    let raced = false;
    void racing.finally(() => (raced = true));
    // A loser pauses before its re-read (CAS_RETRY_BASE_MS, doubling): time passes for it.
    while (!raced) await clock.advance(CAS_RETRY_BASE_MS);
    const seen = await racing;
    // Every writer reads back the one flip that landed: the losers re-read and wrote nothing.
    expect(seen.every((w) => w.state === "done")).toBe(true);
    expect(new Set(seen.map((w) => w.engine)).size).toBe(1);
    expect((await runs.get("engineer", "run-00000001"))!.engine).toBe(seen[0]!.engine);
  });

  test("a loss while the winner's write is still in flight: the re-read waits, doubling, and the write lands within CAS_ATTEMPTS", async () => {
    for (const [losses, lands] of [[CAS_ATTEMPTS - 1, true], [CAS_ATTEMPTS, false]] as const) {
      const clock = new FakeClock(1_000);
      const slot = encodedSlot(new MemoryBucket("crewlet_runs", 0, clock));
      let refused = 0;
      // The leader refuses (10164) while another proposal for the key is in flight.
      const inFlight = { ...slot, bucket: slot.bucket, update: (k: string, v: Uint8Array, rev: number) => (refused < losses ? (refused++, Promise.reject(new CasConflict(k, rev))) : slot.update(k, v, rev)) };
      const runs = new RunStore(inFlight, clock);
      await runs.create(record());
      const started = clock.now();
      const flip = runs.mutate("engineer", "run-00000001", { owner: "node-a:1", epoch: 3 }, (r) => ({ ...r, state: "done" }));
      let outcome: unknown = null;
      void flip.then((r) => (outcome = r.state), (err) => (outcome = err));
      while (outcome === null) await clock.advance(CAS_RETRY_BASE_MS);
      if (lands) expect(outcome).toBe("done");
      else expect(outcome).toBeInstanceOf(CasConflict);
      // Each loss but a final one paused before its re-read: 50, 100, 200 … ms.
      const paused = Array.from({ length: Math.min(losses, CAS_ATTEMPTS - 1) }, (_, i) => CAS_RETRY_BASE_MS * 2 ** i).reduce((a, b) => a + b, 0);
      expect(clock.now() - started).toBeGreaterThanOrEqual(paused);
      expect(clock.now() - started).toBeLessThan(paused + 2 * CAS_RETRY_BASE_MS);
    }
  });

  test("a change that needs no write writes nothing", async () => {
    const { runs, clock } = store();
    await runs.create(record());
    clock.advance(500);
    const same = await runs.mutate("engineer", "run-00000001", { owner: "node-a:1", epoch: 3 }, () => null);
    expect(same.updated_at).toBe(1);
    await expect(runs.mutate("engineer", "run-nope0000", { owner: "x", epoch: 9 }, (r) => r)).rejects.toBeInstanceOf(RunNotFound);
  });

  test("a person's cancel is written beside the owner's fields, and not on a finished run", async () => {
    const { runs } = store();
    await runs.create(record());
    const asked = await runs.requestCancel("engineer", "run-00000001", "token:ops", "not needed");
    expect(asked).toMatchObject({ cancel: { reason: "not needed", by: "token:ops" }, owner: "node-a:1", owner_epoch: 3 });
    await runs.mutate("engineer", "run-00000001", { owner: "node-a:1", epoch: 3 }, (r) => ({ ...r, state: "done" }));
    expect(await runs.requestCancel("engineer", "run-00000001", "token:ops", "again")).toBeNull();
  });

  test("list and find: per seat, by id, oldest first, an unreadable record named", async () => {
    const clock = new FakeClock(1_000);
    const slot = encodedSlot(new MemoryBucket("crewlet_runs", 0, clock));
    const runs = new RunStore(slot, clock);
    await runs.create(record({ id: "run-00000002", created_at: 5 }));
    await runs.create(record({ id: "run-00000001", created_at: 2 }));
    await runs.create(record({ id: "run-00000003", seat: "cto" }));
    await slot.put("engineer.run-broken01", new TextEncoder().encode("{"));
    const mine = await runs.list("engineer");
    expect(mine.runs.map((r) => r.id)).toEqual(["run-00000001", "run-00000002"]);
    expect(mine.invalid.map((i) => i.key)).toEqual(["engineer.run-broken01"]);
    expect((await runs.list()).runs).toHaveLength(3);
    expect((await runs.find("run-00000003"))?.seat).toBe("cto");
    expect(await runs.find("run-00000009")).toBeNull();
  });
});
