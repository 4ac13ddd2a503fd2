// The scheduler duty on the in-memory broker and coordination store: one trigger per due
// instant, whichever of two racing nodes ticks; one catch-up for a gap, logged; a fire whose
// node died mid-way taken over; disabled and re-enabled schedules fire no past; time zones;
// weekly and monthly schedules and outages past a week (the cursor outlives any age).
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
import { MARKER_MAX_AGE_MS, purgeOldMarkers } from "../../src/duty/markers.ts";

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
    new Scheduler({ owner, fires: coord.node().slot("fires"), cursors: coord.node().slot("schedules"), queue, company: () => current, clock, log });
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
    const [st] = await scheduleStatuses(h.setCompany(company([{ id: "beat", cron: "* * * * * *", seat: "ops", prompt: "ping" }])), h.coord.node().slot("schedules"), h.clock.now());
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
    const a = new Scheduler({ owner: "a:1", fires: h.coord.node().slot("fires"), cursors: h.coord.node().slot("schedules"), queue: h.queue, company: () => on, current: async () => fleet, clock: h.clock, log: h.log });
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
    const stale = new Scheduler({ owner: "b:1", fires: h.coord.node().slot("fires"), cursors: h.coord.node().slot("schedules"), queue: h.queue, company: () => on, clock: h.clock, log: h.log });
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
    const a = new Scheduler({ owner: "a:1", fires: h.coord.node().slot("fires"), cursors: h.coord.node().slot("schedules"), queue: h.queue, company: () => on, current, clock: h.clock, log: h.log });
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

const DAY_MS = 86_400_000;
const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/**
 * Ticks `a` from now to `end_ms` as the runner would (at each due instant + 5 ms, and at
 * least hourly), except while `off` says no node runs the duty.
 */
async function drive(h: Awaited<ReturnType<typeof setup>>, a: Scheduler, cron: string, end_ms: number, off: (t: number) => boolean = () => false) {
  const job = cronOf(cron, "UTC");
  await a.tick(ctx());
  while (h.clock.now() < end_ms) {
    const due = job.nextRun(new Date(h.clock.now()))!.getTime() + 5;
    await h.clock.advance(Math.min(due, h.clock.now() + 3_600_000, end_ms) - h.clock.now());
    if (!off(h.clock.now())) await a.tick(ctx());
  }
  await h.clock.advance(10);
}

describe("long periods (the cursor has no age)", () => {
  for (const [name, cron, end, dates] of [
    ["weekly", "0 0 9 * * 1", START + 35 * DAY_MS, ["2026-01-12", "2026-01-19", "2026-01-26", "2026-02-02", "2026-02-09"]],
    ["monthly", "0 0 9 1 * *", Date.UTC(2026, 5, 1, 10), ["2026-02-01", "2026-03-01", "2026-04-01", "2026-05-01", "2026-06-01"]],
  ] as const) {
    test(`a ${name} schedule over five periods fires each instant once, and its last fire outlasts an idle week`, async () => {
      const c = company([{ id: "s", cron, seat: "ops", prompt: "p" }]);
      const h = await setup(c);
      await drive(h, h.scheduler("a:1"), cron, end);
      expect(h.got.map((t) => day(t.created_at))).toEqual([...dates]);
      expect(new Set(h.got.map((t) => t.event_id)).size).toBe(5);
      expect(h.sink.events("schedule_started")).toHaveLength(1);
      expect(h.sink.events("schedule_catch_up")).toHaveLength(0);
      // Eight days with nobody ticking: GET /schedules still tells the last fire.
      await h.clock.advance(8 * DAY_MS);
      const [st] = await scheduleStatuses(c, h.coord.node().slot("schedules"), h.clock.now());
      expect(st!.last_fire).toMatchObject({ instant: h.got[4]!.created_at, outcome: "fired", missed: 0 });
    }, 60_000);
  }

  test("a daily schedule through an 8-day outage fires one catch-up for the instants it missed", async () => {
    const cron = "0 0 9 * * *";
    const h = await setup(company([{ id: "s", cron, seat: "ops", prompt: "p" }]));
    // No node runs the duty from Jan 7 10:00 to Jan 15 10:00: eight 09:00s (Jan 8..15) fall due.
    const from = START + 2 * DAY_MS;
    const to = START + 10 * DAY_MS;
    await drive(h, h.scheduler("a:1"), cron, START + 20 * DAY_MS, (t) => t >= from && t < to);
    const dates = h.got.map((t) => day(t.created_at));
    expect(dates).toEqual(["2026-01-06", "2026-01-07", "2026-01-15", ...Array.from({ length: 10 }, (_, i) => day(Date.UTC(2026, 0, 16 + i)))]);
    const catchUp = h.sink.events("schedule_catch_up");
    expect(catchUp).toHaveLength(1);
    expect(catchUp[0]!.fields).toMatchObject({ schedule: "s", missed: 7, fired_for: "2026-01-15T09:00:00.000Z" });
    expect(h.sink.events("schedule_started")).toHaveLength(1);
  }, 60_000);

  test("a removed schedule's cursor is deleted, and the marker purge then drops its marker", async () => {
    const both = company([{ id: "gone", cron: "* * * * * *", seat: "ops", prompt: "p" }, { id: "kept", cron: "* * * * * *", seat: "ops", prompt: "p" }]);
    const h = await setup(both);
    const a = h.scheduler("a:1");
    await a.tick(ctx());
    await h.clock.advance(1000);
    await a.tick(ctx());
    const cursors = h.coord.node().slot("schedules");
    expect((await cursors.keys()).sort()).toEqual([cursorKey("gone"), cursorKey("kept")]);
    h.setCompany(company([{ id: "kept", cron: "* * * * * *", seat: "ops", prompt: "p" }]));
    await h.clock.advance(1000);
    await a.tick(ctx());
    expect(await cursors.keys()).toEqual([cursorKey("kept")]);
    expect(h.sink.events("schedule_cursor_deleted").map((e) => e.fields.schedule)).toEqual(["gone"]);
    expect((await cursors.removals()).map((m) => m.key)).toEqual([cursorKey("gone")]);
    await h.clock.advance(MARKER_MAX_AGE_MS);
    await purgeOldMarkers((n) => h.coord.node().slot(n), h.clock, h.log);
    expect(await cursors.removals()).toEqual([]);
    // Added back: a fresh start, no past fired.
    h.setCompany(both);
    const gone = () => h.got.filter((t) => t.event_id.startsWith("schedule:gone:")).length;
    const goneBefore = gone();
    await a.tick(ctx());
    await h.clock.advance(10);
    expect(gone()).toBe(goneBefore);
    expect(h.sink.events("schedule_started").filter((e) => e.fields.schedule === "gone")).toHaveLength(2);
  });

  test("a cursor an older build left in crewlet_fires is carried over: no restart, the due instant fires", async () => {
    const h = await setup(company([{ id: "beat", cron: "0 * * * * *", seat: "ops", prompt: "ping" }]));
    await h.coord.node().slot("fires").create(cursorKey("beat"), encodeJson({ instant: START, disabled: false, last_fire: null }));
    await h.clock.advance(60_000);
    await h.scheduler("a:1").tick(ctx());
    await h.clock.advance(10);
    expect(h.got.map((t) => t.event_id)).toEqual([`schedule:beat:${START + 60_000}`]);
    expect(h.sink.events("schedule_started")).toHaveLength(0);
    expect(await h.coord.node().slot("schedules").get(cursorKey("beat"))).not.toBeNull();
  });
});
