// The seat's side of its coding runs, in one process on the in-memory twins: two holders
// of one seat (node A at an epoch, node B at a later one) over one queue and one run store,
// twin boxes under the real supervisor logic. The spec's promises as cases: a parked
// question is posted once and answered once; the result is told as one turn, whoever holds
// the seat; a zombie's writes bounce and its control deliveries go back to the broker; the
// acquire step reports a result its predecessor took and never told.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { systemClock } from "../../src/clock.ts";
import type { Company } from "../../src/config/company.ts";
import { companySchema } from "../../src/config/company.ts";
import { encodedSlot } from "../../src/coord/bucket.ts";
import { MemoryBucket } from "../../src/coord/local.ts";
import { StoreUnavailable, type KvSlot } from "../../src/coord/contract.ts";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { memoryLogger } from "../../src/log.ts";
import { decodeTrigger, type Trigger } from "../../src/org/trigger.ts";
import { ack, type Attachment } from "../../src/queue/contract.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { mailbox } from "../../src/queue/topics.ts";
import { encodeControl } from "../../src/sandbox/control.ts";
import type { SupervisorFile } from "../../src/sandbox/launch.ts";
import { RunStore, runKey, type RunRecord } from "../../src/sandbox/runs.ts";
import { runTrigger, SeatRuns } from "../../src/sandbox/seat-runs.ts";
import { conversationTarget } from "../../src/agent/conversation-post.ts";
import { Supervisor } from "../../src/sandbox/supervisor.ts";
import { TwinBoxProvider } from "../../src/sandbox/twin.ts";
import { decodeRun } from "../../src/sandbox/runs.ts";
import { LocalEstate, mentionTrigger } from "../agent/support.ts";

const company: Company = companySchema.parse({
  name: "Runs Co",
  providers: { llm: { s: { type: "scripted" } }, sandbox: { type: "local", isolation: "none", engines: { twin: { command: ["twin", "{task}"] } } } },
  default_llm: "s",
  roles: [
    { name: "Engineer", handle: "engineer", sandbox: {} },
    { name: "Founder", handle: "founder", kind: "human" },
  ],
});

const until = async (what: string, ok: () => boolean | Promise<boolean>, ms = 10_000) => {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(10);
  }
};

let queue: MemoryQueue;
let slot: KvSlot;
let store: RunStore;
let estate: LocalEstate;
let inbox: Trigger[];
let inboxAtt: Attachment;
const supervisors: Promise<unknown>[] = [];

/** A node's SeatRuns; its launches run a twin box under the real supervisor, in process. */
function node(id: string, events = new MemoryEventSink(), companyNow: () => Company = () => company) {
  const { log } = memoryLogger("warn");
  const runs = new SeatRuns({
    node_id: id,
    owner: `${id}:1`,
    storeDir: `/nonexistent/${id}`,
    store,
    runs_bucket: "crewlet_runs",
    queue,
    estate,
    company: companyNow,
    broker: () => ({ servers: ["nats://127.0.0.1:1"] }),
    clock: systemClock,
    log,
    events,
    launch: (_dir: string, f: SupervisorFile) => {
      supervisors.push(superviseInProcess(f));
      return 4242;
    },
  });
  return { runs, events };
}

async function superviseInProcess(f: SupervisorFile): Promise<unknown> {
  const box = await new TwinBoxProvider().open(f.spec, "/twin");
  const { log } = memoryLogger("warn");
  const sup = new Supervisor({ seat: f.seat, run_id: f.run_id, control_subject: f.control_subject }, box, {
    publish: async (subject, data, msgId) => void (await queue.publish(subject, data, { msgId })),
    watchRun: async (onRecord) => {
      const w = await slot.watch((e) => {
        if (e.operation !== "put") return onRecord(null);
        const d = decodeRun(e.value);
        if (d.ok) onRecord(d.value);
      }, { key: runKey(f.seat, f.run_id), includeCurrent: true });
      return w;
    },
  }, systemClock, log);
  return sup.supervise();
}

const ctx = (epoch: number, conversation: string) => ({ seat: "engineer", epoch, turn_id: "t1", signal: new AbortController().signal, conversation, from: "founder" });

