// Deaf-seat detection (issue 11 item 3): judgeMailbox by table, the watch's alarm and
// heals on a fake clock, and the two broker calls it rides on against a real nats-server.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect, type NatsConnection } from "nats";
import { FakeClock, systemClock } from "../../src/clock.ts";
import { memoryLogger, silentLogger } from "../../src/log.ts";
import { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { durableName, mailbox, streamForSubject } from "../../src/queue/topics.ts";
import { checkPeriodMs, CHECKS_PER_SECOND, isQuiet, judgeMailbox, judgeProbe, MailboxWatch, MAILBOX_CHECK_EVERY_MS, PROBE_EVERY_MS, probePeriodMs, PROBES_PER_SECOND, PROBE_HEADER, PROBE_HEARD_WITHIN_MS, probeIdOf, seatOffsetMs, type DeafReason, type MailboxSnapshot, type ProbeVerdict } from "../../src/seat/mailbox-watch.ts";
import { startNats, type TestNats } from "../support/nats.ts";

const ok: MailboxSnapshot = { num_pending: 0, num_ack_pending: 0, delivered_seq: 10, ack_floor_seq: 10, first_unacked_seq: null };

describe("judgeMailbox", () => {
  const cases: [string, MailboxSnapshot | null, MailboxSnapshot, boolean, DeafReason | null][] = [
    ["all delivered and acked", ok, ok, true, null],
    ["first check: no verdict without a previous one", null, { ...ok, num_pending: 3, first_unacked_seq: null }, true, null],
    ["counted mail the stream cannot show, twice", { ...ok, num_pending: 3 }, { ...ok, num_pending: 3 }, false, "mail_unreadable"],
    ["counted mail the stream cannot show, once (an ack on its way)", ok, { ...ok, num_ack_pending: 1 }, false, null],
    ["mail passed by the pointer, nothing ack-pending, twice", { ...ok, delivered_seq: 12, first_unacked_seq: 11 }, { ...ok, delivered_seq: 12, first_unacked_seq: 11 }, false, "pointer_passed_mail"],
    ["mail passed by the pointer but ack-pending: a turn holds it", { ...ok, delivered_seq: 12, first_unacked_seq: 11, num_ack_pending: 1 }, { ...ok, delivered_seq: 12, first_unacked_seq: 11, num_ack_pending: 1 }, false, null],
    ["a different passed message each time: moving, not stuck", { ...ok, delivered_seq: 12, first_unacked_seq: 11 }, { ...ok, delivered_seq: 13, first_unacked_seq: 12 }, false, null],
    ["pending while idle, the pointer still", { ...ok, num_pending: 2, first_unacked_seq: 11 }, { ...ok, num_pending: 2, first_unacked_seq: 11 }, true, "pending_not_delivered"],
    ["deliveries outstanding while the holder ran nothing, twice: a stale pull elsewhere has them", { ...ok, ack_floor_seq: 9, num_ack_pending: 2, first_unacked_seq: 10 }, { ...ok, ack_floor_seq: 9, num_ack_pending: 2, first_unacked_seq: 10 }, true, "ack_pending_elsewhere"],
    ["deliveries outstanding while a turn runs: its own", { ...ok, ack_floor_seq: 9, num_ack_pending: 2, first_unacked_seq: 10 }, { ...ok, ack_floor_seq: 9, num_ack_pending: 2, first_unacked_seq: 10 }, false, null],
    ["pending while busy: a long turn", { ...ok, num_pending: 2, first_unacked_seq: 11 }, { ...ok, num_pending: 2, first_unacked_seq: 11 }, false, null],
    ["pending, the pointer moving: delivering", { ...ok, num_pending: 2, first_unacked_seq: 11 }, { ...ok, num_pending: 2, delivered_seq: 11, first_unacked_seq: 12 }, true, null],
  ];
  for (const [name, previous, now, idle, want] of cases) {
    test(name, () => {
      const v = judgeMailbox({ previous, now, idle });
      expect(v.deaf ? v.reason : null).toBe(want);
    });
  }

  // A busy seat: never idle at a check, its delivered pointer moving with new mail.
  const stranded = { ...ok, ack_floor_seq: 9, num_ack_pending: 2, first_unacked_seq: 10, delivered_seq: 14 };
  const busyCases: [string, MailboxSnapshot, MailboxSnapshot, boolean, DeafReason | null][] = [
    ["the oldest delivery unsettled at both checks, held by none of the holder's turns", stranded, { ...stranded, delivered_seq: 17 }, true, "ack_pending_elsewhere"],
    ["the same, but the holder holds it (a long turn)", stranded, { ...stranded, delivered_seq: 17 }, false, null],
    ["the ack floor moved: the holder settled it", stranded, { ...stranded, ack_floor_seq: 10, first_unacked_seq: 11, delivered_seq: 17 }, true, null],
    ["another oldest delivery each time: moving, not stuck", stranded, { ...stranded, first_unacked_seq: 11, delivered_seq: 17 }, true, null],
    ["nothing ack-pending: the pointer passed it, its own rule", { ...stranded, num_ack_pending: 0 }, { ...stranded, num_ack_pending: 0 }, true, "pointer_passed_mail"],
  ];
  for (const [name, previous, now, firstHeldElsewhere, want] of busyCases) {
    test(`busy: ${name}`, () => {
      const v = judgeMailbox({ previous, now, idle: false, firstHeldElsewhere });
      expect(v.deaf ? v.reason : null).toBe(want);
    });
  }
});

describe("MailboxWatch", () => {
  function rig(resetWorks: boolean) {
    const clock = new FakeClock(0);
    const log = memoryLogger();
    let snap: MailboxSnapshot = ok;
    const calls: string[] = [];
    const rings: string[] = [];
    const held = new Set(["s1"]);
    let idle = true;
    const watch = new MailboxWatch({
      port: {
        inspect: async () => snap,
        reset: async (h) => {
          calls.push(`reset ${h}`);
          return resetWorks;
        },
        ring: (h) => void rings.push(h),
      },
      held: () => [...held],
      idle: () => idle,
      handBack: async (h) => {
        calls.push(`hand back ${h}`);
        held.delete(h);
      },
      clock,
      log: log.log,
    });
    return { watch, log, calls, rings, clock, set: (s: MailboxSnapshot) => (snap = s), setIdle: (i: boolean) => (idle = i) };
  }

  test("mail pending at an idle seat rings its attachment (it may have rung nobody); a quiet or busy seat is not rung", async () => {
    const r = rig(true);
    await r.watch.checkOnce();
    expect(r.rings).toEqual([]);
    r.set({ ...ok, num_pending: 1, first_unacked_seq: 11 });
    r.setIdle(false);
    await r.watch.checkOnce();
    expect(r.rings).toEqual([]);
    r.setIdle(true);
    await r.watch.checkOnce();
    expect(r.rings).toEqual(["s1"]);
  });

  test("alarms on two agreeing checks, resets, and clears once the mailbox hears again", async () => {
    const r = rig(true);
    r.set({ ...ok, num_pending: 4 });
    await r.watch.checkOnce();
    expect(r.watch.deaf()).toEqual([]);
    await r.watch.checkOnce();
    expect(r.watch.deaf()).toEqual(["s1"]);
    expect(r.calls).toEqual(["reset s1"]);
    expect(r.log.sink.events("seat_mailbox_deaf").map((l) => l.fields.reason)).toEqual(["mail_unreadable"]);
    r.set(ok);
    await r.watch.checkOnce();
    await r.watch.checkOnce();
    expect(r.watch.deaf()).toEqual([]);
    expect(r.log.sink.events("seat_mailbox_hearing").length).toBe(1);
  });

  test("the reset's heal rings the seat: what it hands out rang nobody", async () => {
    const r = rig(true);
    r.set({ ...ok, ack_floor_seq: 9, num_ack_pending: 1, first_unacked_seq: 10 });
    await r.watch.checkOnce();
    expect(r.rings).toEqual([]);
    await r.watch.checkOnce();
    expect(r.calls).toEqual(["reset s1"]);
    expect(r.rings).toEqual(["s1"]);
  });

  test("still deaf after the reset → the seat is handed back", async () => {
    const r = rig(true);
    r.set({ ...ok, num_pending: 4 });
    for (let i = 0; i < 4; i++) await r.watch.checkOnce();
    expect(r.calls).toEqual(["reset s1", "hand back s1"]);
    await r.watch.checkOnce();
    expect(r.watch.deaf()).toEqual([]); // no longer held here
  });

  test("a broker without the reset call → handed back at once", async () => {
    const r = rig(false);
    r.set({ ...ok, num_pending: 4 });
    await r.watch.checkOnce();
    await r.watch.checkOnce();
    expect(r.calls).toEqual(["reset s1", "hand back s1"]);
  });

  test("started, it checks on its cadence: deaf within two checks", async () => {
    const r = rig(true);
    r.set({ ...ok, num_pending: 4 });
    r.watch.start();
    await r.clock.advance(MAILBOX_CHECK_EVERY_MS);
    expect(r.watch.deaf()).toEqual([]);
    await r.clock.advance(MAILBOX_CHECK_EVERY_MS);
    for (let i = 0; i < 10 && r.watch.deaf().length === 0; i++) await Bun.sleep(1);
    expect(r.watch.deaf()).toEqual(["s1"]);
    await r.watch.stop();
  });
});

describe("a big node's cadence", () => {
  const periods: [number, number, number][] = [
    [1, MAILBOX_CHECK_EVERY_MS, PROBE_EVERY_MS],
    [CHECKS_PER_SECOND * 15, MAILBOX_CHECK_EVERY_MS, PROBE_EVERY_MS],
    [PROBES_PER_SECOND * 60, 30_000, PROBE_EVERY_MS],
    [600, 60_000, 120_000],
    [3_334, 333_400, 666_800],
  ];
  for (const [held, check, probe] of periods) {
    test(`${held} seats held: checked every ${check} ms, probed every ${probe} ms`, () => {
      expect(checkPeriodMs(held)).toBe(check);
      expect(probePeriodMs(held)).toBe(probe);
    });
  }

  test("quiet is nothing outstanding and nothing stored above the floor", () => {
    expect(isQuiet(ok)).toBe(true);
    expect(isQuiet({ ...ok, num_pending: 1 })).toBe(false);
    expect(isQuiet({ ...ok, num_ack_pending: 1 })).toBe(false);
    expect(isQuiet({ ...ok, first_unacked_seq: 11 })).toBe(false);
  });

  test("600 seats: each checked once a period, a quarter of them a tick; one that turns bad is looked at every tick and alarmed", async () => {
    const clock = new FakeClock(0);
    const handles = Array.from({ length: 600 }, (_, i) => `s${i}`);
    const checks = new Map<string, number>();
    let bad = "";
    const watch = new MailboxWatch({
      port: {
        inspect: async (h) => (checks.set(h, (checks.get(h) ?? 0) + 1), h === bad ? { ...ok, num_pending: 4 } : ok),
        reset: async () => true,
      },
      held: () => handles,
      idle: () => true,
      handBack: async () => {},
      clock,
      log: silentLogger,
    });
    const total = () => [...checks.values()].reduce((a, b) => a + b, 0);
    const tick = async () => {
      await clock.advance(MAILBOX_CHECK_EVERY_MS);
      const before = total();
      await watch.checkDue();
      return total() - before;
    };
    const perTick: number[] = [];
    for (let t = 0; t < 8 * 4; t++) perTick.push(await tick()); // 8 periods of 60 s
    for (const h of handles) expect(checks.get(h)).toBeGreaterThanOrEqual(7);
    for (const h of handles) expect(checks.get(h)).toBeLessThanOrEqual(9);
    expect(Math.max(...perTick.slice(4))).toBeLessThan(300);
    bad = "s7";
    let ticks = 0;
    while (watch.deaf().length === 0 && ticks < 20) (await tick(), ticks++);
    expect(watch.deaf()).toEqual(["s7"]);
    expect(ticks).toBeLessThanOrEqual(4 + 1); // its next check sees it, the next tick's agrees
  });
});

describe("judgeProbe", () => {
  const W = PROBE_HEARD_WITHIN_MS;
  const cases: [string, { sent_ms: number; heard: boolean; ready: boolean; busy_until_ms: number; now_ms: number }, ProbeVerdict][] = [
    ["heard", { sent_ms: 0, heard: true, ready: true, busy_until_ms: 0, now_ms: 10 * W }, "heard"],
    ["unheard, the seat ready the whole bound", { sent_ms: 0, heard: false, ready: true, busy_until_ms: 0, now_ms: W }, "unheard"],
    ["unheard, not yet the bound", { sent_ms: 0, heard: false, ready: true, busy_until_ms: 0, now_ms: W - 1 }, "waiting"],
    ["unheard, the seat busy now: a drain holds the pull", { sent_ms: 0, heard: false, ready: false, busy_until_ms: 0, now_ms: 10 * W }, "waiting"],
    ["unheard, a drain ended inside the bound: its next pull may be on its way", { sent_ms: 0, heard: false, ready: true, busy_until_ms: 5 * W, now_ms: 5 * W + W - 1 }, "waiting"],
    ["unheard, ready for the bound since the last drain", { sent_ms: 0, heard: false, ready: true, busy_until_ms: 5 * W, now_ms: 6 * W }, "unheard"],
  ];
  for (const [name, input, want] of cases) test(name, () => expect(judgeProbe(input)).toBe(want));

  test("the probe header is found whatever its case; other mail is not a probe", () => {
    expect(probeIdOf({ [PROBE_HEADER]: "x-1" })).toBe("x-1");
    expect(probeIdOf({ "crewlet-probe": "x-2" })).toBe("x-2");
    expect(probeIdOf({ "Nats-Msg-Id": "m" })).toBeNull();
  });

  test("seats are spread over the period, each at a stable point", () => {
    const offsets = Array.from({ length: 200 }, (_, i) => seatOffsetMs(`agent-${i}`));
    for (const o of offsets) expect(o >= 0 && o < PROBE_EVERY_MS).toBe(true);
    expect(seatOffsetMs("agent-7")).toBe(seatOffsetMs("agent-7"));
    // Spread: no tenth of the period holds more than a quarter of the seats.
    const buckets = new Array(10).fill(0);
    for (const o of offsets) buckets[Math.floor((o / PROBE_EVERY_MS) * 10)]++;
    expect(Math.max(...buckets)).toBeLessThan(50);
  });
});

describe("MailboxWatch probes", () => {
  function rig(o: { rewindWorks?: boolean } = {}) {
    const clock = new FakeClock(0);
    const log = memoryLogger();
    const calls: string[] = [];
    const sent: string[] = [];
    const rings: string[] = [];
    const held = new Set(["s1"]);
    let ready = true;
    let settled = 0;
    let deliver = true;
    // eslint-disable-next-line prefer-const
    let watch: MailboxWatch;
    watch = new MailboxWatch({
      port: {
        inspect: async () => ok,
        reset: async (h) => (calls.push(`reset ${h}`), true),
        rewind: async (h) => (calls.push(`rewind ${h}`), o.rewindWorks ?? true),
        ring: (h) => void rings.push(h),
        probe: async (h, id) => {
          sent.push(id);
          // A live inbox hands it to the host, which reports it back.
          if (deliver && ready) queueMicrotask(() => watch.heard(h, id));
        },
      },
      held: () => [...held],
      idle: () => ready,
      readiness: () => ({ ready, settled_at_ms: settled }),
      handBack: async (h) => {
        calls.push(`hand back ${h}`);
        held.delete(h);
      },
      clock,
      log: log.log,
    });
    const checkAt = async (t: number) => {
      await clock.advance(t - clock.now());
      await watch.checkOnce();
      await Bun.sleep(0);
    };
    return {
      watch, log, calls, sent, rings, clock, checkAt,
      set: (x: { ready?: boolean; deliver?: boolean; settled?: number }) => {
        if (x.ready !== undefined) ready = x.ready;
        if (x.deliver !== undefined) deliver = x.deliver;
        if (x.settled !== undefined) settled = x.settled;
      },
    };
  }
  const first = seatOffsetMs("s1");

  test("a healthy seat: one probe per period, each heard, never deaf", async () => {
    const r = rig();
    await r.checkAt(0);
    expect(r.sent.length).toBe(0); // not due before its offset in the period
    for (let t = first; t < first + 5 * PROBE_EVERY_MS; t += MAILBOX_CHECK_EVERY_MS) await r.checkAt(t);
    expect(r.sent.length).toBe(5);
    expect(r.rings.length).toBe(5); // each probe rings the seat: it tests the broker, not the doorbell
    expect(r.watch.probeCounts()).toEqual({ sent: 5, heard: 5, unheard: 0 });
    expect(r.watch.deaf()).toEqual([]);
    expect(r.log.sink.events("seat_mailbox_deaf")).toEqual([]);
  });

  test("a probe that never comes back: deaf (probe_unheard), rewound; heard again → hearing", async () => {
    const r = rig();
    r.set({ deliver: false });
    await r.checkAt(0);
    await r.checkAt(first); // sent
    expect(r.sent.length).toBe(1);
    await r.checkAt(first + PROBE_HEARD_WITHIN_MS - 1);
    expect(r.watch.deaf()).toEqual([]);
    await r.checkAt(first + PROBE_HEARD_WITHIN_MS);
    expect(r.watch.deaf()).toEqual(["s1"]);
    expect(r.log.sink.events("seat_mailbox_deaf").map((l) => [l.fields.reason, l.fields.heal])).toEqual([["probe_unheard", "rewind"]]);
    expect(r.calls).toEqual(["rewind s1"]);
    // The rewind healed it: the next probe (at once, not a period later) comes back.
    r.set({ deliver: true });
    await r.checkAt(first + PROBE_HEARD_WITHIN_MS + 1);
    expect(r.sent.length).toBe(2);
    expect(r.watch.deaf()).toEqual([]);
    expect(r.log.sink.events("seat_mailbox_hearing").map((l) => l.fields.healed_by)).toEqual(["rewind"]);
  });

  test("still unheard after the rewind → the seat is handed back", async () => {
    const r = rig();
    r.set({ deliver: false });
    await r.checkAt(0); // first seen: its probe is due at its offset in the period
    await r.checkAt(first);
    await r.checkAt(first + PROBE_HEARD_WITHIN_MS);
    await r.checkAt(first + PROBE_HEARD_WITHIN_MS + 1); // the next probe
    await r.checkAt(first + 2 * PROBE_HEARD_WITHIN_MS + 1);
    expect(r.calls).toEqual(["rewind s1", "hand back s1"]);
    await r.checkAt(first + 3 * PROBE_HEARD_WITHIN_MS);
    expect(r.watch.deaf()).toEqual([]); // no longer held here
  });

  test("a broker that cannot rewind → handed back at once", async () => {
    const r = rig({ rewindWorks: false });
    r.set({ deliver: false });
    await r.checkAt(0); // first seen: its probe is due at its offset in the period
    await r.checkAt(first);
    await r.checkAt(first + PROBE_HEARD_WITHIN_MS);
    expect(r.calls).toEqual(["rewind s1", "hand back s1"]);
  });

  test("time the seat could not take the probe does not count: busy, quiesced, draining", async () => {
    const r = rig();
    // Not ready when due: no probe is sent.
    r.set({ ready: false, deliver: false });
    await r.checkAt(0);
    await r.checkAt(first);
    expect(r.sent.length).toBe(0);
    r.set({ ready: true });
    await r.checkAt(first + 1); // sent now
    expect(r.sent.length).toBe(1);
    r.set({ ready: false });
    await r.checkAt(first + PROBE_HEARD_WITHIN_MS + 1); // busy at the bound: waiting
    r.set({ ready: true });
    await r.checkAt(first + PROBE_HEARD_WITHIN_MS + 2); // ready again, but only just
    expect(r.watch.deaf()).toEqual([]);
    // A drain finishing restarts the clock too (its next pull takes the probe).
    r.set({ settled: first + 2 * PROBE_HEARD_WITHIN_MS });
    await r.checkAt(first + 2 * PROBE_HEARD_WITHIN_MS + 2);
    expect(r.watch.deaf()).toEqual([]);
    await r.checkAt(first + 3 * PROBE_HEARD_WITHIN_MS + 2);
    expect(r.watch.deaf()).toEqual(["s1"]);
  });

  test("a tick that comes late (the process stood still) does not count against a probe", async () => {
    // A clock whose one interval fires when told, at the time told: a stalled event loop.
    let now = 0;
    let tick: () => void = () => {};
    const clock = {
      now: () => now,
      setTimeout: () => ({ cancel() {} }),
      setInterval: (fn: () => void) => ((tick = fn), { cancel() {} }),
      sleep: async () => {},
    };
    const log = memoryLogger();
    const watch = new MailboxWatch({
      port: { inspect: async () => ok, reset: async () => true, rewind: async () => true, probe: async () => {} },
      held: () => ["s1"],
      idle: () => true,
      readiness: () => ({ ready: true, settled_at_ms: 0 }),
      handBack: async () => {},
      clock,
      log: log.log,
    });
    watch.start();
    const at = async (t: number) => {
      now = t;
      tick();
      await watch.stop().catch(() => {}); // waits for the check the tick started
      await Bun.sleep(0);
    };
    // On time, until the seat's first probe is out (its offset in the period).
    for (let i = 0; i < 10 && watch.probeCounts().sent === 0; i++) await at(now + MAILBOX_CHECK_EVERY_MS);
    expect(watch.probeCounts().sent).toBe(1);
    const sentAt = now;
    // The next tick comes a whole bound late: the probe may be queued behind it.
    await at(sentAt + PROBE_HEARD_WITHIN_MS + MAILBOX_CHECK_EVERY_MS);
    expect(watch.deaf()).toEqual([]);
    // On time again: the bound counts from the stall, so not yet at 15 s, but at 30 s.
    await at(now + MAILBOX_CHECK_EVERY_MS);
    expect(watch.deaf()).toEqual([]);
    await at(now + MAILBOX_CHECK_EVERY_MS);
    expect(watch.deaf()).toEqual(["s1"]);
  });

  test("a probe not this watch's own (an earlier process's, a stale one) clears nothing", async () => {
    const r = rig();
    r.set({ deliver: false });
    await r.checkAt(0); // first seen: its probe is due at its offset in the period
    await r.checkAt(first);
    r.watch.heard("s1", "someone-else-1");
    await r.checkAt(first + PROBE_HEARD_WITHIN_MS);
    expect(r.watch.deaf()).toEqual(["s1"]);
    expect(r.log.sink.events("seat_probe_stale").length).toBe(1);
  });
});

describe("the broker calls (real nats-server)", () => {
  let nats: TestNats;
  let nc: NatsConnection;
  beforeAll(async () => {
    nats = await startNats();
    nc = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc.close();
    await nats.stop();
  });

  test("inspect reads pointers and the first unacked message; reset delivers the unacked again", async () => {
    const q = new JetStreamQueue({ nc, replicas: 1, clock: systemClock, log: silentLogger });
    await q.ensureStreams();
    const box = mailbox("deafy", "inbox");
    await q.ensureMailbox(box.subject, box.group);
    expect(await q.inspectMailbox(box.subject, box.group)).toEqual({ num_pending: 0, num_ack_pending: 0, delivered_seq: 0, ack_floor_seq: 0, first_unacked_seq: null });
    const first = await q.publish(box.subject, new TextEncoder().encode("{}"));
    await q.publish(box.subject, new TextEncoder().encode("{}"));
    const snap = await q.inspectMailbox(box.subject, box.group);
    expect(snap).toMatchObject({ num_pending: 2, first_unacked_seq: first.seq });
    // Take both without acking, then reset: both are pending again.
    const js = nc.jetstream();
    const consumer = await js.consumers.get(streamForSubject(box.subject)!, durableName(box.group));
    for (let i = 0; i < 2; i++) expect(await consumer.next({ expires: 2_000 })).not.toBeNull();
    expect(await q.inspectMailbox(box.subject, box.group)).toMatchObject({ num_pending: 0, num_ack_pending: 2 });
    expect(await q.resetMailbox(box.subject, box.group)).toBe(true);
    expect(await q.inspectMailbox(box.subject, box.group)).toMatchObject({ num_pending: 2, num_ack_pending: 0 });
  });
});
