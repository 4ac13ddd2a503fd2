// The queue contract in-process: the same semantics as JetStream (retention by stream,
// durable cursors, delivery counts, ack-wait redelivery, msg-id de-duplication, pulls that
// wait at the "broker"), driven by src/clock.ts so a simulated fleet runs on a FakeClock.
// Attachments are the shared AttachmentCore; only the broker side lives here.
import type { Clock, Timer } from "../clock.ts";
import type { Logger } from "../log.ts";
import {
  ACK_WAIT_MS,
  MAX_DELIVERIES,
  type Answer,
  type AttachOptions,
  type Attachment,
  type BatchAttachOptions,
  type BatchHandler,
  type DeadLetter,
  type Delivery,
  type Handler,
  type MailboxRef,
  type PublishOptions,
  type PublishResult,
  type Queue,
  type Responder,
  type ScatterOptions,
} from "./contract.ts";
import { AttachmentCore, PULL_EXPIRES_MS, type CoreOptions, type MailboxSource, type PullMode, type PullSink, type RawMessage, type Runner } from "./attachment.ts";
import { DEAD_LETTER_LIST_MAX, deadLetterCopy, H_EXPECTED_STREAM, H_MSG_ID, parseDeadLetter, replayDeadLetterVia } from "./deadletter.ts";
import { streamSpecs, type StreamSpec } from "./streams.ts";
import { AGENT_STREAMS, durableName, parseMailbox, STREAM_DLQ, subjectMatches } from "./topics.ts";

export interface MemoryQueueOptions {
  clock: Clock;
  log: Logger;
  /** Same meaning as JetStreamQueueOptions.ackWait_ms; a FakeClock makes the real 30 min cheap. */
  ackWait_ms?: number;
}

interface StoredMsg {
  seq: number;
  subject: string;
  data: Uint8Array;
  headers: Record<string, string>;
  msgId: string | undefined;
  at_ms: number;
  /** Interest streams: durables that still owe this message an ack. */
  interest: Set<string>;
}

interface Waiting {
  batch: number;
  remaining: number;
  /** A drain pull ends as soon as it has had something and nothing more is waiting. */
  mode: PullMode;
  sink: PullSink;
  /** As the broker: a waiting pull ends at its expiry and cannot be withdrawn before. */
  expires_at_ms: number;
}

class MemConsumer {
  /** Highest stream sequence handed out for the first time. */
  cursor = 0;
  /** NAKed or lapsed deliveries, served before new mail (as the broker does). */
  readonly redeliver: number[] = [];
  /** Delivered, unsettled: the ack-wait timer per sequence. */
  readonly pending = new Map<number, Timer>();
  /** NAKed with a delay: held back until the timer puts them on `redeliver`. */
  readonly delayed = new Map<number, Timer>();
  readonly deliveries = new Map<number, number>();
  readonly waiting: Waiting[] = [];

  constructor(
    readonly durable: string,
    readonly group: string,
    readonly filter: string,
  ) {}
}

class MemStream {
  lastSeq = 0;
  readonly msgs = new Map<number, StoredMsg>();
  readonly dedupe = new Map<string, { seq: number; at_ms: number }>();
  readonly consumers = new Map<string, MemConsumer>();
  constructor(readonly spec: StreamSpec) {}
}

export class MemoryQueue implements Queue {
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly ackWait_ms: number;
  private readonly streams = new Map<string, MemStream>();
  private readonly attachments = new Set<AttachmentCore>();
  private readonly servers: Array<{ subject: string; queueGroup: string | undefined; responder: Responder }> = [];
  /** Round-robin position per queue group, so a group's members share requests. */
  private readonly groupTurn = new Map<string, number>();
  private dispatchScheduled = new Set<MemConsumer>();

  constructor(opts: MemoryQueueOptions) {
    this.clock = opts.clock;
    this.log = opts.log;
    this.ackWait_ms = opts.ackWait_ms ?? ACK_WAIT_MS;
  }

  async ensureStreams(): Promise<void> {
    for (const spec of streamSpecs()) {
      if (!this.streams.has(spec.name)) this.streams.set(spec.name, new MemStream(spec));
    }
  }

  private streamFor(subject: string): MemStream {
    for (const s of this.streams.values()) {
      if (s.spec.subjects.some((p) => subjectMatches(p, subject))) return s;
    }
    // JetStream answers a publish nothing captures with "no responders"; so do we.
    throw new Error(`queue: no stream captures subject ${JSON.stringify(subject)}`);
  }

