// Deaf seats (issue 11): a seat whose lease is held and whose node reads healthy, but whose
// inbox no longer brings it its mail. Seen on nats-server 2.9.10 after kill -9s: a mailbox
// consumer's delivered pointer advanced over mail it never delivered, and a stream replica
// answered "no message found" for every sequence it counted; half the seats went deaf while
// every node answered /ready. The holder therefore checks each seat it holds against the
// broker on a cadence (MAILBOX_CHECK_EVERY_MS), alarms (`seat_mailbox_deaf`, on /health,
// the Fleet view and /ready) and heals what it can: first the consumer is reset to its ack
// floor (nats-server ≥ 2.14), so everything not acknowledged is delivered again (the
// completion ledger skips what already ran); a seat still deaf at the next check is handed
// back (released) for a fresh attach, here or on a peer.
//
// The snapshots infer; the probe proves. A consumer whose pointer stands beyond the
// stream's last sequence, or one that is gone, counts nothing wrong — every new message
// lands behind the pointer, or nowhere, and the counters read zero. So the holder also
// publishes a probe into each seat's inbox on a cadence (PROBE_EVERY_MS): a message
// carrying the PROBE_HEADER, which the seat host acks on sight without a turn (never shown
// to the agent, never counted as mail) and reports back here. A probe not back within
// PROBE_HEARD_WITHIN_MS of the seat being ready to take it makes the seat deaf
// (`probe_unheard`), healed first by rewinding the consumer to the first message its
// subject still stores (everything unacknowledged is delivered again), then by handing the
// seat back; a probe heard again clears it.
//
// judgeMailbox and judgeProbe are pure; MailboxWatch is the thin loop around them.
import { randomUUID } from "node:crypto";
import type { Clock, Timer } from "../clock.ts";
import type { Logger } from "../log.ts";
import type { MailboxSnapshot } from "../queue/contract.ts";

export type { MailboxSnapshot };

/**
 * How often a holder checks each seat's mailbox against the broker. Three small API calls
 * per held seat (consumer info, one stream read, nothing else), so a node holding 16 seats
 * spends ~3 requests a second; every verdict needs two checks agreeing, so a deaf seat is
 * alarmed within 30 s and healed at once — against the minutes an operator takes to notice
 * a seat that stopped answering.
 */
export const MAILBOX_CHECK_EVERY_MS = 15_000;
/**
 * Checks a node makes a second, at most: past 150 seats each seat is checked less often
 * (checkPeriodMs). At a flat 15 s the checks were 0.12 of 2,000 idle seats' 0.43 broker cores
 * (bench/scale.ts); a deaf seat is a rare broker fault, so a big node finds it later instead.
 */
export const CHECKS_PER_SECOND = 10;
/** Probes a node sends a second, at most (probePeriodMs): each a replicated write, a delivery
 * and an ack, its trim deferred (trim.ts). At 3,334 seats a node, each seat every 11 min. */
export const PROBES_PER_SECOND = 5;

/** How often each of `held` seats is checked: every tick, or less often on a big node. */
export function checkPeriodMs(held: number, tick_ms = MAILBOX_CHECK_EVERY_MS): number {
  return Math.max(tick_ms, Math.ceil((held / CHECKS_PER_SECOND) * 1000));
}

/** How often each of `held` seats is probed: PROBE_EVERY_MS, or longer on a big node. */
export function probePeriodMs(held: number): number {
  return Math.max(PROBE_EVERY_MS, Math.ceil((held / PROBES_PER_SECOND) * 1000));
}

/** Seats inspected at once: a check of many seats stays a trickle, never a burst. */
const CHECK_CONCURRENCY = 4;
/** A tick later than this many periods means the process itself stood still. */
const STALL_TICKS = 2;

/** The header that makes an inbox message a probe; its value is the probe's id. */
export const PROBE_HEADER = "Crewlet-Probe";
/**
 * How often each held seat is probed. A probe is one stream write, one delivery and one
 * ack, each a replicated write on R3 — the same traffic as one chat message with no turn.
 * At 2,000 seats that is 2,000 probes a minute across the fleet (~33/s, ~100 raft
 * proposals/s), the load bench/scale.ts drives as its "one message per seat per minute"
 * and the fleet is sized for; faster would double the fleet's idle broker traffic for a
 * verdict the snapshot rules already give in 30 s for every fault they can see. The probe
 * is for the faults they cannot (a pointer beyond the stream, a consumer gone), alarmed
 * within PROBE_EVERY_MS + two checks (≤ 90 s) instead of never. Seats are staggered over
 * the period (by handle), never probed together.
 */
