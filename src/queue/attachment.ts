// One attachment's life, shared by both backends so they cannot drift: when to pull, what
// a handler's outcome does to the message, holds, quiesce/resume/detach. A backend supplies
// only a MailboxSource (how to pull, how to settle, how to dead-letter).
import type { Clock, Timer } from "../clock.ts";
import type { Logger } from "../log.ts";
import {
  MAX_BATCH,
  MAX_DELIVERIES,
  NAK_DELAY_MAX_MS,
  type Attachment,
  type BatchHandler,
  type Delivery,
  type Handler,
  type Outcome,
} from "./contract.ts";

/** A delivered message and the three ways to settle it. */
export interface RawMessage {
  delivery: Delivery;
  ack(): Promise<void>;
  /** With a delay, the broker holds the message back that long before redelivering it. */
  nak(delay_ms?: number): Promise<void>;
  term(): Promise<void>;
}

export interface PullSink {
  message(m: RawMessage): void;
  /** The pull is over; nothing more arrives for it. `error` when it ended by failing. */
  end(error?: unknown): void;
}

/**
 * How a pull fills. `fill`: it waits at the broker until it has delivered `batch` or expires
 * (one delivery at a time runs as each arrives). `drain`: it waits for the first message,
 * then takes what else is already waiting, up to `batch`, and ends at once — what a drain
 * handler runs in one go, without waiting for mail that has not come.
 */
export type PullMode = "fill" | "drain";

export interface MailboxSource {
  /**
   * Ask the broker for up to `batch` messages, delivered to sink as they come. A pull cannot
   * be withdrawn (nats-server has no pull cancel, 2.15.2 neither, and in a cluster the
   * consumer leader may already have a message on its way to it; a pull whose asker has
   * been gone a moment is skipped by 2.9.10 and 2.15.2 alike, bench/server-quirks.ts): it ends only when it has delivered
   * `batch`, when the broker says it expired (or, for a drain, that nothing more is
   * waiting), or when its expiry has provably passed, and then sink.end is called exactly
   * once and nothing more arrives for it.
   */
  pull(batch: number, sink: PullSink, mode: PullMode): void;
  /**
   * Calls `ring` when mail may have come (each publish on the mailbox's subject). With one,
   * an idle attachment stops asking once a pull expires empty and asks again when rung, or
   * after SAFETY_PULL_MS; without, a pull is always waiting. Returns how to stop ringing.
   */
  doorbell?(ring: () => void): () => void;
  /** Copy the message to the dead-letter stream with its headers and the reason. */
  deadLetter(m: RawMessage, reason: string): Promise<void>;
}

/**
 * How long one pull waits at the broker, on both backends. It bounds how long a quiesced,
 * deferred or detached attachment's last pull can still catch mail (and hand it back, one
 * delivery each, at most one batch per pull), how long a detached attachment's inbox
 * lingers, and how soon a pull the broker lost (a consumer leader change drops waiting
 * pulls unanswered) is noticed. Against that, an idle mailbox without a doorbell re-asks once
 * per period (one with a doorbell once per SAFETY_PULL_MS + this): 5 s halves the window in
 * which a handoff's old pull steals (and bounces) new mail compared with 10 s.
 */
export const PULL_EXPIRES_MS = 5_000;

/** How long an idle attachment with a doorbell waits, when nothing rang, before asking again:
 *  the bound on mail that rings nobody (another holder's NAK, a publish while the connection
 *  was away); the deaf-seat watch rings a seat it sees with mail pending. An idle mailbox
 *  costs one pull in 50 s: at 15 s, 2,000 idle seats' pulls were ~0.06 of the brokers' 0.43 cores. */
export const SAFETY_PULL_MS = 45_000;
/** An attachment never naps in its first 15 s: what the last holder's lingering pull hands
 *  back (a NAK, which rings nobody) comes within PULL_EXPIRES_MS + PULL_LOST_AFTER_MS (10 s)
 *  of its detach. */
export const NAP_AFTER_START_MS = 15_000;

/** When an idle attachment with a doorbell asks again. */
export interface Pacing {
  safetyPull_ms: number;
  napAfterStart_ms: number;
}
export const PRODUCTION_PACING: Pacing = { safetyPull_ms: SAFETY_PULL_MS, napAfterStart_ms: NAP_AFTER_START_MS };

export type Settlement = "ack" | "nak" | "dead-letter";

/**
 * What happens to a delivery, from its outcome and how many times it has been delivered.
 * Anything short of an ack on the last permitted delivery is dead-lettered, because the
 * broker will not deliver it again and (interest retention) would keep it.
 */
