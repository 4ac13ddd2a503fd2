// The protocol gate's view of the lease bucket (spec: Mixed-version fleets). "Is any live
// presence or seat lease held at a lower protocol" is a question about every lease in the
// fleet; reading them all per claim made a cold node's claims cost the square of the seats.
// So while a node is claiming it keeps a watch-fed view of the bucket, reads the bucket's
// last write, waits for the view to reach it, and judges from the view: the answer a full
// read would give, at a cost that does not grow with the fleet. The view stops a minute
// after the last judgement, so a node that is not claiming takes in none of the fleet's
// heartbeats.
import type { Clock, Timer } from "../clock.ts";
import type { Logger } from "../log.ts";
import { StoreUnavailable, type KvEntry, type KvWatch } from "./contract.ts";
import { decodeLeaseKey, type Bucket } from "./bucket.ts";
import { countsForGate, decodeRecord } from "./record.ts";

/** Idle time before the view stops: a claiming pass judges every few seconds, so a minute
 *  keeps it warm across a pass and its next sweeps, and frees an idle node soon after. */
export const GATE_VIEW_IDLE_MS = 60_000;

interface Held {
  protocol: number;
  expires_at: number;
}

export class GateView {
  private watch: KvWatch | null = null;
  private starting: Promise<void> | null = null;
  private seen_revision = 0;
  /** Every presence and seat lease the view holds, by lease key. */
  private readonly held = new Map<string, Held>();
  /** The subset below this build's protocol: what a gate judgement walks. */
  private readonly lower = new Set<string>();
  private waiters: { revision: number; resolve: () => void; reject: (err: Error) => void }[] = [];
  private idle: Timer | null = null;

  constructor(
    private readonly bucket: Bucket,
    private readonly clock: Clock,
    private readonly protocol: number,
    private readonly wait_ms: number,
    private readonly log: Logger,
  ) {}

  get running(): boolean {
    return this.watch !== null;
  }

  /** Writes the view has taken in since it started (for the bench and tests). */
  taken_in = 0;

  /**
   * The lowest protocol below ours among live presence and seat leases, or null when
   * there is none. `except` is the key being claimed: its old record is being replaced.
   */
  async lowerFloor(now: number, except?: string): Promise<number | null> {
    await this.sync();
    let floor: number | null = null;
    for (const key of this.lower) {
      if (key === except) continue;
      const h = this.held.get(key)!;
      if (h.expires_at <= now) continue;
      if (floor === null || h.protocol < floor) floor = h.protocol;
    }
    return floor;
  }

  /** Lowest protocol among all live presence and seat leases. */
  async floor(now: number): Promise<number | null> {
    const lower = await this.lowerFloor(now);
    if (lower !== null) return lower;
    let floor: number | null = null;
    for (const h of this.held.values()) {
      if (h.expires_at <= now) continue;
      if (floor === null || h.protocol < floor) floor = h.protocol;
    }
    return floor;
  }

  stop(): void {
    this.idle?.cancel();
    this.idle = null;
    this.watch?.stop();
    this.watch = null;
    this.starting = null;
    this.held.clear();
    this.lower.clear();
    this.seen_revision = 0;
    // A judgement still waiting has no current view to judge from.
    const waiting = this.waiters;
    this.waiters = [];
    for (const w of waiting) w.reject(new StoreUnavailable(`gate view stopped before it reached revision ${w.revision}`));
  }

  private async sync(): Promise<void> {
    this.touch();
    if (!this.watch) {
      this.starting ??= this.start();
      await this.starting;
    }
    const target = await this.bucket.lastRevision();
    if (this.seen_revision >= target) return;
    await this.reach(target);
  }

  private async start(): Promise<void> {
    try {
      this.watch = await this.bucket.watch((e) => this.take(e), { includeCurrent: true });
      this.log.debug("gate_view_started", { bucket: this.bucket.bucket });
    } catch (err) {
      this.starting = null;
      throw err;
    }
  }

  private reach(revision: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const waiter = {
        revision,
        resolve: () => (timer.cancel(), resolve()),
        reject: (err: Error) => (timer.cancel(), reject(err)),
      };
      const timer = this.clock.setTimeout(() => {
        // A watch that fell behind may sit on a member that died: start afresh next time.
        this.stop();
      }, this.wait_ms);
      this.waiters.push(waiter);
    });
  }

  private take(entry: KvEntry): void {
    this.taken_in += 1;
    if (entry.revision > this.seen_revision) this.seen_revision = entry.revision;
    const key = decodeLeaseKey(entry.key);
    if (key !== null && countsForGate(key)) {
      const record = entry.operation === "put" ? decodeRecord(entry.value) : null;
      if (record) {
        this.held.set(key, { protocol: record.protocol, expires_at: entry.created + record.ttl_ms });
        if (record.protocol < this.protocol) this.lower.add(key);
        else this.lower.delete(key);
      } else {
        this.held.delete(key);
        this.lower.delete(key);
      }
    }
    if (this.waiters.length > 0) {
      const ready = this.waiters.filter((w) => w.revision <= this.seen_revision);
      this.waiters = this.waiters.filter((w) => w.revision > this.seen_revision);
      for (const w of ready) w.resolve();
    }
  }

  private touch(): void {
    this.idle?.cancel();
    this.idle = this.clock.setTimeout(() => {
      this.log.debug("gate_view_stopped", { bucket: this.bucket.bucket, taken_in: this.taken_in });
      this.stop();
    }, GATE_VIEW_IDLE_MS);
  }
}