export const PROBE_EVERY_MS = 60_000;
/**
 * How long a probe may stay unheard while its seat is ready to take it (attached, not
 * quiesced, no drain running) before the seat is deaf. A healthy idle seat's pull waits at
 * the broker (or is rung for the probe) and takes it within milliseconds; a pull the broker lost (a consumer
 * leader change) is re-asked after PULL_EXPIRES_MS (5 s). Four times that is slack for a
 * box at load 30+ without alarming on an election. Judged at the watch's checks, so the
 * verdict comes at the second check after the probe (30 s).
 */
export const PROBE_HEARD_WITHIN_MS = 20_000;

/** An inbox delivery is a probe (the seat host acks it without a turn). */
export function probeIdOf(headers: Record<string, string>): string | null {
  for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() === PROBE_HEADER.toLowerCase()) return v;
  return null;
}

export type ProbeVerdict = "heard" | "waiting" | "unheard";

export interface ProbeInput {
  sent_ms: number;
  heard: boolean;
  /** The seat is ready to take mail now (attached, not quiesced, nothing in flight). */
  ready: boolean;
  /** The latest moment the seat was seen not ready or finished a drain (its pull was
   * then made again): the probe's clock starts at the later of this and sent_ms. */
  busy_until_ms: number;
  now_ms: number;
  /** The bound (PROBE_HEARD_WITHIN_MS unless a test says otherwise). */
  within_ms?: number;
}

/**
 * A probe is unheard once its seat has been ready to take it for PROBE_HEARD_WITHIN_MS
 * without it arriving. A seat busy with a drain, quiesced (stale renew, a pause) or not
 * attached cannot take it, so that time does not count: a probe behind a backlog waits.
 */
export function judgeProbe(p: ProbeInput): ProbeVerdict {
  if (p.heard) return "heard";
  if (!p.ready) return "waiting";
  return p.now_ms - Math.max(p.sent_ms, p.busy_until_ms) >= (p.within_ms ?? PROBE_HEARD_WITHIN_MS) ? "unheard" : "waiting";
}

/** Where a seat's cycle (its probe, its check) starts in a period: spread by handle, stable per seat. */
export function seatOffsetMs(handle: string, every_ms = PROBE_EVERY_MS): number {
  let h = 2166136261;
  for (let i = 0; i < handle.length; i++) h = Math.imul(h ^ handle.charCodeAt(i), 16777619) >>> 0;
  return h % every_ms;
}

export type DeafReason =
  /** Mail stored at or below the delivered pointer, above the ack floor, with nothing ack-pending: passed over, never delivered. */
  | "pointer_passed_mail"
  /** The consumer counts mail (pending or ack-pending) the stream cannot show: the replica cannot read its own messages. */
  | "mail_unreadable"
  /** Mail pending while the seat sat idle across a whole check, the pointer not moving. */
  | "pending_not_delivered"
  /** Deliveries outstanding while the holder ran nothing across a whole check: someone
   * else's (a fenced predecessor's lingering pull took them) — they would wait out the
   * 30-minute ack wait. */
  | "ack_pending_elsewhere"
  /** A probe published into the inbox did not come back while the seat was ready to take it. */
  | "probe_unheard";

export type MailboxVerdict = { deaf: false } | { deaf: true; reason: DeafReason; detail: string };

export interface JudgeInput {
  now: MailboxSnapshot;
  /** The previous check's snapshot (null on the first check, or after a heal). */
  previous: MailboxSnapshot | null;
  /** The seat was established and running no turn at both checks. */
  idle: boolean;
  /** At both checks the oldest delivery above the ack floor was one the holder did not hold
   *  (nor was backing off), its inbox live: a busy seat's stranded delivery. */
  firstHeldElsewhere?: boolean;
}