async function startRun(runs: SeatRuns, epoch: number, task: string, conversation: string): Promise<string> {
  const res = await runs.tool().call({ task }, ctx(epoch, conversation));
  expect(res.is_error).toBe(false);
  return (JSON.parse(res.content) as { run_id: string }).run_id;
}

const get = async (id: string) => (await store.get("engineer", id))!;

beforeEach(async () => {
  const { log } = memoryLogger("warn");
  queue = new MemoryQueue({ clock: systemClock, log });
  await queue.ensureStreams();
  slot = encodedSlot(new MemoryBucket("crewlet_runs", 0, systemClock));
  store = new RunStore(slot, systemClock);
  estate = new LocalEstate(company);
  inbox = [];
  const mb = mailbox("engineer", "inbox");
  inboxAtt = await queue.attach(mb.subject, mb.group, async (d) => {
    const t = decodeTrigger(d.data);
    if (t.ok) inbox.push(t.trigger);
    return ack();
  });
});

afterEach(async () => {
  await inboxAtt?.detach();
  await Promise.allSettled(supervisors.splice(0));
  estate.close();
});

describe("a run and its seat", () => {
  test("a parked question is posted in the thread once, a reply answers it once, and the result is one turn", async () => {
    const a = node("a");
    await a.runs.prepare({ handle: "engineer", epoch: 1 });
    const root = await estate.post("general", "founder", "@engineer build it");
    const conversation = `chat:general:${root}`;
    const id = await startRun(a.runs, 1, "ask:Which colour?;write:c.txt=$ANSWER;commit:paint", conversation);
    await until("the question posted", async () => (await get(id)).question?.posted === true);
    const thread = await estate.thread("general", root);
    expect(thread.filter((m) => m.body.includes("Which colour?"))).toHaveLength(1);

    const replyId = await estate.post("general", "founder", "@engineer blue", root);
    const reply: Trigger = { ...mentionTrigger("engineer", "general", replyId, "founder in #general: @engineer blue"), conversation, created_at: Date.now() };
    expect(await a.runs.takeAnswers("engineer", 1, [reply])).toEqual([{ event_id: reply.event_id, run: id }]);
    // A copy of the same reply (a redelivery) answers nothing a second time.
    expect(await a.runs.takeAnswers("engineer", 1, [reply])).toEqual([]);

    await until("the result told", () => inbox.length === 1 && true);
    const done = await get(id);
    expect(done).toMatchObject({ state: "done", reported: true, result: { outcome: "succeeded" } });
    expect(done.result!.diff).toContain("c.txt");
    // The run was handed the reply's own words, not the trigger's summary of them.
    expect(done.result!.diff).toContain("+blue");
    expect(done.answer).toMatchObject({ seq: 1, text: "blue", by: "founder", message_id: replyId });
    expect(inbox[0]).toMatchObject({ type: "sandbox_run", event_id: `run.${id}.done`, conversation, refs: { channel: "general", thread_root: root } });
    expect(a.events.events.map((e) => e.name)).toEqual(["sandbox_run_started", "sandbox_run_parked", "sandbox_answer_given", "sandbox_run_finished"]);
    await a.runs.release("engineer");
  });

  test("a question from work that came from no thread (a colleague's ask) is asked in a new #general thread, and answered there", async () => {
    const a = node("a");
    await a.runs.prepare({ handle: "engineer", epoch: 1 });
    const id = await startRun(a.runs, 1, "ask:Which branch?;print:$ANSWER", "a2a:ex-1");
    await until("the question posted", async () => (await get(id)).question?.posted === true);
    const where = (await get(id)).question!.where!;
    expect(where).toBe(`chat:general:run-${id}-q1`);
    const root = where.split(":")[2]!;
    const thread = await estate.thread("general", root);
    expect(thread.map((m) => m.body)).toEqual([expect.stringContaining("(for work in a2a:ex-1) asks: Which branch?")]);
    const replyId = await estate.post("general", "founder", "@engineer main", root);
    const reply: Trigger = { ...mentionTrigger("engineer", "general", replyId, "founder: @engineer main"), conversation: where, created_at: Date.now() };
    expect(await a.runs.takeAnswers("engineer", 1, [reply])).toEqual([{ event_id: reply.event_id, run: id }]);
    await until("told", () => inbox.length === 1);
    expect((await get(id)).result?.summary).toBe("main");
    await a.runs.release("engineer");
  });

  test("a run that fails has its reason told in the thread by the engine itself, once, beside the seat's turn", async () => {
    const a = node("a");
    await a.runs.prepare({ handle: "engineer", epoch: 1 });
    const root = await estate.post("general", "founder", "@engineer break it");
    const id = await startRun(a.runs, 1, "print:tests are broken;exit:3", `chat:general:${root}`);
    await until("told", () => inbox.length === 1);
    const notices = (await estate.thread("general", root)).filter((m) => m.author === "engineer" && m.body.startsWith("⚠ "));
    expect(notices.map((m) => m.body)).toEqual([`⚠ My coding run ${id} (twin) failed: the engine exited with code 3: tests are broken`]);
    expect(a.events.events.filter((e) => e.name === "sandbox_run_failed")).toHaveLength(1);
    await a.runs.release("engineer");
  });

  test("the seat moves while its run works: the new holder collects, the old one's writes bounce", async () => {
    const a = node("a");
    const b = node("b");
    await a.runs.prepare({ handle: "engineer", epoch: 1 });
    const id = await startRun(a.runs, 1, "sleep:0.3;print:done", "work:ENG-1");
    // A releases (the seat moved); B acquires at a later epoch and takes the run over.
    await a.runs.release("engineer");
    await b.runs.prepare({ handle: "engineer", epoch: 2 });
    expect(await get(id)).toMatchObject({ owner: "b:1", owner_epoch: 2 });
    await until("the result told", () => inbox.length === 1);
    expect(await get(id)).toMatchObject({ state: "done", reported: true, owner: "b:1" });
    expect(b.events.events.filter((e) => e.name === "sandbox_run_finished")).toHaveLength(1);
    expect(a.events.events.filter((e) => e.name === "sandbox_run_finished")).toHaveLength(0);
    // A zombie A (still thinking it holds epoch 1) answering or cancelling is refused.
    await expect(store.mutate("engineer", id, { owner: "a:1", epoch: 1 }, (r) => ({ ...r, reported: false }))).rejects.toThrow(/epoch 2/);
    await b.runs.release("engineer");
  });

  test("a zombie holder's control delivery goes back to the broker; a redelivered result tells the seat nothing twice", async () => {
    const a = node("a");
    await a.runs.prepare({ handle: "engineer", epoch: 1 });
    const id = await startRun(a.runs, 1, "ask:ok?", "work:ENG-2");
    await until("parked", async () => (await get(id)).state === "parked");
    // A peer took the seat at epoch 5 meanwhile (its acquire step took the run over).
    await store.mutate("engineer", id, { owner: "c:1", epoch: 5 }, (r) => ({ ...r }));
    const result = { outcome: "succeeded" as const, exit_code: 0, reason: "", output_tail: "", output_bytes: 0, diff: "", commits: [], summary: "ok" };
    const finished = encodeControl({ kind: "finished", run_id: id, seat: "engineer", result });
    const ctl = mailbox("engineer", "control").subject;
    await queue.publish(ctl, finished, { msgId: "x1" });
    // A's handler defers it (quiesced): nothing written, nothing told.
    await Bun.sleep(100);
    expect((await get(id)).state).toBe("parked");
    expect(inbox).toHaveLength(0);
    await a.runs.release("engineer");

    // The real holder (epoch 5) collects it, and a second copy changes nothing.
    const c = node("c");
    await c.runs.prepare({ handle: "engineer", epoch: 5 });
    await until("told", () => inbox.length === 1);
    await queue.publish(ctl, finished, { msgId: "x2" });
    await Bun.sleep(150);
    expect(inbox).toHaveLength(1);
    expect(c.events.events.filter((e) => e.name === "sandbox_run_finished")).toHaveLength(1);
    // The twin box is still parked on its question: deleting the record ends it.
    await slot.delete(runKey("engineer", id));
    await c.runs.release("engineer");
  });

  test("a result the dead last holder's pull took is reclaimed by the next holder's acquire step and told", async () => {
    const now = Date.now();
    await store.create({
      v: 1, id: "run-stranded1", seat: "engineer", engine: "twin", task: "t", conversation: "work:ENG-4", from: "founder",
      owner: "a:1", owner_epoch: 1, node: "a", pid: 1, state: "running", question: null, answer: null, cancel: null, result: null, reported: false, created_at: now, updated_at: now,
    });
    // The last holder's pull takes the result and its process dies holding it (never settled).
    const ctl = mailbox("engineer", "control");
    let taken = false;
    const dead = await queue.attach(ctl.subject, ctl.group, () => {
      taken = true;
      return new Promise(() => undefined);
    });
    const result = { outcome: "succeeded" as const, exit_code: 0, reason: "", output_tail: "", output_bytes: 0, diff: "", commits: [], summary: "done" };
    await queue.publish(ctl.subject, encodeControl({ kind: "finished", run_id: "run-stranded1", seat: "engineer", result }), { msgId: "run-run-stranded1-done" });
    await until("the dead holder's pull took it", () => taken);
    const b = node("b");
    await b.runs.prepare({ handle: "engineer", epoch: 2 });
    await until("told", () => inbox.length === 1);
    expect(await get("run-stranded1")).toMatchObject({ state: "done", reported: true, owner_epoch: 2 });
    await b.runs.release("engineer");
    void dead.detach();
  });

  test("the acquire step tells a result its last holder took and never told, once", async () => {
    const now = Date.now();
    const taken: RunRecord = {
      v: 1, id: "run-recover1", seat: "engineer", engine: "twin", task: "t", conversation: "work:ENG-3", from: "founder",
      owner: "a:1", owner_epoch: 1, node: "a", pid: 1, state: "done", question: null, answer: null, cancel: null,
      result: { outcome: "failed", exit_code: 2, reason: "the engine exited with code 2", output_tail: "boom", output_bytes: 4, diff: "", commits: [], summary: "boom" },
      reported: false, created_at: now, updated_at: now,
    };
    await store.create(taken);
    const b = node("b");
    await b.runs.prepare({ handle: "engineer", epoch: 2 });
    await until("told", () => inbox.length === 1);
    expect(inbox[0]!.text).toContain("failed: the engine exited with code 2");
    expect(await get("run-recover1")).toMatchObject({ reported: true, owner_epoch: 2 });
    expect(b.events.events.map((e) => e.name)).toEqual(["sandbox_run_failed"]);
    await b.runs.release("engineer");
    const c = node("c");
    await c.runs.prepare({ handle: "engineer", epoch: 3 });
    await Bun.sleep(100);
    expect(inbox).toHaveLength(1);
    await c.runs.release("engineer");
  });

  test("a run whose first record's write lands with its answer lost (an election) starts once and is told once", async () => {
    let lose = 1;
    const lossy = new Proxy(slot, {
      get(target, prop) {
        if (prop === "create") {
          return async (...args: Parameters<KvSlot["create"]>) => {
            const landed = await target.create(...args);
            if (lose-- > 0) throw new StoreUnavailable("create crewlet_runs: TIMEOUT (answer lost, injected)");
            return landed;
          };
        }
        const v = Reflect.get(target, prop) as unknown;
        return typeof v === "function" ? v.bind(target) : v;
      },
    });
    store = new RunStore(lossy, systemClock);
    const a = node("a");
    await a.runs.prepare({ handle: "engineer", epoch: 1 });
    const root = await estate.post("general", "founder", "@engineer build it");
    const id = await startRun(a.runs, 1, "write:a.txt=1;commit:one", `chat:general:${root}`);
    await until("the result told", () => inbox.length === 1);
    const { runs } = await store.list("engineer");
    expect(runs.map((r) => [r.id, r.state])).toEqual([[id, "done"]]);
    expect(a.events.events.filter((e) => e.name === "sandbox_run_started")).toHaveLength(1);
    await a.runs.release("engineer");
  });

  test("a turn that runs again (its holder died before its record landed) gets the run it started, not a second", async () => {
    const { runs, events } = node("a");
    await runs.prepare({ handle: "engineer", epoch: 1 });
    const asked = { ...ctx(1, "chat:general:m1"), cause: "wake.chat.m1.engineer" };
    const first = await runs.tool().call({ task: "print:hi" }, asked);
    expect(first.is_error).toBe(false);
    const { run_id } = JSON.parse(first.content) as { run_id: string };
    // The same turn on the next holder: the same trigger, the same task.
    await runs.release("engineer");
    const b = node("b", events);
    await b.runs.prepare({ handle: "engineer", epoch: 2 });
    const again = await b.runs.tool().call({ task: "print:hi" }, { ...asked, epoch: 2, turn_id: "t2" });
    expect(again.is_error).toBe(false);
    expect(JSON.parse(again.content)).toMatchObject({ run_id, already_started: true });
    expect(events.events.filter((e) => e.name === "sandbox_run_started")).toHaveLength(1);
    // Another message, or another task, is another run.
    const other = await b.runs.tool().call({ task: "print:hi" }, { ...asked, epoch: 2, cause: "wake.chat.m2.engineer" });
    expect((JSON.parse(other.content) as { run_id: string }).run_id).not.toBe(run_id);
    expect(events.events.filter((e) => e.name === "sandbox_run_started")).toHaveLength(2);
    await b.runs.release("engineer");
  });

  test("a seat without a sandbox gets no tool answer but a clear refusal, and bad tool input names its field", async () => {
    const a = node("a");
    const res = await a.runs.tool().call({ task: "x" }, { ...ctx(1, "work:ENG-1"), seat: "founder" });
    expect(res).toMatchObject({ is_error: true });
    expect(res.content).toContain("roles[].sandbox");
    const bad = await a.runs.tool().call({ task: "" }, ctx(1, "work:ENG-1"));
    expect(bad.content).toContain("task");
    const engine = await a.runs.tool().call({ task: "x", engine: "nope" }, ctx(1, "work:ENG-1"));
    expect(engine.content).toContain('engine "nope"');
  });
});