  async ensureMailbox(subject: string, group: string): Promise<void> {
    const stream = this.streamFor(subject);
    const durable = durableName(group);
    const existing = stream.consumers.get(durable);
    if (existing && existing.filter === subject) return;
    // As the broker: one durable name per stream, so a group already used on another
    // subject cannot be a second mailbox (e.g. handles `bob` and `bob-control` collide).
    if (existing) throw new Error(`queue: mailbox ${group} already exists on ${existing.filter}, not ${subject}`);
    const c = new MemConsumer(durable, group, subject);
    stream.consumers.set(durable, c);
    // Deliver all: a new mailbox owes everything the stream still holds on its subject.
    if (stream.spec.retention === "interest") {
      for (const m of stream.msgs.values()) if (subjectMatches(subject, m.subject)) m.interest.add(durable);
    }
  }

  async deleteMailbox(subject: string, group: string): Promise<void> {
    const stream = this.streamFor(subject);
    const durable = durableName(group);
    const c = stream.consumers.get(durable);
    if (c) {
      stream.consumers.delete(durable);
      for (const t of c.pending.values()) t.cancel();
      for (const t of c.delayed.values()) t.cancel();
      for (const w of c.waiting.splice(0)) w.sink.end(new Error("consumer deleted"));
    }
    // A seat mail stream keeps mail without a mailbox, so deleting one purges its subject;
    // an interest stream drops what no other mailbox still owes.
    const mail = AGENT_STREAMS.includes(stream.spec.name);
    for (const m of [...stream.msgs.values()]) {
      if (mail ? subjectMatches(subject, m.subject) : c !== undefined) this.release(stream, m, durable);
    }
  }

  async resetMailbox(subject: string, group: string): Promise<boolean> {
    const { stream, c } = this.mailboxOf(subject, group);
    this.restartAt(stream, c, this.ackFloor(c));
    return true;
  }

  async rewindMailbox(subject: string, group: string): Promise<boolean> {
    const { stream, c } = this.mailboxOf(subject, group);
    let first: number | null = null;
    for (const m of stream.msgs.values()) {
      if (!this.owes(stream, c, m)) continue;
      first = m.seq; // in sequence order: the first one owed is the first stored for the subject
      break;
    }
    this.restartAt(stream, c, first === null ? stream.lastSeq : first - 1);
    return true;
  }

  private mailboxOf(subject: string, group: string): { stream: MemStream; c: MemConsumer } {
    const stream = this.streamFor(subject);
    const c = stream.consumers.get(durableName(group));
    if (!c || c.filter !== subject) throw new Error(`queue: mailbox ${group} on ${subject}: no such mailbox`);
    return { stream, c };
  }

  /**
   * The broker's ack floor: below the oldest delivery not yet acknowledged (ack-pending,
   * NAKed and waiting to go again, or held back by a delayed NAK), or the last delivered
   * when none is.
   */
  private ackFloor(c: MemConsumer): number {
    let floor = c.cursor;
    for (const seq of [...c.pending.keys(), ...c.delayed.keys(), ...c.redeliver]) floor = Math.min(floor, seq - 1);
    return floor;
  }

  /**
   * As nats-server's consumer reset: nothing is pending any more, delivery counts start
   * again, and the next delivery is the first message owed above `floor`.
   */
  private restartAt(stream: MemStream, c: MemConsumer, floor: number): void {
    for (const t of c.pending.values()) t.cancel();
    for (const t of c.delayed.values()) t.cancel();
    c.pending.clear();
    c.delayed.clear();
    c.redeliver.splice(0);
    c.deliveries.clear();
    c.cursor = floor;
    this.scheduleDispatch(stream, c);
  }

  async listMailboxes(): Promise<MailboxRef[]> {
    const out: MailboxRef[] = [];
    for (const name of AGENT_STREAMS) {
      for (const c of this.streams.get(name)?.consumers.values() ?? []) {
        const ref = parseMailbox(c.filter, c.group);
        if (ref) out.push(ref);
      }
    }
    return out;
  }

  attach(subject: string, group: string, handler: Handler, opts: AttachOptions = {}): Promise<Attachment> {
    return this.attachRunner(subject, group, { kind: "each", handler }, opts);
  }

  attachBatch(subject: string, group: string, handler: BatchHandler, opts: BatchAttachOptions): Promise<Attachment> {
    return this.attachRunner(subject, group, { kind: "drain", handler }, opts);
  }