/**
 * Judges one mailbox. Every rule needs the previous check to show the same fault, so an
 * ack on its way (interest retention removes acked mail a moment after the ack) or a pull
 * between two messages never alarms.
 */
export function judgeMailbox({ now, previous, idle, firstHeldElsewhere = false }: JudgeInput): MailboxVerdict {
  if (!previous) return { deaf: false };
  const counted = (s: MailboxSnapshot) => s.num_pending + s.num_ack_pending;
  if (counted(now) > 0 && now.first_unacked_seq === null && counted(previous) > 0 && previous.first_unacked_seq === null) {
    return { deaf: true, reason: "mail_unreadable", detail: `${now.num_pending} pending and ${now.num_ack_pending} ack-pending counted, no message stored above ack floor ${now.ack_floor_seq}` };
  }
  const passed = (s: MailboxSnapshot) => s.first_unacked_seq !== null && s.first_unacked_seq <= s.delivered_seq && s.num_ack_pending === 0;
  if (passed(now) && passed(previous) && now.first_unacked_seq === previous.first_unacked_seq) {
    return { deaf: true, reason: "pointer_passed_mail", detail: `message ${now.first_unacked_seq} stored at or below delivered ${now.delivered_seq}, above ack floor ${now.ack_floor_seq}, nothing ack-pending` };
  }
  if (idle && now.num_pending > 0 && previous.num_pending > 0 && now.delivered_seq === previous.delivered_seq) {
    return { deaf: true, reason: "pending_not_delivered", detail: `${now.num_pending} pending, delivered pointer still at ${now.delivered_seq} a check later, the seat idle` };
  }
  if (idle && now.num_ack_pending > 0 && previous.num_ack_pending > 0 && now.ack_floor_seq === previous.ack_floor_seq && now.delivered_seq === previous.delivered_seq) {
    return { deaf: true, reason: "ack_pending_elsewhere", detail: `${now.num_ack_pending} delivered and unsettled above ack floor ${now.ack_floor_seq} a check later, the holder running nothing` };
  }
  // A busy seat's delivered pointer moves and it is seldom idle at a check, so the rule above
  // waited for its traffic to stop; what the holder holds says the same while it works.
  const stuck = (s: MailboxSnapshot) => s.num_ack_pending > 0 && s.first_unacked_seq !== null && s.first_unacked_seq <= s.delivered_seq;
  if (firstHeldElsewhere && stuck(now) && stuck(previous) && now.ack_floor_seq === previous.ack_floor_seq && now.first_unacked_seq === previous.first_unacked_seq) {
    return { deaf: true, reason: "ack_pending_elsewhere", detail: `message ${now.first_unacked_seq} delivered and unsettled above ack floor ${now.ack_floor_seq} a check later, held by none of the holder's turns` };
  }
  return { deaf: false };
}

/** Nothing outstanding and nothing stored above the ack floor: no rule can find fault here. */
export function isQuiet(s: MailboxSnapshot): boolean {
  return s.num_pending === 0 && s.num_ack_pending === 0 && s.first_unacked_seq === null;
}

/** What the watch needs from the queue: read a seat inbox's state; reset it to its ack floor. */
export interface MailboxPort {
  inspect(handle: string): Promise<MailboxSnapshot>;
  /** Delivers again everything above the ack floor; false when the broker cannot (older server). */
  reset(handle: string): Promise<boolean>;
  /** The seat's attachment pulls now: mail is pending that may have rung nobody. */
  ring?(handle: string): void;
  /** Publishes a probe with this id into the seat's inbox. Absent: no probes. */
  probe?(handle: string, id: string): Promise<void>;
  /** Delivers again everything the seat's inbox still stores (the probe's heal); false when
   * the broker cannot. Absent: reset is used. */
  rewind?(handle: string): Promise<boolean>;
}

/** How ready a held seat is to take a probe, from its holder. */
export interface SeatReadiness {
  /** Attached, not quiesced, no drain running. */
  ready: boolean;
  /** When its last drain (or delivery) finished; 0 when none yet. */
  settled_at_ms: number;
}

