// A fleet of seat hosts in one process: one in-memory coordination store and one in-memory
// broker shared by every node (as one NATS cluster is), each node with its own store
// faults, its own view of the clock (so it can be frozen, as SIGSTOP freezes a process),
// and a queue handle that dies with it. The host tests and the simulation both drive it.
import { FakeClock, type Clock, type Timer } from "../../src/clock.ts";
import { MemoryCoordination, StoreFaults } from "../../src/coord/index.ts";
import type { LeaseStore } from "../../src/coord/contract.ts";
import { memoryLogger, type Logger, type MemorySink } from "../../src/log.ts";
import { ack, defer, nak, type AttachOptions, type Attachment, type BatchAttachOptions, type BatchHandler, type Delivery, type Handler, type Outcome, type Queue } from "../../src/queue/contract.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { mailbox, seatMailboxes } from "../../src/queue/topics.ts";
import { SeatHost, type BatchInboxHandler, type InboxHandler, type SeatHooks, type TurnContext } from "../../src/seat/host.ts";
import type { SeatSpec } from "../../src/seat/placement.ts";
import { Watchdog } from "../../src/seat/watchdog.ts";

/**
 * One node's view of the shared clock. While frozen, none of its timers fire (they queue,
 * one run per timer however many ticks it missed, as an overdue interval fires once on
 * SIGCONT); time itself keeps moving.
 */
export class NodeClock implements Clock {
  private frozen = false;
  private readonly queued = new Map<object, () => void>();
  private dead = false;

  constructor(private readonly base: FakeClock) {}

  now(): number {
    return this.base.now();
  }
  setTimeout(fn: () => void, delay_ms: number): Timer {
    const key = {};
    const t = this.base.setTimeout(() => this.fire(key, fn), delay_ms);
    return { cancel: () => (t.cancel(), this.queued.delete(key)) };
  }
  setInterval(fn: () => void, interval_ms: number): Timer {
    const key = {};
    const t = this.base.setInterval(() => this.fire(key, fn), interval_ms);
    return { cancel: () => (t.cancel(), this.queued.delete(key)) };
  }
  sleep(delay_ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const onAbort = () => {
        timer.cancel();
        reject(signal?.reason);
      };
      const timer = this.setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, delay_ms);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
  freeze(): void {
    this.frozen = true;
  }
  thaw(): void {
    this.frozen = false;
    const run = [...this.queued.values()];
    this.queued.clear();
    for (const fn of run) if (!this.dead) fn();
  }
  /** The process is gone: nothing of it ever runs again. */
  kill(): void {
    this.dead = true;
    this.queued.clear();
  }
  get isFrozen(): boolean {
    return this.frozen;
  }
  private fire(key: object, fn: () => void): void {
    if (this.dead) return;
    if (this.frozen) this.queued.set(key, fn);
    else fn();
  }
}

/** Wraps a handler (one delivery or a drain) so it runs only while its process does. */
export type HandlerGate = <A, R>(h: (a: A) => Promise<R>) => (a: A) => Promise<R>;

/** A node's handle on the shared broker: its attachments die with the process. */
class NodeQueue implements Queue {
  readonly attachments = new Set<Attachment>();
  constructor(
    private readonly inner: MemoryQueue,
    private readonly gate: HandlerGate,
  ) {}
  ensureStreams() {
    return this.inner.ensureStreams();
  }
  ensureMailbox(s: string, g: string) {
    return this.inner.ensureMailbox(s, g);
  }
  deleteMailbox(s: string, g: string) {
    return this.inner.deleteMailbox(s, g);
  }
  resetMailbox(s: string, g: string) {
    return this.inner.resetMailbox(s, g);
  }
  rewindMailbox(s: string, g: string) {
    return this.inner.rewindMailbox(s, g);
  }
  listMailboxes() {
    return this.inner.listMailboxes();
  }
  async attach(subject: string, group: string, handler: Handler, opts?: AttachOptions): Promise<Attachment> {
    return this.track(await this.inner.attach(subject, group, this.gate(handler), opts));
  }
  async attachBatch(subject: string, group: string, handler: BatchHandler, opts: BatchAttachOptions): Promise<Attachment> {
    return this.track(await this.inner.attachBatch(subject, group, this.gate(handler), opts));
  }
  private track(a: Attachment): Attachment {
    this.attachments.add(a);
    const owner = this.attachments;
    return {
      quiesce: () => a.quiesce(),
      resume: () => a.resume(),
      hold: (n) => a.hold(n),
      releaseHold: (n) => a.releaseHold(n),
      ring: () => a.ring(),
      get holds() {
        return a.holds;
      },
      get quiesced() {
        return a.quiesced;
      },
      get inFlight() {
        return a.inFlight;
      },
      get backingOffUntil() {
        return a.backingOffUntil;
      },
      get holding() {
        return a.holding;
      },
      idle: () => a.idle(),
      detach: async () => {
        owner.delete(a);
        await a.detach();
      },
    };
  }
  publish(...args: Parameters<Queue["publish"]>) {
    return this.inner.publish(...args);
  }
  deadLetters() {
    return this.inner.deadLetters();
  }
  deadLetter(id: number) {
    return this.inner.deadLetter(id);
  }
  replayDeadLetter(id: number) {
    return this.inner.replayDeadLetter(id);
  }
  deleteDeadLetter(id: number) {
    return this.inner.deleteDeadLetter(id);
  }
  scatter(...args: Parameters<Queue["scatter"]>) {
    return this.inner.scatter(...args);
  }
  serve(...args: Parameters<Queue["serve"]>) {
    return this.inner.serve(...args);
  }
  async close() {}
  /** kill -9: the connection drops; nothing is NAKed, nothing settles. */
  async dropAll(): Promise<void> {
    for (const a of [...this.attachments]) await a.detach();
    this.attachments.clear();
  }
}

