// The scheduler duty on the in-memory broker and coordination store: one trigger per due
// instant, whichever of two racing nodes ticks; one catch-up for a gap, logged; a fire whose
// node died mid-way taken over; disabled and re-enabled schedules fire no past; time zones.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { companySchema, type Company } from "../../src/config/company.ts";
import { MemoryCoordination } from "../../src/coord/index.ts";
import { memoryLogger } from "../../src/log.ts";
import { decodeTrigger, type Trigger } from "../../src/org/trigger.ts";
import { ack } from "../../src/queue/contract.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { mailbox } from "../../src/queue/topics.ts";
import { cursorKey, dueBetween, encodeJson, fireKey } from "../../src/duty/schedule.ts";
import { FIRE_STALE_MS, Scheduler, scheduleStatuses } from "../../src/duty/scheduler.ts";
import { cronOf } from "../../src/config/schedules.ts";
import { DutyRunner } from "../../src/duty/runner.ts";

const START = Date.UTC(2026, 0, 5, 10, 0, 0, 0);

function company(schedules: unknown[], timezone = "UTC"): Company {
  return companySchema.parse({ name: "Acme", timezone, roles: [{ name: "Ops", handle: "ops" }, { name: "Boss", handle: "boss", kind: "human" }], schedules });
}

async function setup(c: Company) {
  const clock = new FakeClock(START);
  const { log, sink } = memoryLogger("debug", clock);
  const coord = new MemoryCoordination({ clock, log });
  const queue = new MemoryQueue({ clock, log });
  await queue.ensureStreams();
  const inbox = mailbox("ops", "inbox");
  await queue.ensureMailbox(inbox.subject, inbox.group);
  const got: Trigger[] = [];
  await queue.attach(inbox.subject, inbox.group, async (d) => {
    const t = decodeTrigger(d.data);
    if (t.ok) got.push(t.trigger);
    return ack();
  });
  let current = c;
  const scheduler = (owner: string) =>
    new Scheduler({ owner, fires: coord.node().slot("fires"), queue, company: () => current, clock, log });
  return { clock, sink, coord, queue, got, scheduler, setCompany: (n: Company) => (current = n), log };
}

const ctx = (epoch = 1) => ({ epoch, signal: new AbortController().signal, beat: () => undefined });

describe("schedules at load", () => {
  test("a bad cron, zone, seat or duplicate id is refused naming the field", () => {
    const bad = (schedules: unknown[], tz?: string) => {
      const r = companySchema.safeParse({ name: "A", ...(tz ? { timezone: tz } : {}), roles: [{ name: "Ops", handle: "ops" }, { name: "Boss", handle: "boss", kind: "human" }], schedules });
      expect(r.success).toBe(false);
      return r.error!.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("\n");
    };
    expect(bad([{ id: "a", cron: "61 * * * *", seat: "ops", prompt: "x" }])).toContain("schedules.0.cron");
    expect(bad([{ id: "a", cron: "* * * * *", timezone: "Mars/Olympus", seat: "ops", prompt: "x" }])).toContain("schedules.0.timezone");
    expect(bad([{ id: "a", cron: "* * * * *", seat: "nobody", prompt: "x" }])).toContain("schedules.0.seat: unknown handle");
    expect(bad([{ id: "a", cron: "* * * * *", seat: "boss", prompt: "x" }])).toContain("human seat");
    expect(bad([{ id: "a", cron: "* * * * *", seat: "ops", prompt: "x" }, { id: "a", cron: "* * * * *", seat: "ops", prompt: "y" }])).toContain("schedules.1.id: duplicate");
    expect(bad([], "Nowhere/X")).toContain("timezone");
    expect(bad([{ id: "a", cron: "* * * * * * *", seat: "ops", prompt: "x" }])).toContain("schedules.0.cron");
    const ok = company([{ id: "daily", cron: "0 9 * * 1-5", seat: "ops", prompt: "standup" }], "Europe/Paris");
    expect(ok.schedules[0]).toMatchObject({ id: "daily", enabled: true });
  });
});

describe("due instants", () => {
  test("the instants in (after, now], counted and capped", () => {
    const job = cronOf("* * * * * *", "UTC");
    expect(dueBetween(job, START, START + 999)).toEqual({ latest: null, count: 0, capped: false });
    expect(dueBetween(job, START, START + 1000)).toEqual({ latest: START + 1000, count: 1, capped: false });
    expect(dueBetween(job, START, START + 10_500)).toEqual({ latest: START + 10_000, count: 10, capped: false });
    const capped = dueBetween(job, START, START + 3_600_000, 100);
    expect(capped).toEqual({ latest: START + 3_600_000, count: 100, capped: true });
    // A zone moves the instant: 09:00 in Paris in January is 08:00 UTC.
    const paris = cronOf("0 9 * * *", "Europe/Paris");
    expect(dueBetween(paris, START, START + 86_400_000).latest).toBe(Date.UTC(2026, 0, 6, 8, 0, 0));
  });
});