export interface MailboxWatchOptions {
  port: MailboxPort;
  /** Seats this node holds now. */
  held: () => string[];
  /** The seat is established and running no turn. */
  idle: (handle: string) => boolean;
  /** The seat's inbox is live and neither holds this delivery nor waits out a delayed NAK of
   *  its own: if the mailbox counts it delivered and unsettled, someone else has it. */
  notHolding?: (handle: string, seq: number) => boolean;
  /** Gives the seat back (a fresh attach, here or on a peer). */
  handBack: (handle: string) => Promise<void>;
  /** The seat's readiness to take a probe (required for probes). */
  readiness?: (handle: string) => SeatReadiness | null;
  clock: Clock;
  log: Logger;
  every_ms?: number;
  probe_every_ms?: number;
  probe_heard_within_ms?: number;
}

interface Watched {
  previous: MailboxSnapshot | null;
  previousIdle: boolean;
  /** The previous check's oldest unsettled delivery, when the holder did not hold it. */
  previousElsewhere: number | null;
  /** 0: healthy; 1: reset done, awaiting the next check; 2: handed back. */
  healing: 0 | 1 | 2;
  deaf: { reason: DeafReason; since: number } | null;
  /** The probe out now, if any. */
  probe: { id: string; sent_ms: number } | null;
  probe_due_ms: number;
  /** The last check at which the seat could not take a probe. */
  not_ready_ms: number;
  /** When the timer checks this seat next (checkDue). */
  next_check_ms: number;
}

export class MailboxWatch {
  private readonly state = new Map<string, Watched>();
  private timer: Timer | null = null;
  private running: Promise<void> | null = null;
  /** Probe ids are `{this watch}-{n}`: a probe left in a mailbox by another process, or an
   * earlier probe of this one, never counts as this one's. */
  private readonly probePrefix = randomUUID().slice(0, 8);
  private probeCount = 0;
  private readonly counts = { sent: 0, heard: 0, unheard: 0 };
  /** The last tick that came late (see start); probes are not judged across it. */
  private stalled_at_ms = 0;
  /** The periods for the seats held at the last check (checkPeriodMs, probePeriodMs). */
  private periods = { check_ms: MAILBOX_CHECK_EVERY_MS, probe_ms: PROBE_EVERY_MS };

  constructor(private readonly o: MailboxWatchOptions) {}

  private get probing(): boolean {
    return this.o.port.probe !== undefined && this.o.readiness !== undefined;
  }

  /** Probes sent, heard back and judged unheard by this watch since it started. */
  probeCounts(): { sent: number; heard: number; unheard: number } {
    return { ...this.counts };
  }

  /**
   * The seat host took a probe off `handle`'s inbox (and acked it). Only the probe this
   * watch has out for that seat counts; any other (an earlier one, another process's) is
   * stale and ignored.
   */
  heard(handle: string, id: string): void {
    const w = this.state.get(handle);
    if (!w || w.probe?.id !== id) {
      this.o.log.debug("seat_probe_stale", { seat: handle, probe: id });
      return;
    }
    const now = this.o.clock.now();
    this.counts.heard++;
    this.o.log.debug("seat_probe_heard", { seat: handle, probe: id, rtt_ms: now - w.probe.sent_ms });
    w.probe = null;
    w.probe_due_ms = now + this.probeEveryMs();
    if (w.deaf?.reason === "probe_unheard") {
      this.o.log.info("seat_mailbox_hearing", { seat: handle, deaf_ms: now - w.deaf.since, healed_by: w.healing === 1 ? "rewind" : "hand_back" });
      w.deaf = null;
      w.healing = 0;
    }
  }

  start(): void {
    const every = this.tickMs();
    let last = this.o.clock.now();
    this.timer = this.o.clock.setInterval(() => {
      // A tick this late means this process stood still (a GC pause, a loaded box, SIGSTOP):
      // a probe that arrived meanwhile may still be queued behind this very callback, so
      // that time is the process's, not the mailbox's, and does not count against a probe.
      const now = this.o.clock.now();
      if (now - last > STALL_TICKS * every) this.stalled_at_ms = now;
      last = now;
      this.running ??= this.checkDue().finally(() => (this.running = null));
    }, every);
  }

  async stop(): Promise<void> {
    this.timer?.cancel();
    this.timer = null;
    await this.running;
  }