export function settlementFor(outcome: Outcome["kind"] | "threw" | "handback", deliveryCount: number): Settlement {
  if (outcome === "ack") return "ack";
  if (outcome === "reject") return "dead-letter";
  if (deliveryCount >= MAX_DELIVERIES) return "dead-letter";
  return "nak";
}

/** After a pull fails (broker unreachable, consumer missing), wait this long before the next: fast enough to notice recovery, slow enough not to spin. */
export const PULL_RETRY_MS = 1_000;

export function checkBatch(batch: number | undefined): number {
  const b = batch ?? 1;
  if (!Number.isInteger(b) || b < 1 || b > MAX_BATCH) throw new Error(`attach: batch must be an integer 1..${MAX_BATCH}, got ${batch}`);
  return b;
}

/** What an attachment runs: one delivery at a time, or one drain at a time. */
export type Runner = { kind: "each"; handler: Handler } | { kind: "drain"; handler: BatchHandler };

export interface CoreOptions {
  holds?: string[];
  batch?: number;
  /** Tests only (the queue's own `pacing` option): production never passes it. */
  pacing?: Pacing;
}

type Kind = Outcome["kind"] | "threw" | "handback";

interface OutstandingPull {
  token: object;
  received: number;
  /** Stream sequences this pull brought while not ready and that were handed back. */
  handedBack: Set<number>;
}

export class AttachmentCore implements Attachment {
  private readonly holdSet = new Set<string>();
  private quiescedByCall = false;
  private detached = false;
  private running = 0;
  /** Stream sequences of the deliveries being run now, until each is settled. */
  private readonly runningSeqs = new Set<number>();
  private readonly buffer: RawMessage[] = [];
  /**
   * The one outstanding pull. It outlives a quiesce, defer or detach (it cannot be
   * withdrawn): what it brings meanwhile is handed back, and a resume reuses it rather than
   * putting a second waiting request behind it.
   */
  private pull: OutstandingPull | null = null;
  /**
   * Messages the outstanding pull brought back to this not-ready attachment after handing
   * them back once: nobody else was waiting, so a second hand-back would only bounce them
   * straight back (one delivery each, up to a batch). Kept unrun until the pull ends, then
   * handed back; run if the attachment is ready first. At most one batch.
   */
  private readonly parked: RawMessage[] = [];
  private retryTimer: Timer | null = null;
  /** Rung since the last pull was sent (true at the start: the first pull always goes). */
  private rang = true;
  /** An idle attachment's wait for its doorbell (or SAFETY_PULL_MS). */
  private napTimer: Timer | null = null;
  private stopBell: (() => void) | null = null;
  private startedAt = 0;
  private backoffUntil = 0;
  private idleWaiters: Array<() => void> = [];
  private readonly batch: number;
  private readonly pacing: Pacing;

  constructor(
    private readonly source: MailboxSource,
    private readonly runner: Runner,
    private readonly clock: Clock,
    private readonly log: Logger,
    opts: CoreOptions = {},
    /** Called once when detached (the backend forgets the attachment). */
    private readonly onDetach: () => void = () => undefined,
  ) {
    this.batch = checkBatch(opts.batch);
    this.pacing = opts.pacing ?? PRODUCTION_PACING;
    for (const h of opts.holds ?? []) this.holdSet.add(h);
  }

  /** Begin consuming (called once by the backend after construction). */
  start(): void {
    this.startedAt = this.clock.now();
    try {
      if (this.source.doorbell) this.stopBell = this.source.doorbell(() => this.wake());
    } catch (error) {
      // Without a doorbell a pull is always waiting, as on a stream without one.
      this.log.warn("queue_doorbell_unavailable", { error: String(error) });
    }
    this.pump();
  }

  ring(): void {
    this.wake();
  }

  /** Mail may be waiting (rung, or ready again after handing some back): ask now. */
  private wake(): void {
    this.rang = true;
    this.napTimer?.cancel();
    this.napTimer = null;
    this.pump();
  }

  get holds(): ReadonlySet<string> {
    return this.holdSet;
  }
  get quiesced(): boolean {
    return !this.ready();
  }
  get inFlight(): number {
    return this.running;
  }
  get backingOffUntil(): number {
    return this.backoffUntil;
  }
  get holding(): ReadonlySet<number> {
    return new Set([...this.runningSeqs, ...[...this.buffer, ...this.parked].map((m) => m.delivery.streamSeq)]);
  }

  quiesce(): void {
    this.quiescedByCall = true;
    this.pump();
  }
  resume(): void {
    this.log.debug("queue_attachment_resumed", { was_quiesced: this.quiescedByCall, pull_out: this.pull !== null, running: this.running });
    this.quiescedByCall = false;
    this.wake();
  }
  hold(name: string): void {
    this.holdSet.add(name);
    this.pump();
  }
  releaseHold(name: string): void {
    this.holdSet.delete(name);
    this.wake();
  }