export interface TurnRecord {
  node: string;
  handle: string;
  epoch: number;
  seq: number;
  at_ms: number;
}

export interface FleetNode {
  id: string;
  host: SeatHost;
  faults: StoreFaults;
  clock: NodeClock;
  queue: NodeQueue;
  sink: MemorySink;
  log: Logger;
  watchdog: Watchdog;
  exits: number[];
  alive: boolean;
  /** Resolves when this incarnation is killed (crash or watchdog exit). */
  died: Promise<void>;
  markDead: () => void;
}

export interface NodeSpec {
  id: string;
  roles?: string[];
  labels?: Record<string, string>;
  protocol?: number;
  takeover?: boolean;
  hooks?: SeatHooks;
  /** The agent engine's part; defaults to a turn of `turn_ms` that checks its fence. */
  handler?: InboxHandler;
  /** The agent engine's part for drains; preferred over handler (as the host does). */
  batchHandler?: BatchInboxHandler;
  watchdog?: boolean;
  /** Starts with its estate copy behind (host.setBehind): it claims nothing until level. */
  behind?: boolean;
}

export interface FleetOptions {
  ttl_ms: number;
  seats: SeatSpec[];
  /** How long a default turn runs, ms. */
  turn_ms?: number;
  /** Called when a turn is admitted (before it runs): the simulation checks ownership here. */
  onTurn?: (t: TurnRecord, node: FleetNode) => void;
  /** The rest of a default turn once its fence held (the memory simulation writes the
   * turn's rows here); false NAKs the delivery, as a turn that could not finish does. */
  afterTurn?: (t: TurnRecord, node: FleetNode, turn: TurnContext) => Promise<boolean>;
  /** Nodes without a handler of their own take drains: one default turn per delivery, run
   * one after another, each later one admitted again. */
  drain?: boolean;
}

export class Fleet {
  readonly clock = new FakeClock(Date.UTC(2026, 0, 1));
  readonly coord: MemoryCoordination;
  readonly queue: MemoryQueue;
  /** A store handle no node owns: the test's window on the truth. */
  readonly truth: LeaseStore;
  readonly nodes = new Map<string, FleetNode>();
  readonly turns: TurnRecord[] = [];
  /** Sizes of the drains default batch handlers were handed. */
  readonly drainSizes: number[] = [];
  /** Every node ever started, restarts included (nodes keeps only the latest per id). */
  readonly incarnations: FleetNode[] = [];
  private incarnation = 0;
  seats: SeatSpec[];

  constructor(readonly opts: FleetOptions) {
    const { log } = memoryLogger("warn", this.clock);
    this.coord = new MemoryCoordination({ clock: this.clock, log, lease_ttl_ms: opts.ttl_ms });
    this.queue = new MemoryQueue({ clock: this.clock, log });
    this.truth = this.coord.node().leases;
    this.seats = opts.seats;
  }

  async init(): Promise<void> {
    await this.queue.ensureStreams();
    for (const s of this.seats) for (const m of seatMailboxes(s.handle)) await this.queue.ensureMailbox(m.subject, m.group);
  }

  async setSeats(seats: SeatSpec[]): Promise<void> {
    this.seats = seats;
    for (const s of seats) for (const m of seatMailboxes(s.handle)) await this.queue.ensureMailbox(m.subject, m.group);
    for (const n of this.nodes.values()) if (n.alive) n.host.setSeats(seats);
  }

  async publish(handle: string, body = "hi"): Promise<void> {
    await this.queue.publish(mailbox(handle, "inbox").subject, new TextEncoder().encode(body));
  }

