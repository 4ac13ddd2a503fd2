// Deaf-seat detection (issue 11 item 3): judgeMailbox by table, the watch's alarm and
// heals on a fake clock, and the two broker calls it rides on against a real nats-server.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect, type NatsConnection } from "nats";
import { FakeClock, systemClock } from "../../src/clock.ts";
import { memoryLogger, silentLogger } from "../../src/log.ts";
import { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { durableName, mailbox } from "../../src/queue/topics.ts";
import { judgeMailbox, MailboxWatch, MAILBOX_CHECK_EVERY_MS, type DeafReason, type MailboxSnapshot } from "../../src/seat/mailbox-watch.ts";
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
});

describe("MailboxWatch", () => {
  function rig(resetWorks: boolean) {
    const clock = new FakeClock(0);
    const log = memoryLogger();
    let snap: MailboxSnapshot = ok;
    const calls: string[] = [];
    const held = new Set(["s1"]);
    const watch = new MailboxWatch({
      port: {
        inspect: async () => snap,
        reset: async (h) => {
          calls.push(`reset ${h}`);
          return resetWorks;
        },
      },
      held: () => [...held],
      idle: () => true,
      handBack: async (h) => {
        calls.push(`hand back ${h}`);
        held.delete(h);
      },
      clock,
      log: log.log,
    });
    return { watch, log, calls, clock, set: (s: MailboxSnapshot) => (snap = s) };
  }

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
    const consumer = await js.consumers.get("CREWLET_AGENT", durableName(box.group));
    for (let i = 0; i < 2; i++) expect(await consumer.next({ expires: 2_000 })).not.toBeNull();
    expect(await q.inspectMailbox(box.subject, box.group)).toMatchObject({ num_pending: 0, num_ack_pending: 2 });
    expect(await q.resetMailbox(box.subject, box.group)).toBe(true);
    expect(await q.inspectMailbox(box.subject, box.group)).toMatchObject({ num_pending: 2, num_ack_pending: 0 });
  });
});
