// Approvals in one process, on the real turn engine, estate copy, ledger and the
// coordination twin: a covered call parks instead of running, a decision resumes the seat
// once on whichever holder takes it, a rejected or expired call never runs, a redelivered
// decision runs nothing twice, and the fence refuses a zombie holder's late write.
import { afterEach, describe, expect, test } from "bun:test";
import { FakeClock, systemClock, type Clock } from "../../src/clock.ts";
import { MemoryCoordination, StoreFaults } from "../../src/coord/index.ts";
import { isWrite, type StoreOp } from "../../src/coord/faults.ts";
import { memoryLogger } from "../../src/log.ts";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { CompletionLedger } from "../../src/agent/ledger.ts";
import { buildProviders } from "../../src/agent/providers/index.ts";
import { TurnEngine } from "../../src/agent/turn.ts";
import { defineTool, type Tool } from "../../src/agent/tools/contract.ts";
import { buildOrg } from "../../src/org/org.ts";
import { decodeTrigger, type Trigger } from "../../src/org/trigger.ts";
import { approvalsSchema } from "../../src/config/approvals.ts";
import { ApprovalGate } from "../../src/approvals/gate.ts";
import { ApprovalDesk } from "../../src/approvals/desk.ts";
import { ApprovalFenced, ApprovalStore } from "../../src/approvals/records.ts";
import { z } from "zod";
import { LocalEstate, mentionTrigger, rootCompany } from "../agent/support.ts";

const company = rootCompany();
const org = buildOrg(company);
const { log } = memoryLogger("warn");
const estates: LocalEstate[] = [];
afterEach(() => {
  for (const e of estates.splice(0)) e.close();
});

const providers = buildProviders(
  {
    s: {
      type: "scripted",
      rules: [
        { when: { trigger: "approval_decided" }, tool_calls: [], reply: "Heard: {{text}}" },
        { when: { text: "(?i)deploy" }, tool_calls: [{ tool: "deploy", args: { target: "prod" } }], reply: "I asked for approval to deploy." },
        { when: {}, tool_calls: [], reply: "ok" },
      ],
    },
  },
  systemClock,
);

function rig(clock: Clock = systemClock, rules: unknown[] = [{ name: "deploys", tools: ["deploy"] }]) {
  const estate = new LocalEstate(company);
  estates.push(estate);
  const coord = new MemoryCoordination({ clock, log });
  const faults = new StoreFaults(clock);
  const store = new ApprovalStore(coord.node({ faults }).slot("approvals"), clock);
  const ledger = new CompletionLedger(coord.node().slot("ledger"), clock, log);
  const events = new MemoryEventSink();
  const calls: Record<string, unknown>[] = [];
  const deploy: Tool = defineTool({
    name: "deploy",
    description: "Deploys",
    input: z.strictObject({ target: z.string() }),
    annotations: { readOnly: false, openWorld: true, estateWrite: false },
    run: async (args) => {
      calls.push(args);
      return { content: `deployed ${args.target}`, is_error: false };
    },
  });
  const config = approvalsSchema.parse({ expires_after_hours: 1, rules });
  const told: Trigger[] = [];
  /** Publishes refused from now on (a broker mid-election), counted down. */
  const refuse = { next: 0 };
  const desk = new ApprovalDesk({
    store,
    estate,
    clock,
    log,
    ledger,
    queue: {
      publish: async (_s, data) => {
        if (refuse.next > 0) {
          refuse.next--;
          throw new Error("503");
        }
        told.push((decodeTrigger(data) as { ok: true; trigger: Trigger }).trigger);
      },
    },
  });
  const engine = (node: string, o: { ledger?: boolean } = {}) =>
    new TurnEngine({
      org: () => org,
      node_id: node,
      clock,
      log,
      estate,
      queue: { publish: async () => ({ seq: 0, duplicate: false }) } as never,
      providerFor: () => providers.get("s"),
      extraTools: () => [deploy],
      ledger: o.ledger === false ? null : ledger,
      events,
      approvals: new ApprovalGate({ store, estate, config: () => config, org: () => org, owner: `${node}:owner`, node_id: node, clock, log, events }),
    });
  return { estate, store, desk, engine, calls, told, events, refuse, faults };
}

async function parkOne(r: ReturnType<typeof rig>) {
  const root = await r.estate.post("general", "founder", "@cto please deploy it");
  const report = await r.engine("a").run({ seat: "cto", epoch: 1, fence: () => true, triggers: [mentionTrigger("cto", "general", root, "founder in #general: @cto please deploy it")] });
  const { approvals } = await r.store.list("cto");
  return { root, report, rec: approvals[0]! };
}