  /** Seats held here whose mailbox is judged deaf now. */
  deaf(): string[] {
    return [...this.state].filter(([, w]) => w.deaf !== null).map(([h]) => h).sort();
  }

  /** Checks every seat held now, due or not. */
  checkOnce(): Promise<void> {
    return this.check(() => true);
  }

  /**
   * Checks the held seats whose check comes before the next tick, and those with a probe out
   * past its bound (judged now, not a period later). A seat's period grows with the seats
   * held (checkPeriodMs); its first check falls at its own point in the period.
   */
  checkDue(): Promise<void> {
    const now = this.o.clock.now();
    const tick_ms = this.tickMs();
    const within_ms = this.o.probe_heard_within_ms ?? PROBE_HEARD_WITHIN_MS;
    return this.check((w) => w.next_check_ms < now + tick_ms || (w.probe !== null && now - w.probe.sent_ms >= within_ms));
  }

  private async check(due: (w: Watched) => boolean): Promise<void> {
    const held = new Set(this.o.held());
    for (const h of [...this.state.keys()]) if (!held.has(h)) this.state.delete(h);
    this.periods = { check_ms: checkPeriodMs(held.size, this.tickMs()), probe_ms: probePeriodMs(held.size) };
    const seats = [...held].sort().filter((h) => due(this.watched(h)));
    for (let i = 0; i < seats.length; i += CHECK_CONCURRENCY) {
      await Promise.all(seats.slice(i, i + CHECK_CONCURRENCY).map((h) => this.checkSeat(h)));
    }
  }

  private tickMs(): number {
    return this.o.every_ms ?? MAILBOX_CHECK_EVERY_MS;
  }

  private probeEveryMs(): number {
    return this.o.probe_every_ms ?? this.periods.probe_ms;
  }

  private watched(handle: string): Watched {
    let w = this.state.get(handle);
    if (!w) {
      const now = this.o.clock.now();
      const probe_due_ms = now + seatOffsetMs(handle, this.probeEveryMs());
      const next_check_ms = now + seatOffsetMs(handle, this.periods.check_ms);
      w = { previous: null, previousIdle: false, previousElsewhere: null, healing: 0, deaf: null, probe: null, probe_due_ms, not_ready_ms: now, next_check_ms };
      this.state.set(handle, w);
    }
    return w;
  }

  private async checkSeat(handle: string): Promise<void> {
    const w = this.watched(handle);
    try {
      await this.judgeSeat(handle, w);
    } finally {
      // A seat that looks anything but quiet (or has no baseline) is looked at again next tick.
      const quiet = w.deaf === null && w.previous !== null && isQuiet(w.previous);
      w.next_check_ms = this.o.clock.now() + (quiet ? this.periods.check_ms : this.tickMs());
    }
  }

  private async judgeSeat(handle: string, w: Watched): Promise<void> {
    const snapshot = await this.snapshotVerdict(handle, w);
    const verdict = snapshot?.deaf ? snapshot : await this.probeStep(handle, w);
    if (!verdict.deaf) {
      // What cleared is what alarmed: a snapshot alarm by a good snapshot, a probe alarm by
      // a probe heard (see heard).
      if (w.deaf && w.deaf.reason !== "probe_unheard" && snapshot && !snapshot.deaf) {
        this.o.log.info("seat_mailbox_hearing", { seat: handle, deaf_ms: this.o.clock.now() - w.deaf.since, healed_by: w.healing === 1 ? "reset" : "hand_back" });
        w.deaf = null;
        w.healing = 0;
      }
      return;
    }
    w.deaf ??= { reason: verdict.reason, since: this.o.clock.now() };
    const byProbe = verdict.reason === "probe_unheard";
    const heal = w.healing === 0 ? (byProbe ? "rewind" : "reset") : "hand_back";
    this.o.log.error("seat_mailbox_deaf", { seat: handle, reason: verdict.reason, detail: verdict.detail, heal });
    // A heal starts the judgement afresh: the next verdict needs two new checks, or a new probe.
    w.previous = null;
    w.probe = null;
    w.probe_due_ms = this.o.clock.now();
    if (w.healing === 0) {
      const call = byProbe && this.o.port.rewind ? () => this.o.port.rewind!(handle) : () => this.o.port.reset(handle);
      const done = await call().catch((err: unknown) => {
        this.o.log.warn("seat_mailbox_reset_failed", { seat: handle, heal, error: (err as Error).message });
        return false;
      });
      if (done) {
        w.healing = 1;
        this.o.log.info("seat_mailbox_reset", { seat: handle, reason: verdict.reason, heal });
        // What the reset hands out rings nobody: without this the seat took it only at its
        // next check or its safety pull, up to 50 s later.
        this.o.port.ring?.(handle);
        return;
      }
    }
    w.healing = 2;
    await this.o.handBack(handle).catch((err: unknown) => this.o.log.warn("seat_mailbox_hand_back_failed", { seat: handle, error: (err as Error).message }));
  }