describe("scheduler duty", () => {
  test("two racing schedulers fire each instant of a 1 s cron exactly once", async () => {
    const h = await setup(company([{ id: "beat", cron: "* * * * * *", seat: "ops", prompt: "ping" }]));
    const a = h.scheduler("a:1");
    const b = h.scheduler("b:1");
    await a.tick(ctx());
    for (let i = 0; i < 30; i++) {
      await h.clock.advance(1000);
      // Both tick for the same instant, in either order.
      if (i % 2) await Promise.all([a.tick(ctx()), b.tick(ctx())]);
      else await Promise.all([b.tick(ctx()), a.tick(ctx())]);
    }
    await h.clock.advance(10);
    const ids = h.got.map((t) => t.event_id);
    expect(ids).toHaveLength(30);
    expect(new Set(ids).size).toBe(30);
    expect(h.got.every((t) => t.type === "schedule" && t.seat === "ops" && t.text.includes("ping"))).toBe(true);
  });

  test("ticks missed while nobody ran the duty fire once on catch-up, and say so", async () => {
    const h = await setup(company([{ id: "beat", cron: "* * * * * *", seat: "ops", prompt: "ping" }]));
    const a = h.scheduler("a:1");
    await a.tick(ctx());
    await h.clock.advance(1000);
    await a.tick(ctx());
    await h.clock.advance(10_000);
    await a.tick(ctx());
    await h.clock.advance(10);
    expect(h.got).toHaveLength(2);
    expect(h.got[1]!.event_id).toBe(`schedule:beat:${START + 11_000}`);
    const catchUp = h.sink.events("schedule_catch_up");
    expect(catchUp).toHaveLength(1);
    expect(catchUp[0]!.fields).toMatchObject({ schedule: "beat", missed: 9 });
    const [st] = await scheduleStatuses(h.setCompany(company([{ id: "beat", cron: "* * * * * *", seat: "ops", prompt: "ping" }])), h.coord.node().slot("fires"), h.clock.now());
    expect(st!.last_fire).toMatchObject({ instant: START + 11_000, outcome: "fired", missed: 9 });
    expect(st!.next_fire).toBe(new Date(START + 12_000).toISOString());
  });

  test("a fire claimed by a node that died before publishing is taken over once it is stale", async () => {
    const h = await setup(company([{ id: "beat", cron: "*/10 * * * * *", seat: "ops", prompt: "ping" }]));
    const a = h.scheduler("a:1");
    await a.tick(ctx());
    await h.clock.advance(10_000);
    const fires = h.coord.node().slot("fires");
    // A dead node's claim on the instant now due.
    await fires.create(fireKey("beat", START + 10_000), encodeJson({ state: "claimed", owner: "dead:1", claimed_at: h.clock.now(), published_at: null }));
    await a.tick(ctx());
    expect(h.got).toHaveLength(0);
    await h.clock.advance(FIRE_STALE_MS - 10_000);
    // The next instants fell due too; the catch-up fires the latest one, and the stale claim
    // of the first is not fired separately.
    await a.tick(ctx());
    await h.clock.advance(10);
    expect(h.got.map((t) => t.event_id)).toEqual([`schedule:beat:${START + 30_000}`]);
  });

  test("a stale claim on the latest instant is taken over and published once", async () => {
    const h = await setup(company([{ id: "beat", cron: "0 * * * * *", seat: "ops", prompt: "ping" }]));
    const a = h.scheduler("a:1");
    await a.tick(ctx());
    await h.clock.advance(60_000);
    const due = START + 60_000;
    const fires = h.coord.node().slot("fires");
    await fires.create(fireKey("beat", due), encodeJson({ state: "claimed", owner: "dead:1", claimed_at: h.clock.now(), published_at: null }));
    await a.tick(ctx());
    await h.clock.advance(FIRE_STALE_MS);
    await a.tick(ctx());
    await a.tick(ctx());
    await h.clock.advance(10);
    expect(h.got.map((t) => t.event_id)).toEqual([`schedule:beat:${due}`]);
    expect(h.sink.events("schedule_fire_taken_over")).toHaveLength(1);
  });

  test("a disabled schedule fires nothing, and enabling it again fires no past", async () => {
    const on = company([{ id: "beat", cron: "* * * * * *", seat: "ops", prompt: "ping" }]);
    const off = company([{ id: "beat", cron: "* * * * * *", seat: "ops", prompt: "ping", enabled: false }]);
    const h = await setup(on);
    const a = h.scheduler("a:1");
    await a.tick(ctx());
    h.setCompany(off);
    for (let i = 0; i < 5; i++) {
      await h.clock.advance(1000);
      await a.tick(ctx());
    }
    expect(h.got).toHaveLength(0);
    h.setCompany(on);
    await a.tick(ctx());
    await h.clock.advance(1000);
    await a.tick(ctx());
    await h.clock.advance(10);
    expect(h.got).toHaveLength(1);
    expect(h.sink.events("schedule_catch_up")).toHaveLength(0);
  });

  test("a node behind the fleet's revision does not fire a schedule the current revision disabled", async () => {
    const on = company([{ id: "beat", cron: "* * * * * *", seat: "ops", prompt: "ping" }]);
    const off = company([{ id: "beat", cron: "* * * * * *", seat: "ops", prompt: "ping", enabled: false }]);
    const h = await setup(on);
    // This node applied `on` (epoch 1) and has not heard of epoch 2 yet, which disables it.
    let fleet = { epoch: 1, company: on };
    const a = new Scheduler({ owner: "a:1", fires: h.coord.node().slot("fires"), queue: h.queue, company: () => on, current: async () => fleet, clock: h.clock, log: h.log });
    await a.tick(ctx());
    await h.clock.advance(1000);
    await a.tick(ctx());
    await h.clock.advance(10);
    expect(h.got).toHaveLength(1);
    fleet = { epoch: 2, company: off };
    for (let i = 0; i < 5; i++) {
      await h.clock.advance(1000);
      await a.tick(ctx());
    }
    await h.clock.advance(10);
    expect(h.got).toHaveLength(1);
    // Without the fleet's revision (the old behaviour) the stale company fires: the test can fail.
    const stale = new Scheduler({ owner: "b:1", fires: h.coord.node().slot("fires"), queue: h.queue, company: () => on, clock: h.clock, log: h.log });
    await h.clock.advance(1000);
    await stale.tick(ctx());
    await h.clock.advance(1000);
    await stale.tick(ctx());
    await h.clock.advance(10);
    expect(h.got.length).toBeGreaterThan(1);
  });

  test("a revision activated between the fire claim and the publish withholds the fire; the claim is the claimer's to take back", async () => {
    const on = company([{ id: "beat", cron: "* * * * * *", seat: "ops", prompt: "ping" }]);
    const off = company([{ id: "beat", cron: "* * * * * *", seat: "ops", prompt: "ping", enabled: false }]);
    const h = await setup(on);
    const reads: number[] = [];
    let next: { epoch: number; company: Company }[] = [];
    const current = async () => {
      const r = next.shift() ?? { epoch: 3, company: off };
      reads.push(r.epoch);
      return r;
    };
    const a = new Scheduler({ owner: "a:1", fires: h.coord.node().slot("fires"), queue: h.queue, company: () => on, current, clock: h.clock, log: h.log });
    next = [{ epoch: 1, company: on }];
    await a.tick(ctx()); // cursor starts
    await h.clock.advance(1000);
    // The tick reads epoch 1 (enabled) and claims; the re-read before the publish sees epoch 2.
    next = [{ epoch: 1, company: on }, { epoch: 2, company: off }];
    await a.tick(ctx());
    await h.clock.advance(10);
    expect(h.got).toHaveLength(0);
    expect(h.sink.events("schedule_fire_withheld")).toHaveLength(1);
    // Re-enabled at epoch 3 before the next tick: the withheld instant is still due and the
    // claim (this incarnation's) is taken back and fired once.
    next = [{ epoch: 3, company: on }, { epoch: 3, company: on }];
    await a.tick(ctx());
    await h.clock.advance(10);
    expect(h.got).toHaveLength(1);
    expect(reads).toEqual([1, 1, 2, 3, 3]);
  });

  test("under the runner, the tick wakes at the due instant: fire latency is a few ms", async () => {
    const h = await setup(company([{ id: "beat", cron: "*/7 * * * * *", seat: "ops", prompt: "ping" }]));
    const runner = new DutyRunner({ node_id: "a", store: h.coord.node().duties, clock: h.clock, log: h.log, duties: [h.scheduler("a:x")] });
    runner.start();
    await h.clock.advance(60_000);
    await runner.stop();
    const fired = h.sink.events("schedule_fired");
    expect(fired.length).toBeGreaterThanOrEqual(8);
    for (const f of fired) expect(f.fields.latency_ms as number).toBeLessThan(50);
  });
});
