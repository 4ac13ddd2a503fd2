// Every lease-store call the seat host makes is bounded. A call that has not answered
// within the bound is answered `unknown` (or StoreUnavailable for reads): it says nothing
// about ownership, which is exactly what an unanswered call means. Without the bound one
// hung request would stall the heartbeat, and with it every renewal on the node.
import type { Clock } from "../clock.ts";
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

const TIMED_OUT = Symbol("timed out");

export class BoundedLeaseStore implements LeaseStore {
  constructor(
    private readonly inner: LeaseStore,
    private readonly clock: Clock,
    private readonly bound_ms: () => number,
  ) {}

  private race<T>(p: Promise<T>): Promise<T | typeof TIMED_OUT> {
    const stop = new AbortController();
    const timeout: Promise<typeof TIMED_OUT> = this.clock.sleep(this.bound_ms(), stop.signal).then(
      () => TIMED_OUT,
      () => TIMED_OUT,
    );
    const answer: Promise<T> = p.finally(() => stop.abort());
    return Promise.race<T | typeof TIMED_OUT>([answer, timeout]);
  }

  private async call<T>(what: string, p: () => Promise<T>, onTimeout: (error: string) => T): Promise<T> {
    let r: T | typeof TIMED_OUT;
    try {
      r = await this.race(p());
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
    const r = await this.race(p());
    if (r === TIMED_OUT) throw new StoreUnavailable(`${what}: no answer within ${this.bound_ms()} ms`);
    return r;
  }
}