  idle(): Promise<void> {
    if (this.running === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  async detach(): Promise<void> {
    if (!this.detached) this.onDetach();
    this.detached = true;
    this.holdSet.clear();
    this.retryTimer?.cancel();
    this.retryTimer = null;
    this.napTimer?.cancel();
    this.napTimer = null;
    this.stopBell?.();
    this.stopBell = null;
    this.pump();
  }

  private ready(): boolean {
    return !this.detached && !this.quiescedByCall && this.holdSet.size === 0;
  }

  /** The one place that decides what to do next. */
  private pump(): void {
    if (!this.ready()) {
      // Never withdraw the outstanding pull (see MailboxSource.pull): onMessage hands back
      // whatever it still brings.
      while (this.buffer.length > 0) this.handBack(this.buffer.shift()!, "handed back unrun (quiesced or detached)");
      return;
    }
    // Ready again while the outstanding pull still holds parked mail: it is ours to run.
    while (this.parked.length > 0) this.buffer.push(this.parked.shift()!);
    if (this.running > 0) return;
    if (this.runner.kind === "drain") {
      // A drain is everything its pull brings: run it once the pull is over, never with a
      // pull still out (what that pull brought later would wait for the whole drain).
      if (this.pull) return;
      if (this.buffer.length > 0) {
        void this.run(this.buffer.splice(0, this.batch));
        return;
      }
    } else {
      const next = this.buffer.shift();
      if (next) {
        void this.run([next]);
        return;
      }
    }
    // A live pull (perhaps made before a quiesce) is reused: a second waiting request would
    // sit behind it at the broker, and the older one would win the next message.
    if (this.pull || this.retryTimer || this.napTimer) return;
    const pull: OutstandingPull = { token: {}, received: 0, handedBack: new Set() };
    this.pull = pull;
    this.rang = false;
    this.source.pull(
      this.batch,
      {
        message: (m) => this.onMessage(pull.token, m),
        end: (error) => this.onPullEnd(pull.token, error),
      },
      this.runner.kind === "drain" ? "drain" : "fill",
    );
  }

  private onMessage(token: object, m: RawMessage): void {
    this.log.debug("queue_delivered", { seq: m.delivery.streamSeq, delivery_count: m.delivery.deliveryCount, ready: this.ready() });
    const pull = this.pull;
    if (!pull || pull.token !== token) {
      // A source breaking its promise (nothing after end): never run it, never strand it.
      this.handBack(m, "arrived after its pull ended");
      return;
    }
    pull.received += 1;
    // A pull that has had its batch is complete: nothing more can arrive for it.
    const complete = pull.received >= this.batch;
    if (complete) this.pull = null;
    if (!this.ready()) {
      // Taken while this attachment may not run it: hand it straight back rather than park
      // it for the ack wait. Only a message this same pull already handed back is kept
      // (see `parked`), so a pull costs at most one batch of hand-backs.
      const seq = m.delivery.streamSeq;
      if (pull.handedBack.has(seq)) this.parked.push(m);
      else {
        pull.handedBack.add(seq);
        this.handBack(m, "arrived while quiesced or detached");
      }
      if (complete) this.releaseParked();
      return;
    }
    this.buffer.push(m);
    this.pump();
  }

  private onPullEnd(token: object, error?: unknown): void {
    const pull = this.pull;
    if (pull?.token !== token) return;
    this.pull = null;
    this.releaseParked();
    const settledIn = this.clock.now() - this.startedAt >= this.pacing.napAfterStart_ms;
    if (error === undefined && pull.received === 0 && !this.rang && this.stopBell && settledIn) this.nap();
    if (error !== undefined && !this.detached) {
      this.log.warn("queue_pull_failed", { error: String(error), retry_ms: PULL_RETRY_MS });
      this.retryTimer = this.clock.setTimeout(() => {
        this.retryTimer = null;
        this.pump();
      }, PULL_RETRY_MS);
    }
    // What the pull brought before it failed is ours to run; only the next pull waits.
    this.pump();
  }

  /** Nothing came and nothing rang: wait for the doorbell, a delayed NAK's return, or the safety pull. */
  private nap(): void {
    const backoff_ms = this.backoffUntil - this.clock.now();
    const safety_ms = this.pacing.safetyPull_ms;
    const wait_ms = backoff_ms > 0 ? Math.min(safety_ms, backoff_ms) : safety_ms;
    this.napTimer = this.clock.setTimeout(() => this.wake(), wait_ms);
  }

  /** The pull that parked mail is over, so handing it back can no longer bounce it here. */
  private releaseParked(): void {
    if (this.ready()) return; // pump runs them
    while (this.parked.length > 0) this.handBack(this.parked.shift()!, "held while its pull was outstanding, handed back at the pull's end");
  }

  private async run(ms: RawMessage[]): Promise<void> {
    this.running += 1;
    for (const m of ms) this.runningSeqs.add(m.delivery.streamSeq);
    const settlements = await this.outcomes(ms);
    for (const [i, m] of ms.entries()) {
      const { kind, reason, delay_ms } = settlements[i]!;
      // A delayed NAK that will not be dead-lettered instead waits at the broker, ours.
      if (kind === "nak" && delay_ms && settlementFor(kind, m.delivery.deliveryCount) === "nak") this.backoffUntil = Math.max(this.backoffUntil, this.clock.now() + delay_ms);
      if (kind !== "ack") this.log.debug("queue_delivery_settling", { seq: m.delivery.streamSeq, kind, delay_ms });
      await this.settle(m, kind, reason, delay_ms);
      this.runningSeqs.delete(m.delivery.streamSeq);
    }
    this.running -= 1;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
    this.pump();
  }

  /** Runs the handler on `ms` and says how to settle each; never throws. */
  private async outcomes(ms: RawMessage[]): Promise<{ kind: Kind; reason: string; delay_ms?: number }[]> {
    let outcomes: Outcome[];
    try {
      if (this.runner.kind === "each") outcomes = [await this.runner.handler(ms[0]!.delivery)];
      else outcomes = await this.runner.handler(ms.map((m) => m.delivery));
      if (!Array.isArray(outcomes)) throw new Error(`a drain handler answered ${typeof outcomes}, not an array of outcomes`);
    } catch (err) {
      const first = ms[0]!.delivery;
      this.log.error("queue_handler_failed", { subject: first.subject, seq: first.streamSeq, delivery_count: first.deliveryCount, deliveries: ms.length, error: err });
      const reason = `threw: ${err instanceof Error ? err.message : String(err)}`;
      return ms.map(() => ({ kind: "threw" as const, reason }));
    }
    if (outcomes.length > ms.length) {
      this.log.error("queue_handler_outcomes_extra", { subject: ms[0]!.delivery.subject, deliveries: ms.length, outcomes: outcomes.length });
    }
    // Quiesce before any NAK leaves, so nothing here pulls a deferred message straight back.
    if (outcomes.some((o) => o.kind === "defer")) this.quiescedByCall = true;
    return ms.map((_, i) => {
      const o = outcomes[i];
      if (!o) return { kind: "handback" as const, reason: "handed back unrun (the drain's handler left it without an outcome)" };
      if (o.kind === "nak" && o.delay_ms !== undefined) return { kind: o.kind, reason: "nak", delay_ms: Math.min(NAK_DELAY_MAX_MS, Math.max(0, o.delay_ms)) };
      return { kind: o.kind, reason: o.kind === "defer" ? `defer: ${o.reason}` : o.kind === "reject" ? `rejected: ${o.reason}` : o.kind };
    });
  }

  private handBack(m: RawMessage, reason: string): void {
    this.log.debug("queue_delivery_handed_back", { subject: m.delivery.subject, seq: m.delivery.streamSeq, delivery_count: m.delivery.deliveryCount, reason });
    void this.settle(m, "handback", reason);
  }

  private settle(m: RawMessage, kind: Kind, reason: string, delay_ms?: number): Promise<void> {
    return settleDelivery(this.source, m, kind, reason, this.log, delay_ms);
  }
}

/**
 * Settles one delivery by its outcome (settlementFor); never throws. Unsettled, the broker
 * redelivers after the ack wait; a failed dead-letter leaves the message where the broker
 * would have left it, and says so.
 */
export async function settleDelivery(source: MailboxSource, m: RawMessage, kind: Kind, reason: string, log: Logger, delay_ms?: number): Promise<void> {
  const settlement = settlementFor(kind, m.delivery.deliveryCount);
  try {
    if (settlement === "ack") await m.ack();
    else if (settlement === "nak") await m.nak(delay_ms);
    else {
      await source.deadLetter(m, reason);
      await m.term();
      log.warn("queue_dead_lettered", { subject: m.delivery.subject, seq: m.delivery.streamSeq, delivery_count: m.delivery.deliveryCount, reason });
    }
  } catch (err) {
    log.error("queue_settle_failed", { subject: m.delivery.subject, seq: m.delivery.streamSeq, settlement, error: err });
  }
}