describe("approvals in the turn", () => {
  test("a covered call parks: it does not run, the request is recorded and posted in the thread, the model is told", async () => {
    const r = rig();
    const { root, report, rec } = await parkOne(r);
    expect(report.outcome).toBe("completed");
    expect(r.calls).toEqual([]);
    expect(rec).toMatchObject({ seat: "cto", tool: "deploy", args: { target: "prod" }, rule: "deploys", state: "pending", posted: true, decision: null, owner_epoch: 1 });
    const thread = await r.estate.thread("general", root);
    expect(thread.filter((m) => m.body.includes(`Approval needed (${rec.id})`))).toHaveLength(1);
    expect(thread.some((m) => m.author === "cto" && m.body === "I asked for approval to deploy.")).toBe(true);
    expect(r.events.named("tool_parked")).toHaveLength(1);
  });

  test("the same turn run again (its node died) finds its request: one request, one post", async () => {
    const r = rig();
    const root = await r.estate.post("general", "founder", "@cto please deploy it");
    const t = mentionTrigger("cto", "general", root, "founder in #general: @cto please deploy it");
    await r.engine("a", { ledger: false }).run({ seat: "cto", epoch: 1, fence: () => true, triggers: [t] });
    await r.engine("b", { ledger: false }).run({ seat: "cto", epoch: 2, fence: () => true, triggers: [t] });
    expect((await r.store.list("cto")).approvals).toHaveLength(1);
    expect((await r.estate.thread("general", root)).filter((m) => m.body.includes("Approval needed"))).toHaveLength(1);
  });

  test("approved: the seat's next holder runs the call once and its turn reads the result; a redelivered decision runs nothing twice", async () => {
    const r = rig();
    const { root, rec } = await parkOne(r);
    const out = await r.desk.decide(rec, { verdict: "approved", by: "token:ana", reason: "ship it" });
    expect(out.decided).toBe(true);
    expect(r.told).toHaveLength(1);
    const decided = r.told[0]!;
    expect(decided).toMatchObject({ type: "approval_decided", seat: "cto", conversation: `chat:general:${root}`, refs: { channel: "general", thread_root: root } });
    expect(out.record.told).toBe(true);

    const report = await r.engine("b").run({ seat: "cto", epoch: 2, fence: () => true, triggers: [decided] });
    expect(report.outcome).toBe("completed");
    expect(r.calls).toEqual([{ target: "prod" }]);
    const done = (await r.store.get("cto", rec.id))!;
    expect(done).toMatchObject({ state: "done", owner_epoch: 2, result: { content: "deployed prod", is_error: false, ran: "yes" } });
    const replies = (await r.estate.thread("general", root)).filter((m) => m.author === "cto" && m.body.startsWith("Heard:"));
    expect(replies).toHaveLength(1);
    expect(replies[0]!.body).toContain("approved by token:ana");
    expect(replies[0]!.body).toContain("deployed prod");

    // The ledger skips the copy; and with no ledger at all, the record's state runs nothing.
    expect((await r.engine("b").run({ seat: "cto", epoch: 2, fence: () => true, triggers: [decided] })).outcome).toBe("skipped");
    await r.engine("c", { ledger: false }).run({ seat: "cto", epoch: 3, fence: () => true, triggers: [decided] });
    expect(r.calls).toHaveLength(1);
  });

  test("rejected: the call never runs and the turn reads the reason; a second decision is refused", async () => {
    const r = rig();
    const { rec } = await parkOne(r);
    await r.desk.decide(rec, { verdict: "rejected", by: "token:ana", reason: "not on a Friday" });
    const again = await r.desk.decide(rec, { verdict: "approved", by: "token:bo", reason: "" });
    expect(again.decided).toBe(false);
    expect(again.record.decision).toMatchObject({ verdict: "rejected", by: "token:ana" });
    await r.engine("b").run({ seat: "cto", epoch: 2, fence: () => true, triggers: [r.told[0]!] });
    expect(r.calls).toEqual([]);
    expect((await r.store.get("cto", rec.id))!.state).toBe("done");
    expect(r.events.named("turn_completed").at(-1)?.outcome).toBe("completed");
  });

  test("a request past its time expires on the sweep: the person is told in the thread, the seat by its trigger, the call never runs", async () => {
    const clock = new FakeClock(Date.now());
    const r = rig(clock);
    const { root, rec } = await parkOne(r);
    expect(await r.desk.sweep()).toEqual({ expired: 0, retold: 0, closed: 0, forgotten: 0 });
    await clock.advance(3_600_000);
    // Each unit (the listing, then each request) goes through the caller's step: the duty
    // stamps its watchdog and bounds it there.
    const units: string[] = [];
    expect(await r.desk.sweep((what, unit) => (units.push(what), unit()))).toEqual({ expired: 1, retold: 0, closed: 0, forgotten: 0 });
    expect(units).toEqual(["approvals listing", `approval ${rec.id}`]);
    expect(r.told.map((t) => t.event_id)).toEqual([`approval.${rec.id}.decided`]);
    expect((await r.estate.thread("general", root)).filter((m) => m.body.includes(`Request ${rec.id} (\`deploy\`) expired`))).toHaveLength(1);
    await r.engine("b").run({ seat: "cto", epoch: 2, fence: () => true, triggers: [r.told[0]!] });
    expect(r.calls).toEqual([]);
  });

  test("a decision written but not told (its node died) is told by the sweep, once", async () => {
    const clock = new FakeClock(Date.now());
    const r = rig(clock);
    const { rec } = await parkOne(r);
    await r.store.decide("cto", rec.id, { verdict: "approved", by: "token:ana", reason: "" });
    await clock.advance(31_000);
    expect((await r.desk.sweep()).retold).toBe(1);
    expect((await r.desk.sweep()).retold).toBe(0);
    expect(r.told).toHaveLength(1);
  });

  test("a decision told but never taken (its trigger lost) is told again after ten minutes, then not again for ten more", async () => {
    const clock = new FakeClock(Date.now());
    const r = rig(clock);
    const { rec } = await parkOne(r);
    await r.desk.decide(rec, { verdict: "approved", by: "token:ana", reason: "" });
    expect(r.told).toHaveLength(1);
    await clock.advance(9 * 60_000);
    expect((await r.desk.sweep()).retold).toBe(0);
    await clock.advance(60_000);
    expect((await r.desk.sweep()).retold).toBe(1);
    await clock.advance(60_000);
    expect((await r.desk.sweep()).retold).toBe(0);
    expect(r.told.map((t) => t.event_id)).toEqual([`approval.${rec.id}.decided`, `approval.${rec.id}.decided`]);
    // The copy resumes the seat once; a later copy runs nothing.
    await r.engine("b").run({ seat: "cto", epoch: 2, fence: () => true, triggers: [r.told[1]!] });
    expect(r.calls).toHaveLength(1);
    await clock.advance(10 * 60_000);
    expect((await r.desk.sweep()).retold).toBe(0);
  });

  // Two ways a decision's turn is recorded over while its request is unsettled: a defect
  // before the take (decided: the call never started), a person's stop between the take and
  // the call (running: started as far as the record knows). A copy of the trigger would be
  // skipped by the ledger, so retelling it would never end; the sweep closes it instead.
  for (const how of ["a defect before the take", "a person's stop as the call starts"] as const) {
    test(`a decision whose turn ended without settling it (${how}) is closed by the sweep, the person told, never retold`, async () => {
      const clock = new FakeClock(Date.now());
      const r = rig(clock);
      const { root, rec } = await parkOne(r);
      await r.desk.decide(rec, { verdict: "approved", by: "token:ana", reason: "" });
      const engine = r.engine("b");
      r.faults.onOp = (op) => {
        if (op.bucket !== "crewlet_approvals") return;
        r.faults.onOp = null;
        if (how === "a defect before the take") throw new Error("a defect (injected)");
        engine.stopSeat("cto", "token:bo");
      };
      const report = await engine.run({ seat: "cto", epoch: 2, fence: () => true, triggers: [r.told[0]!] });
      expect(report.outcome).toBe(how === "a defect before the take" ? "failed" : "stopped");
      expect(r.calls).toEqual([]);
      const left = (await r.store.get("cto", rec.id))!;
      expect(left.state).toBe(how === "a defect before the take" ? "decided" : "running");

      await clock.advance(10 * 60_000);
      expect(await r.desk.sweep()).toEqual({ expired: 0, retold: 0, closed: 1, forgotten: 0 });
      const ran = how === "a defect before the take" ? "no" : "unknown";
      expect((await r.store.get("cto", rec.id))!).toMatchObject({ state: "done", result: { is_error: true, ran } });
      const notices = (await r.estate.thread("general", root)).filter((m) => m.body.startsWith(`🔐 Request ${rec.id} (\`deploy\`) was approved by token:ana, but its turn ended (${report.outcome})`));
      expect(notices).toHaveLength(1);
      expect(notices[0]!.body).toContain(ran === "no" ? "it did not run" : "whether it ran is unknown");
      expect(r.told).toHaveLength(1);
      await clock.advance(10 * 60_000);
      expect(await r.desk.sweep()).toEqual({ expired: 0, retold: 0, closed: 0, forgotten: 0 });
    });
  }

  test("a rejected decision whose turn ended without settling it is closed with nothing to tell: nothing was to run", async () => {
    const clock = new FakeClock(Date.now());
    const r = rig(clock);
    const { root, rec } = await parkOne(r);
    await r.desk.decide(rec, { verdict: "rejected", by: "token:ana", reason: "no" });
    r.faults.onOp = (op) => {
      if (op.bucket !== "crewlet_approvals") return;
      r.faults.onOp = null;
      throw new Error("a defect (injected)");
    };
    await r.engine("b").run({ seat: "cto", epoch: 2, fence: () => true, triggers: [r.told[0]!] });
    await clock.advance(10 * 60_000);
    expect((await r.desk.sweep()).closed).toBe(1);
    expect((await r.store.get("cto", rec.id))!).toMatchObject({ state: "done", result: null });
    expect((await r.estate.thread("general", root)).filter((m) => m.body.includes("but its turn ended"))).toEqual([]);
  });

  test("a tell the broker refuses (an election) is tried again by the deciding node within seconds, before any sweep", async () => {
    const clock = new FakeClock(Date.now());
    const r = rig(clock);
    const { rec } = await parkOne(r);
    r.refuse.next = 2;
    const out = await r.desk.decide(rec, { verdict: "approved", by: "token:ana", reason: "" });
    expect(out).toMatchObject({ decided: true, record: { told: false } });
    await clock.advance(1_000);
    expect(r.told).toEqual([]);
    await clock.advance(2_000);
    await Bun.sleep(10);
    expect(r.told.map((t) => t.event_id)).toEqual([`approval.${rec.id}.decided`]);
    expect((await r.store.get("cto", rec.id))!.told).toBe(true);
  });

  test("a store that stays down while a decision is taken: the turn hands it back unrecorded, and its redelivery settles it", async () => {
    const r = rig();
    const { rec } = await parkOne(r);
    await r.desk.decide(rec, { verdict: "rejected", by: "token:ana", reason: "not today" });
    r.faults.unreachable = true;
    const first = await r.engine("b").run({ seat: "cto", epoch: 2, fence: () => true, triggers: [r.told[0]!] });
    expect(first).toMatchObject({ settle: "nak", outcome: "retry" });
    expect((await r.store.get("cto", rec.id).catch(() => null)) ?? "unreadable").toBe("unreadable");
    r.faults.unreachable = false;
    const again = await r.engine("b").run({ seat: "cto", epoch: 2, fence: () => true, triggers: [r.told[0]!] });
    expect(again).toMatchObject({ settle: "ack", outcome: "completed" });
    expect((await r.store.get("cto", rec.id))!.state).toBe("done");
  });

  for (const fault of ["fails", "lands with its answer lost"] as const) {
    test(`an approved call's result write that meets an election (${fault}) is ridden out: done, the call ran once`, async () => {
      const r = rig();
      const { rec } = await parkOne(r);
      await r.desk.decide(rec, { verdict: "approved", by: "token:ana", reason: "" });
      // The second write of the take (running → done) meets the election, three times over.
      let writes = 0;
      const resultWrite = (op: StoreOp) => isWrite(op) && ++writes >= 2;
      if (fault === "fails") r.faults.failNext(resultWrite, 3);
      else r.faults.loseNextAnswer(resultWrite, 1);
      const report = await r.engine("b").run({ seat: "cto", epoch: 2, fence: () => true, triggers: [r.told[0]!] });
      expect(report).toMatchObject({ settle: "ack", outcome: "completed" });
      expect(r.calls).toEqual([{ target: "prod" }]);
      expect((await r.store.get("cto", rec.id))!).toMatchObject({ state: "done", result: { ran: "yes" } });
    });
  }

  test("a call its holder died running is not run again: whether it ran is unknown, and the turn says so", async () => {
    const r = rig();
    const { rec } = await parkOne(r);
    await r.desk.decide(rec, { verdict: "approved", by: "token:ana", reason: "" });
    await r.store.mutate("cto", rec.id, { owner: "b:owner", epoch: 2 }, (c) => ({ ...c, state: "running" }));
    await r.engine("c").run({ seat: "cto", epoch: 3, fence: () => true, triggers: [r.told[0]!] });
    expect(r.calls).toEqual([]);
    expect((await r.store.get("cto", rec.id))!.result).toMatchObject({ ran: "unknown", is_error: true });
  });

  test("the fence: a holder whose epoch the record's outranks writes nothing", async () => {
    const r = rig();
    const { rec } = await parkOne(r);
    await r.store.mutate("cto", rec.id, { owner: "b:owner", epoch: 5 }, (c) => ({ ...c }));
    await expect(r.store.mutate("cto", rec.id, { owner: "a:owner", epoch: 4 }, (c) => ({ ...c, state: "running" }))).rejects.toBeInstanceOf(ApprovalFenced);
    expect((await r.store.get("cto", rec.id))!).toMatchObject({ state: "pending", owner_epoch: 5 });
  });

  test("no rules: nothing parks (today's behaviour)", async () => {
    const r = rig(systemClock, []);
    await parkOne(r);
    expect(r.calls).toEqual([{ target: "prod" }]);
    expect((await r.store.list()).approvals).toEqual([]);
  });
});