  /** The snapshot rules' verdict; null when there is none this time (first check, no answer). */
  private async snapshotVerdict(handle: string, w: Watched): Promise<MailboxVerdict | null> {
    const idleBefore = this.o.idle(handle);
    let snap: MailboxSnapshot;
    try {
      snap = await this.o.port.inspect(handle);
    } catch (err) {
      // The broker did not answer (an election): no verdict this time, and no stale pair.
      this.o.log.debug("seat_mailbox_check_failed", { seat: handle, error: (err as Error).message });
      w.previous = null;
      return null;
    }
    const idleNow = idleBefore && this.o.idle(handle);
    // Mail pending at an idle seat may have rung nobody (another holder's NAK, an ack wait's
    // end): its attachment pulls now instead of at its safety pull, so only a mailbox that
    // does not deliver when asked stays pending to the next check.
    if (idleNow && snap.num_pending > 0) this.o.port.ring?.(handle);
    const idle = idleNow && w.previousIdle;
    const first = snap.first_unacked_seq;
    const elsewhereNow = first !== null && (this.o.notHolding?.(handle, first) ?? false) ? first : null;
    const firstHeldElsewhere = elsewhereNow !== null && elsewhereNow === w.previousElsewhere;
    const previous = w.previous;
    w.previous = snap;
    w.previousIdle = idleNow;
    w.previousElsewhere = elsewhereNow;
    // The first check (or the first after a heal) only sets the baseline: no verdict either way.
    if (previous === null) return null;
    return judgeMailbox({ now: snap, previous, idle, firstHeldElsewhere });
  }

  /** Judges the probe out for this seat, or sends the next one when it is due. */
  private async probeStep(handle: string, w: Watched): Promise<MailboxVerdict> {
    if (!this.probing) return { deaf: false };
    const now = this.o.clock.now();
    const r = this.o.readiness!(handle);
    const ready = r?.ready ?? false;
    if (!ready) w.not_ready_ms = now;
    if (w.probe) {
      const busy_until_ms = Math.max(w.not_ready_ms, r?.settled_at_ms ?? 0, this.stalled_at_ms);
      if (judgeProbe({ sent_ms: w.probe.sent_ms, heard: false, ready, busy_until_ms, now_ms: now, within_ms: this.o.probe_heard_within_ms }) !== "unheard") return { deaf: false };
      const waited = now - Math.max(w.probe.sent_ms, busy_until_ms);
      this.counts.unheard++;
      return { deaf: true, reason: "probe_unheard", detail: `probe ${w.probe.id} sent ${now - w.probe.sent_ms} ms ago not delivered, the seat ready to take it for ${waited} ms` };
    }
    if (!ready || now < w.probe_due_ms) return { deaf: false };
    const id = `${this.probePrefix}-${++this.probeCount}`;
    // Out before the publish returns: the seat host can take it before the broker's ack is back.
    const probe = { id, sent_ms: now };
    w.probe = probe;
    try {
      await this.o.port.probe!(handle, id);
    } catch (err) {
      // Not published (an election): no probe out, the next check tries again.
      if (w.probe === probe) w.probe = null;
      this.o.log.debug("seat_probe_failed", { seat: handle, error: (err as Error).message });
      return { deaf: false };
    }
    this.counts.sent++;
    // The probe tests the broker's delivery, not the doorbell (whose loss costs a safety pull's wait, not mail).
    this.o.port.ring?.(handle);
    this.o.log.debug("seat_probe_sent", { seat: handle, probe: id });
    return { deaf: false };
  }
}
