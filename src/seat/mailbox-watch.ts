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
// judgeMailbox is pure and decides from two snapshots a check apart; MailboxWatch is the
// thin loop around it.
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
/** Seats inspected at once: a check of many seats stays a trickle, never a burst. */
const CHECK_CONCURRENCY = 4;

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
  | "ack_pending_elsewhere";

export type MailboxVerdict = { deaf: false } | { deaf: true; reason: DeafReason; detail: string };

export interface JudgeInput {
  now: MailboxSnapshot;
  /** The previous check's snapshot (null on the first check, or after a heal). */
  previous: MailboxSnapshot | null;
  /** The seat was established and running no turn at both checks. */
  idle: boolean;
}

/**
 * Judges one mailbox. Every rule needs the previous check to show the same fault, so an
 * ack on its way (interest retention removes acked mail a moment after the ack) or a pull
 * between two messages never alarms.
 */
export function judgeMailbox({ now, previous, idle }: JudgeInput): MailboxVerdict {
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
  return { deaf: false };
}

/** What the watch needs from the queue: read a seat inbox's state; reset it to its ack floor. */
export interface MailboxPort {
  inspect(handle: string): Promise<MailboxSnapshot>;
  /** Delivers again everything above the ack floor; false when the broker cannot (older server). */
  reset(handle: string): Promise<boolean>;
}

export interface MailboxWatchOptions {
  port: MailboxPort;
  /** Seats this node holds now. */
  held: () => string[];
  /** The seat is established and running no turn. */
  idle: (handle: string) => boolean;
  /** Gives the seat back (a fresh attach, here or on a peer). */
  handBack: (handle: string) => Promise<void>;
  clock: Clock;
  log: Logger;
  every_ms?: number;
}

interface Watched {
  previous: MailboxSnapshot | null;
  previousIdle: boolean;
  /** 0: healthy; 1: reset done, awaiting the next check; 2: handed back. */
  healing: 0 | 1 | 2;
  deaf: { reason: DeafReason; since: number } | null;
}

export class MailboxWatch {
  private readonly state = new Map<string, Watched>();
  private timer: Timer | null = null;
  private running: Promise<void> | null = null;

  constructor(private readonly o: MailboxWatchOptions) {}

  start(): void {
    this.timer = this.o.clock.setInterval(() => {
      this.running ??= this.checkOnce().finally(() => (this.running = null));
    }, this.o.every_ms ?? MAILBOX_CHECK_EVERY_MS);
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

  async checkOnce(): Promise<void> {
    const held = new Set(this.o.held());
    for (const h of [...this.state.keys()]) if (!held.has(h)) this.state.delete(h);
    const seats = [...held].sort();
    for (let i = 0; i < seats.length; i += CHECK_CONCURRENCY) {
      await Promise.all(seats.slice(i, i + CHECK_CONCURRENCY).map((h) => this.checkSeat(h)));
    }
  }

  private async checkSeat(handle: string): Promise<void> {
    const w = this.state.get(handle) ?? { previous: null, previousIdle: false, healing: 0, deaf: null };
    this.state.set(handle, w);
    const idleBefore = this.o.idle(handle);
    let snap: MailboxSnapshot;
    try {
      snap = await this.o.port.inspect(handle);
    } catch (err) {
      // The broker did not answer (an election): no verdict this time, and no stale pair.
      this.o.log.debug("seat_mailbox_check_failed", { seat: handle, error: (err as Error).message });
      w.previous = null;
      return;
    }
    const idle = idleBefore && this.o.idle(handle) && w.previousIdle;
    const previous = w.previous;
    w.previous = snap;
    w.previousIdle = idleBefore && this.o.idle(handle);
    // The first check (or the first after a heal) only sets the baseline: no verdict either way.
    if (previous === null) return;
    const verdict = judgeMailbox({ now: snap, previous, idle });
    if (!verdict.deaf) {
      if (w.deaf) this.o.log.info("seat_mailbox_hearing", { seat: handle, deaf_ms: this.o.clock.now() - w.deaf.since, healed_by: w.healing === 1 ? "reset" : "hand_back" });
      w.deaf = null;
      w.healing = 0;
      return;
    }
    w.deaf ??= { reason: verdict.reason, since: this.o.clock.now() };
    const heal = w.healing === 0 ? "reset" : "hand_back";
    this.o.log.error("seat_mailbox_deaf", { seat: handle, reason: verdict.reason, detail: verdict.detail, heal });
    // A heal starts the judgement afresh: the next verdict needs two new checks.
    w.previous = null;
    if (w.healing === 0) {
      const done = await this.o.port.reset(handle).catch((err: unknown) => {
        this.o.log.warn("seat_mailbox_reset_failed", { seat: handle, error: (err as Error).message });
        return false;
      });
      if (done) {
        w.healing = 1;
        this.o.log.info("seat_mailbox_reset", { seat: handle, reason: verdict.reason });
        return;
      }
    }
    w.healing = 2;
    await this.o.handBack(handle).catch((err: unknown) => this.o.log.warn("seat_mailbox_hand_back_failed", { seat: handle, error: (err as Error).message }));
  }
}
