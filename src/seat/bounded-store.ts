// Every lease-store call the seat host makes is bounded, in time and in number. A call
// that has not answered within the bound is answered `unknown` (or StoreUnavailable for
// reads): it says nothing about ownership, which is exactly what an unanswered call means.
// Without the bound one hung request would stall the heartbeat, and with it every renewal
// on the node. The calls in flight at once are bounded too (LEASE_CALLS_IN_FLIGHT); one
// that waits out its time bound for a turn is answered the same way, and never sent.
import type { Clock } from "../clock.ts";
import { InFlightLimit } from "../in-flight.ts";
import {
  StoreUnavailable,
  type AcquireOptions,
  type AcquireResult,
  type LeaseMeta,
  type LeaseStore,
  type LeaseView,
  type ReleaseResult,
  type RenewResult,
} from "../coord/contract.ts";

/**
 * Lease-store calls a node keeps in flight at once. A renewal is one or two JetStream API
 * requests, and nats-server 2.15.2 drops its whole API queue — every client's pending
 * requests, every node's on that member — once 10,000 are waiting
 * (JSDefaultRequestQueueLimit). A node holding 10,000 seats that renewed them all at once
 * did that on every beat: 9,949 renewals timed out, every seat went stale, and 445 of
 * 5,000 messages started a turn (bench/scale.ts --seats 10000). 128 leaves that queue to a
 * member's leaves and peers too, and at a few ms a call still renews 10,000 seats in
 * about a second.
 */
export const LEASE_CALLS_IN_FLIGHT = 128;

const TIMED_OUT = Symbol("timed out");

export class BoundedLeaseStore implements LeaseStore {
  private readonly limit: InFlightLimit;

  constructor(
    private readonly inner: LeaseStore,
    private readonly clock: Clock,
    private readonly bound_ms: () => number,
    in_flight = LEASE_CALLS_IN_FLIGHT,
  ) {
    this.limit = new InFlightLimit(in_flight);
  }

  /** `p` once a slot is free, or TIMED_OUT when the bound passes first (waiting included). */
  private race<T>(p: () => Promise<T>): Promise<T | typeof TIMED_OUT> {
    const answered = new AbortController();
    const expired = new AbortController();
    const timeout: Promise<typeof TIMED_OUT> = this.clock.sleep(this.bound_ms(), answered.signal).then(
      () => {
        expired.abort();
        return TIMED_OUT;
      },
      () => TIMED_OUT,
    );
    const answer: Promise<T> = this.limit.run(p, expired.signal).finally(() => answered.abort());
    // A wait given up at the bound rejects after the race is decided: nothing to report.
    answer.catch(() => undefined);
    return Promise.race<T | typeof TIMED_OUT>([answer, timeout]);
  }

  private async call<T>(what: string, p: () => Promise<T>, onTimeout: (error: string) => T): Promise<T> {
    let r: T | typeof TIMED_OUT;
    try {
      r = await this.race(p);
    } catch (err) {
      return onTimeout(`${what}: ${(err as Error).message}`);
    }
    return r === TIMED_OUT ? onTimeout(`${what}: no answer within ${this.bound_ms()} ms`) : r;
  }

  acquire(key: string, opts: AcquireOptions): Promise<AcquireResult> {
    return this.call("acquire", () => this.inner.acquire(key, opts), (error) => ({ ok: false, rule: "unknown", error }));
  }
  renew(key: string, owner: string, epoch: number, meta?: LeaseMeta): Promise<RenewResult> {
    return this.call("renew", () => this.inner.renew(key, owner, epoch, meta), (error) => ({ status: "unknown", error }));
  }
  release(key: string, owner: string, epoch: number): Promise<ReleaseResult> {
    return this.call("release", () => this.inner.release(key, owner, epoch), () => "unknown" as const);
  }
  get(key: string): Promise<LeaseView | null> {
    return this.read("get", () => this.inner.get(key));
  }
  list(prefix: string): Promise<LeaseView[]> {
    return this.read("list", () => this.inner.list(prefix));
  }
  listWatched(prefix: string, fresh_within_ms: number): Promise<LeaseView[]> {
    return this.read("listWatched", () => this.inner.listWatched(prefix, fresh_within_ms));
  }
  protocolFloor(): Promise<number | null> {
    return this.read("protocolFloor", () => this.inner.protocolFloor());
  }
  now(): Promise<number> {
    return this.read("now", () => this.inner.now());
  }

  private async read<T>(what: string, p: () => Promise<T>): Promise<T> {
    const r = await this.race(p);
    if (r === TIMED_OUT) throw new StoreUnavailable(`${what}: no answer within ${this.bound_ms()} ms`);
    return r;
  }
}