describe("a sandbox that arrives with an apply", () => {
  test("a seat held before its sandbox was configured attaches its control subject with its first run, and is told the result", async () => {
    let current: Company = companySchema.parse({ ...JSON.parse(JSON.stringify(company)), providers: { llm: company.providers.llm }, roles: [{ name: "Engineer", handle: "engineer" }] });
    const a = node("a", new MemoryEventSink(), () => current);
    await a.runs.prepare({ handle: "engineer", epoch: 1 });
    expect(a.runs.mayRun("engineer")).toBe(false);
    current = company;
    const id = await startRun(a.runs, 1, "print:late", "work:ENG-9");
    await until("told", () => inbox.length === 1);
    expect(await get(id)).toMatchObject({ state: "done", reported: true });
    // Not held here (a stale grant): nothing starts.
    const stale = await a.runs.tool().call({ task: "print:x" }, ctx(7, "work:ENG-9"));
    expect(stale.content).toContain("not held here");
    await a.runs.release("engineer");
  });
});

describe("pure parts", () => {
  test.each([
    ["chat:general:abc", { kind: "chat", channel: "general", root: "abc" }],
    ["work:ENG-7", { kind: "work", key: "ENG-7" }],
    ["a2a:x", null],
  ])("conversation %s → %j", (c, want) => {
    expect(conversationTarget(c)).toEqual(want as ReturnType<typeof conversationTarget>);
  });

  test("a run's result trigger is one per run and names the thread, not a message", () => {
    const rec = { id: "run-abcdefgh", seat: "engineer", conversation: "chat:general:m1", engine: "e", task: "t", result: null } as unknown as RunRecord;
    const t = runTrigger(rec, 5);
    expect(t).toMatchObject({ type: "sandbox_run", event_id: "run.run-abcdefgh.done", refs: { channel: "general", thread_root: "m1" } });
    expect(t.refs.message_id).toBeUndefined();
  });
});
