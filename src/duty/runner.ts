// The duty runner (spec: Seat Ownership § Singleton duties): each duty is a loop that, every
// tick, claims `worker:{duty}` in the duty lease bucket (ungated: the protocol gate is about
// seats and presence, never duties), runs one tick, and keeps the lease for the next one.
// Claimed per tick rather than held, so there is no handoff protocol: a graceful stop gives
// every duty back after its last tick (duty_released) and a peer takes it on its next tick;
// a dead node's duty lapses, and a peer takes it on the first tick after the TTL.
//
// A claim that fails — the store unreachable, an answer lost — skips the tick: unknown
// ownership is not ownership, and assuming otherwise is how every node decides at once that
// it is the singleton. On one node (coordination.type local) the store is in this process
// and the answer is always yes, down the same code path.
import { randomBytes } from "node:crypto";
import { z } from "zod";
import type { Clock } from "../clock.ts";
import type { LeaseStore } from "../coord/contract.ts";
import type { Logger } from "../log.ts";
import { BoundedLeaseStore } from "../seat/bounded-store.ts";
import type { DutyBeat, Watchdog } from "../seat/watchdog.ts";
import { dutyKey } from "./duties.ts";

/**
 * A duty-lease call that has not answered within this long is answered unknown (the tick
 * is skipped). Ten seconds rides out a lease-bucket leader election (~4 s) and stays far
 * below the shortest duty TTL (30 s), so a slow claim never outlives what it claimed.
 */
export const DUTY_CLAIM_BOUND_MS = 10_000;

export const lastTickSchema = z.object({
  /** Clock ms when the tick began. */
  at: z.number(),
  duration_ms: z.number().nonnegative(),
  outcome: z.enum(["ok", "failed"]),
  /** What the tick did (a duty's own summary) or why it failed. */
  detail: z.string().max(500).optional(),
});
export type LastTick = z.infer<typeof lastTickSchema>;

export interface DutyContext {
  /** The duty lease's epoch for this tick (a fencing token for what the tick writes). */
  readonly epoch: number;
  /** Aborted when the node stops: a tick ends its work early and returns. */
  readonly signal: AbortSignal;
  /** A long tick stamps the watchdog between units of work: turning, not wedged. */
  beat(): void;
}

export interface DutyWork {
  readonly name: string;
  /** The duty lease's TTL, sized from the duty's own work (reason at its definition). */
  readonly ttl_ms: number;
  /** How long after a tick ends the next one is due. */
  nextTickIn(now_ms: number): number;
  /** One tick; returns a short summary for the last-tick record. Throws = a failed tick. */
  tick(ctx: DutyContext): Promise<string | void>;
}

export interface DutyRunnerOptions {
  node_id: string;
  /** A process incarnation (the node's own, seat/incarnation.ts); defaults to `{node_id}:{random}`. */
  owner?: string;
  /** coord.duties: its own bucket, so the seat lease TTL does not bound a duty's. */
  store: LeaseStore;
  clock: Clock;
  log: Logger;
  duties: DutyWork[];
  watchdog?: Watchdog;
  /** Per-call bound on duty-lease calls; defaults to DUTY_CLAIM_BOUND_MS. A node passes
   *  less when its watchdog threshold (the seat lease TTL) is shorter, so a hung claim is
   *  answered unknown before the watchdog would judge the loop wedged. */
  claim_bound_ms?: () => number;
  /** Take over a live duty lease an earlier incarnation of this node holds, when this
   *  answers true for its owner (the store lock proves it dead), as the seat host does. */
  takeover?: (owner: string) => boolean;
}

export interface DutyStatus {
  duty: string;
  held: boolean;
  epoch: number | null;
  last_tick: LastTick | null;
  /** Why the last tick was skipped, when it was. */
  skipped: string | null;
}

interface DutyState {
  work: DutyWork;
  key: string;
  epoch: number | null;
  last: LastTick | null;
  skipped: string | null;
  beat: DutyBeat | null;
  loop: Promise<void> | null;
  wake: AbortController | null;
}

export class DutyRunner {
  readonly owner: string;
  private readonly store: LeaseStore;
  private readonly states: DutyState[];
  private readonly stopSignal = new AbortController();
  private stopped = false;
  private started = false;

  constructor(private readonly o: DutyRunnerOptions) {
    this.owner = o.owner ?? `${o.node_id}:${randomBytes(4).toString("hex")}`;
    this.store = new BoundedLeaseStore(o.store, o.clock, o.claim_bound_ms ?? (() => DUTY_CLAIM_BOUND_MS));
    const names = new Set<string>();
    for (const d of o.duties) {
      if (names.has(d.name)) throw new Error(`duty ${d.name} is listed twice`);
      names.add(d.name);
    }
    this.states = o.duties.map((work) => ({ work, key: dutyKey(work.name), epoch: null, last: null, skipped: null, beat: null, loop: null, wake: null }));
  }