  private async attachRunner(subject: string, group: string, runner: Runner, opts: CoreOptions): Promise<Attachment> {
    await this.ensureMailbox(subject, group);
    const stream = this.streamFor(subject);
    const source: MailboxSource = {
      pull: (batch, sink, mode) => this.pull(stream, durableName(group), batch, sink, mode),
      deadLetter: async (m, reason) => {
        const copy = deadLetterCopy(stream.spec.name, m.delivery, group, reason);
        await this.publish(copy.subject, m.delivery.data, { msgId: copy.msgId, headers: copy.headers });
      },
      // As a core subscription on a seat mailbox's subject: rung by every publish on it.
      ...(AGENT_STREAMS.includes(stream.spec.name) ? { doorbell: (ring: () => void) => this.listen(subject, ring) } : {}),
    };
    const core: AttachmentCore = new AttachmentCore(source, runner, this.clock, this.log.child({ subject, group }), opts, () => this.attachments.delete(core));
    this.attachments.add(core);
    core.start();
    return core;
  }

  /** Core-NATS listeners by exact subject: each publish on it calls them, stored or not. */
  private readonly listeners = new Map<string, Set<() => void>>();

  private listen(subject: string, ring: () => void): () => void {
    const set = this.listeners.get(subject) ?? new Set<() => void>();
    set.add(ring);
    this.listeners.set(subject, set);
    return () => {
      set.delete(ring);
      if (set.size === 0 && this.listeners.get(subject) === set) this.listeners.delete(subject);
    };
  }

  async publish(subject: string, data: Uint8Array, opts: PublishOptions = {}): Promise<PublishResult> {
    for (const ring of this.listeners.get(subject) ?? []) queueMicrotask(ring);
    const stream = this.streamFor(subject);
    // As the broker: a publish that expected another stream is refused, not stored.
    const expected = Object.entries(opts.headers ?? {}).find(([k]) => k.toLowerCase() === H_EXPECTED_STREAM.toLowerCase())?.[1];
    if (expected !== undefined && expected !== stream.spec.name) throw new Error(`expected stream does not match (${expected}, subject ${subject} is on ${stream.spec.name})`);
    const now = this.clock.now();
    this.prune(stream, now);
    if (opts.msgId !== undefined) {
      const seen = stream.dedupe.get(opts.msgId);
      if (seen) return { seq: seen.seq, duplicate: true };
    }
    const seq = ++stream.lastSeq;
    if (opts.msgId !== undefined) stream.dedupe.set(opts.msgId, { seq, at_ms: now });
    const headers = { ...(opts.headers ?? {}) };
    if (opts.msgId !== undefined) headers[H_MSG_ID] = opts.msgId;
    const interest = new Set<string>();
    for (const c of stream.consumers.values()) if (subjectMatches(c.filter, subject)) interest.add(c.durable);
    // Interest retention: a message no mailbox covers is discarded at the publish.
    if (stream.spec.retention === "interest" && interest.size === 0) return { seq, duplicate: false };
    stream.msgs.set(seq, { seq, subject, data, headers, msgId: opts.msgId, at_ms: now, interest });
    if (stream.spec.max_msgs > 0) {
      for (const s of stream.msgs.keys()) {
        if (stream.msgs.size <= stream.spec.max_msgs) break;
        stream.msgs.delete(s); // discard old
      }
    }
    for (const c of stream.consumers.values()) if (subjectMatches(c.filter, subject)) this.scheduleDispatch(stream, c);
    return { seq, duplicate: false };
  }

  /** Drops ids past the de-duplication window and, on limits streams, messages past max age. */
  private prune(stream: MemStream, now: number): void {
    for (const [id, seen] of stream.dedupe) {
      if (now - seen.at_ms >= stream.spec.duplicate_window_ms) stream.dedupe.delete(id);
    }
    if (stream.spec.max_age_ms > 0) {
      for (const m of stream.msgs.values()) {
        if (now - m.at_ms < stream.spec.max_age_ms) break; // in sequence order, so in age order
        stream.msgs.delete(m.seq);
      }
    }
  }

  private owes(stream: MemStream, c: MemConsumer, m: StoredMsg): boolean {
    if (!subjectMatches(c.filter, m.subject)) return false;
    return stream.spec.retention === "interest" ? m.interest.has(c.durable) : true;
  }

  /**
   * A consumer is done with m (acked or terminated): interest streams forget it once nobody
   * owes it; a seat mail stream's reader trims it (queue/trim.ts does that on a cadence; here
   * at once, which nobody can tell apart but by the reruns a revival would make).
   */
  private release(stream: MemStream, m: StoredMsg, durable: string): void {
    if (AGENT_STREAMS.includes(stream.spec.name)) {
      stream.msgs.delete(m.seq);
      return;
    }
    if (stream.spec.retention !== "interest") return;
    m.interest.delete(durable);
    if (m.interest.size === 0) stream.msgs.delete(m.seq);
  }