  async addNode(spec: NodeSpec): Promise<FleetNode> {
    const clock = new NodeClock(this.clock);
    const { log, sink } = memoryLogger("debug", clock);
    const faults = new StoreFaults(clock);
    const coord = this.coord.node({ faults, log, protocol: spec.protocol });
    const exits: number[] = [];
    let node!: FleetNode;
    // A frozen or dead process runs no handler: a delivery it holds waits with it.
    const gate: HandlerGate = (h) => async (d) => {
      while (node.clock.isFrozen && node.alive) await new Promise<void>((r) => this.clock.setTimeout(r, 10));
      if (!node.alive) return new Promise<never>(() => {});
      return h(d);
    };
    const queue = new NodeQueue(this.queue, gate);
    const watchdog = new Watchdog({ clock, threshold_ms: () => this.opts.ttl_ms, exit: (c) => void this.exit(node, c), notice: () => {} });
    const host = new SeatHost({
      node_id: spec.id,
      roles: spec.roles ?? ["data", "ingress", "seats", "workers"],
      labels: spec.labels,
      protocol: spec.protocol,
      broker: "member",
      leases: coord.leases,
      queue,
      clock,
      log,
      lease_ttl_ms: () => coord.lease_ttl_ms,
      takeover: spec.takeover,
      handler: spec.handler ?? this.defaultHandler(() => node),
      batchHandler: spec.batchHandler ?? (this.opts.drain && !spec.handler ? this.defaultBatchHandler(() => node) : undefined),
      hooks: spec.hooks,
      watchdog: spec.watchdog === false ? undefined : watchdog,
      owner: `${spec.id}:${(++this.incarnation).toString(16).padStart(8, "0")}`,
    });
    let markDead!: () => void;
    const died = new Promise<void>((r) => (markDead = r));
    node = { id: spec.id, host, faults, clock, queue, sink, log, watchdog, exits, alive: true, died, markDead };
    this.nodes.set(spec.id, node);
    this.incarnations.push(node);
    if (spec.watchdog !== false) watchdog.arm();
    if (spec.behind) host.setBehind(true);
    await host.start(this.seats);
    // Lets the first pass (which start() kicks off, not awaits) run to its next wait.
    await this.clock.advance(0);
    return node;
  }

  private defaultHandler(node: () => FleetNode): InboxHandler {
    return async (d: Delivery, turn: TurnContext) => {
      const n = node();
      const rec: TurnRecord = { node: n.id, handle: turn.handle, epoch: turn.epoch, seq: d.streamSeq, at_ms: this.clock.now() };
      this.turns.push(rec);
      this.opts.onTurn?.(rec, n);
      const turn_ms = this.opts.turn_ms ?? 0;
      if (turn_ms > 0) await n.clock.sleep(turn_ms);
      // The round boundary: a seat that moved mid-turn goes back to its new owner.
      if (!turn.fence()) return defer(`seat "${turn.handle}" moved mid-turn`);
      if (this.opts.afterTurn && !(await this.opts.afterTurn(rec, n, turn))) return nak();
      return ack();
    };
  }

  private defaultBatchHandler(node: () => FleetNode): BatchInboxHandler {
    const one = this.defaultHandler(node);
    return async (ds: Delivery[], turn: TurnContext) => {
      this.drainSizes.push(ds.length);
      const out: Outcome[] = [];
      for (const [i, d] of ds.entries()) {
        // The host admitted the drain, so its first turn; every later one asks again.
        if (i > 0 && !turn.admit()) break;
        const o = await one(d, turn);
        out.push(o);
        if (o.kind === "defer") break;
      }
      while (out.length < ds.length) out.push(defer(`seat "${turn.handle}" is not admitting turns`));
      return out;
    };
  }

  /** kill -9: no release, no detach handshake; leases lapse at the TTL. */
  async crash(id: string): Promise<void> {
    const n = this.nodes.get(id);
    if (!n || !n.alive) return;
    n.alive = false;
    n.markDead();
    n.clock.kill();
    n.watchdog.disarm();
    await n.queue.dropAll();
    await n.host.abandon();
  }

  private async exit(n: FleetNode, code: number): Promise<void> {
    n.exits.push(code);
    await this.crash(n.id);
  }

  /** SIGTERM: drain, then stop. */
  async drain(id: string): Promise<void> {
    const n = this.nodes.get(id);
    if (!n || !n.alive) return;
    n.watchdog.disarm();
    // A node killed mid-drain never finishes it: its clock stopped with it.
    const finished = await Promise.race([n.host.drain().then(() => n.host.stop()).then(() => true), n.died.then(() => false)]);
    if (!finished) return;
    n.alive = false;
    n.markDead();
    n.clock.kill();
  }

  async advance(ms: number, step_ms = 100): Promise<void> {
    for (let t = 0; t < ms; t += step_ms) await this.clock.advance(Math.min(step_ms, ms - t));
  }

  live(): FleetNode[] {
    return [...this.nodes.values()].filter((n) => n.alive);
  }

  /** handle → ids of live nodes holding it established. */
  holders(): Map<string, string[]> {
    const out = new Map<string, string[]>();
    for (const n of this.live()) for (const h of n.host.held()) out.set(h, [...(out.get(h) ?? []), n.id]);
    return out;
  }

  async stopAll(): Promise<void> {
    for (const n of this.live()) {
      n.watchdog.disarm();
      await n.host.abandon();
      n.clock.kill();
      n.alive = false;
    }
  }
}