  /** Starts every duty loop; each ticks at once. */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    for (const s of this.states) {
      s.beat = this.o.watchdog?.watch(`duty:${s.work.name}`) ?? null;
      s.loop = this.run(s);
    }
    this.o.log.info("duty_runner_started", { duties: this.states.map((s) => s.work.name), owner: this.owner });
  }

  /** Wakes a duty now (e.g. a config apply changed what the scheduler evaluates). */
  poke(name: string): void {
    this.states.find((s) => s.work.name === name)?.wake?.abort();
  }

  /** Graceful: each loop finishes its tick under way, then every duty held is given back. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.stopSignal.abort(new Error("duty runner stopping"));
    for (const s of this.states) s.wake?.abort();
    await Promise.all(this.states.map((s) => s.loop));
    await Promise.all(this.states.map((s) => this.giveBack(s)));
  }

  /** As a dying process: the loops end and nothing is given back (tests and simulations). */
  abandon(): void {
    this.stopped = true;
    this.stopSignal.abort(new Error("abandoned"));
    for (const s of this.states) {
      s.wake?.abort();
      s.beat?.done();
    }
  }

  status(): DutyStatus[] {
    return this.states.map((s) => ({ duty: s.work.name, held: s.epoch !== null, epoch: s.epoch, last_tick: s.last, skipped: s.skipped }));
  }

  private async run(s: DutyState): Promise<void> {
    try {
      while (!this.stopped) {
        await this.turn(s);
        if (this.stopped) break;
        const wait = Math.max(0, s.work.nextTickIn(this.o.clock.now()));
        s.wake = new AbortController();
        try {
          await this.o.clock.sleep(wait, s.wake.signal);
        } catch {
          // poked or stopping
        }
        s.wake = null;
      }
    } finally {
      s.beat?.done();
    }
  }

  private async turn(s: DutyState): Promise<void> {
    s.beat?.beat();
    try {
      const epoch = await this.claim(s);
      if (epoch === null || this.stopped) return;
      const started = this.o.clock.now();
      let last: LastTick;
      try {
        const summary = await s.work.tick({ epoch, signal: this.stopSignal.signal, beat: () => s.beat?.beat() });
        last = { at: started, duration_ms: this.o.clock.now() - started, outcome: "ok", ...(summary ? { detail: summary.slice(0, 500) } : {}) };
      } catch (err) {
        const detail = (err instanceof Error ? err.message : String(err)).slice(0, 500);
        last = { at: started, duration_ms: this.o.clock.now() - started, outcome: "failed", detail };
        this.o.log.error("duty_tick_failed", { duty: s.work.name, epoch, error: err as Error });
      }
      s.last = last;
      this.o.log.debug("duty_tick", { duty: s.work.name, epoch, outcome: last.outcome, duration_ms: last.duration_ms });
      if (last.duration_ms > s.work.ttl_ms) this.o.log.warn("duty_tick_overran", { duty: s.work.name, duration_ms: last.duration_ms, ttl_ms: s.work.ttl_ms });
      // The last tick rides on the lease itself, so any node's GET /fleet shows it.
      s.beat?.beat();
      await this.stamp(s, epoch, last);
    } finally {
      s.beat?.rest();
    }
  }

  /** The lease for this tick: renewed when held, claimed when not; null = skip the tick. */
  private async claim(s: DutyState): Promise<number | null> {
    const meta = { node: this.o.node_id, ...(s.last ? { last_tick: s.last } : {}) };
    if (s.epoch !== null) {
      const r = await this.store.renew(s.key, this.owner, s.epoch, meta);
      if (r.status === "renewed") {
        s.skipped = null;
        return r.lease.epoch;
      }
      if (r.status === "unknown") {
        this.skip(s, `renew unknown: ${r.error}`, "duty_claim_unknown");
        return null;
      }
      this.o.log.warn("duty_lost", { duty: s.work.name, epoch: s.epoch });
      s.epoch = null;
    }
    const r = await this.store.acquire(s.key, {
      owner: this.owner,
      preferred: this.o.node_id,
      ttl_ms: s.work.ttl_ms,
      meta,
      gate: false,
      ...(this.o.takeover ? { takeover: this.o.takeover } : {}),
    });
    if (r.ok) {
      s.epoch = r.lease.epoch;
      s.skipped = null;
      this.o.log.info("duty_claimed", { duty: s.work.name, epoch: r.lease.epoch, ttl_ms: s.work.ttl_ms });
      return r.lease.epoch;
    }
    if (r.rule === "unknown") this.skip(s, `claim unknown: ${r.error}`, "duty_claim_unknown");
    else if (r.rule === "held") this.skip(s, `held by ${r.holder}`, null);
    else this.skip(s, `refused: ${r.rule}`, "duty_claim_refused");
    return null;
  }

  private skip(s: DutyState, why: string, event: string | null): void {
    const changed = s.skipped !== why;
    s.skipped = why;
    if (event && changed) this.o.log.warn(event, { duty: s.work.name, reason: why });
    else this.o.log.debug("duty_tick_skipped", { duty: s.work.name, reason: why });
  }

  private async stamp(s: DutyState, epoch: number, last: LastTick): Promise<void> {
    const r = await this.store.renew(s.key, this.owner, epoch, { node: this.o.node_id, last_tick: last });
    if (r.status === "lost") {
      this.o.log.warn("duty_lost", { duty: s.work.name, epoch });
      s.epoch = null;
    }
  }

  private async giveBack(s: DutyState): Promise<void> {
    if (s.epoch === null) return;
    const epoch = s.epoch;
    s.epoch = null;
    const r = await this.store.release(s.key, this.owner, epoch);
    if (r === "released") this.o.log.info("duty_released", { duty: s.work.name, epoch });
    else this.o.log.warn("duty_release_failed", { duty: s.work.name, epoch, result: r });
  }
}