  private pull(stream: MemStream, durable: string, batch: number, sink: PullSink, mode: PullMode): void {
    const c = stream.consumers.get(durable);
    if (!c) {
      queueMicrotask(() => sink.end(new Error("consumer not found")));
      return;
    }
    this.expireWaiting(c);
    c.waiting.push({ batch, remaining: batch, mode, sink, expires_at_ms: this.clock.now() + PULL_EXPIRES_MS });
    // As the broker's 408 at the expiry itself: an attachment with a doorbell naps after it.
    this.clock.setTimeout(() => this.expireWaiting(c), PULL_EXPIRES_MS);
    this.scheduleDispatch(stream, c);
  }

  /** Ends waiting pulls past their expiry. Bounds the list by the pulls made in one expiry period. */
  private expireWaiting(c: MemConsumer): void {
    const now = this.clock.now();
    // Taken out first, ended after: ending a pull can start the next one, which changes the list.
    const expired = c.waiting.filter((w) => w.expires_at_ms <= now);
    for (const w of expired) c.waiting.splice(c.waiting.indexOf(w), 1);
    for (const w of expired) w.sink.end();
  }

  /** Deliveries leave on a microtask, never inside the publisher's or settler's call. */
  private scheduleDispatch(stream: MemStream, c: MemConsumer): void {
    if (this.dispatchScheduled.has(c)) return;
    this.dispatchScheduled.add(c);
    queueMicrotask(() => {
      this.dispatchScheduled.delete(c);
      this.dispatch(stream, c);
    });
  }

  private dispatch(stream: MemStream, c: MemConsumer): void {
    if (stream.consumers.get(c.durable) !== c) return;
    this.expireWaiting(c);
    // Bounded by the waiting pulls' batches and by the messages present.
    while (c.waiting.length > 0) {
      const m = this.next(stream, c);
      if (!m) break;
      const w = c.waiting.shift()!;
      w.remaining -= 1;
      // As nats-server's wait queue: a pull with room left goes to the back, so the
      // next message (a hand-back, say) reaches the next waiting pull first.
      if (w.remaining > 0) c.waiting.push(w);
      const count = (c.deliveries.get(m.seq) ?? 0) + 1;
      c.deliveries.set(m.seq, count);
      c.pending.set(m.seq, this.clock.setTimeout(() => this.lapse(stream, c, m.seq), this.ackWait_ms));
      w.sink.message(this.raw(stream, c, m, count));
      if (w.remaining === 0) w.sink.end();
    }
    // Nothing more is waiting: as the broker answers a no_wait pull that has had something,
    // each such drain pull ends now (408) with what it got. Ended outside the scan, since an
    // end may make the next pull at once.
    const over = c.waiting.filter((w) => w.mode === "drain" && w.remaining < w.batch);
    if (over.length === 0) return;
    c.waiting.splice(0, c.waiting.length, ...c.waiting.filter((w) => !over.includes(w)));
    for (const w of over) w.sink.end();
  }

  private next(stream: MemStream, c: MemConsumer): StoredMsg | null {
    while (c.redeliver.length > 0) {
      const seq = c.redeliver.shift()!;
      const m = stream.msgs.get(seq);
      if (m && this.owes(stream, c, m)) return m;
    }
    for (const m of stream.msgs.values()) {
      if (m.seq <= c.cursor || !this.owes(stream, c, m)) continue;
      c.cursor = m.seq;
      return m;
    }
    return null;
  }

  /** The ack wait passed with the delivery unsettled: it goes back, unless its budget is spent. */
  private lapse(stream: MemStream, c: MemConsumer, seq: number): void {
    if (!c.pending.delete(seq)) return;
    // As nats-server: past max_deliver a message is simply not delivered again.
    if ((c.deliveries.get(seq) ?? 0) >= MAX_DELIVERIES) return;
    c.redeliver.push(seq);
    this.scheduleDispatch(stream, c);
  }

  private raw(stream: MemStream, c: MemConsumer, m: StoredMsg, count: number): RawMessage {
    const delivery: Delivery = {
      subject: m.subject,
      data: m.data,
      headers: { ...m.headers },
      msgId: m.msgId,
      deliveryCount: count,
      streamSeq: m.seq,
    };
    const settle = (how: "ack" | "nak" | "term") => async (delay_ms?: number) => {
      const timer = c.pending.get(m.seq);
      // Settling a delivery that already lapsed back is a no-op, as on the broker.
      if (!timer || c.deliveries.get(m.seq) !== count) return;
      timer.cancel();
      c.pending.delete(m.seq);
      if (how === "nak") {
        if (count >= MAX_DELIVERIES) return;
        if (delay_ms !== undefined && delay_ms > 0) {
          // As the broker's delayed NAK: nobody gets it until the delay ends.
          c.delayed.set(
            m.seq,
            this.clock.setTimeout(() => {
              if (!c.delayed.delete(m.seq)) return;
              c.redeliver.push(m.seq);
              this.scheduleDispatch(stream, c);
            }, delay_ms),
          );
          return;
        }
        c.redeliver.push(m.seq);
        this.scheduleDispatch(stream, c);
        return;
      }
      c.deliveries.delete(m.seq);
      this.release(stream, m, c.durable);
    };
    return { delivery, ack: settle("ack"), nak: settle("nak"), term: settle("term") };
  }

  async deadLetters(): Promise<DeadLetter[]> {
    const stream = this.streams.get(STREAM_DLQ);
    if (!stream) return [];
    this.prune(stream, this.clock.now());
    const msgs = [...stream.msgs.values()].slice(-DEAD_LETTER_LIST_MAX);
    return msgs.map((m) => {
      const headers = { ...m.headers };
      return parseDeadLetter(m.seq, m.subject, headers, m.data);
    });
  }

  async deadLetter(id: number): Promise<DeadLetter | null> {
    const stream = this.streams.get(STREAM_DLQ);
    if (!stream) return null;
    this.prune(stream, this.clock.now());
    const m = stream.msgs.get(id);
    return m ? parseDeadLetter(m.seq, m.subject, { ...m.headers }, m.data) : null;
  }

  replayDeadLetter(id: number): Promise<{ seq: number; duplicate: boolean } | null> {
    return replayDeadLetterVia(this, id);
  }

  async deleteDeadLetter(id: number): Promise<boolean> {
    return this.streams.get(STREAM_DLQ)?.msgs.delete(id) ?? false;
  }

  async scatter(subject: string, data: Uint8Array, opts: ScatterOptions): Promise<Answer[]> {
    const answers: Answer[] = [];
    if (opts.responders <= 0) return answers;
    const chosen = this.chooseServers(subject);
    if (chosen.length === 0) return answers; // as a 503: nobody will answer
    const request: Answer = { data, headers: { ...(opts.headers ?? {}) } };
    return new Promise<Answer[]>((resolve) => {
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        timer.cancel();
        resolve(answers);
      };
      const timer = this.clock.setTimeout(finish, opts.budget_ms);
      for (const s of chosen) {
        s.responder(request).then(
          (answer) => {
            if (done || answer === null) return;
            answers.push({ data: answer, headers: {} });
            if (answers.length >= opts.responders) finish();
          },
          (error) => this.log.warn("queue_serve_failed", { subject, error }),
        );
      }
    });
  }

  private chooseServers(subject: string): Array<{ responder: Responder }> {
    const out: Array<{ responder: Responder }> = [];
    const groups = new Map<string, Responder[]>();
    for (const s of this.servers) {
      if (!subjectMatches(s.subject, subject)) continue;
      if (s.queueGroup === undefined) out.push(s);
      else groups.set(s.queueGroup, [...(groups.get(s.queueGroup) ?? []), s.responder]);
    }
    for (const [name, members] of groups) {
      const turn = this.groupTurn.get(name) ?? 0;
      this.groupTurn.set(name, turn + 1);
      out.push({ responder: members[turn % members.length]! });
    }
    return out;
  }

  async serve(subject: string, responder: Responder, queueGroup?: string): Promise<{ stop(): void }> {
    const entry = { subject, queueGroup, responder };
    this.servers.push(entry);
    return {
      stop: () => {
        const i = this.servers.indexOf(entry);
        if (i >= 0) this.servers.splice(i, 1);
      },
    };
  }

  async close(): Promise<void> {
    for (const a of [...this.attachments]) await a.detach();
    // A delayed NAK's timer would outlive the queue (and keep a process alive): what it
    // held back stays in the stream, as on a broker that stopped.
    for (const stream of this.streams.values()) for (const c of stream.consumers.values()) for (const t of c.delayed.values()) t.cancel();
    this.servers.splice(0);
  }
}
