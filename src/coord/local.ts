// The in-memory twin of the coordination store: buckets that behave like JetStream KV with
// history 1 — revisions from one sequence per bucket, store timestamps from the injected
// Clock (so the store clock IS the Clock), compare-and-set on a key's last revision, delete
// and purge markers, and an age limit that removes a value silently (no watch event, as
// nats-server does for a stream without subject delete markers: 2.9.10 and 2.15.2 alike). The lease algorithm (leases.ts) runs on these unchanged, so
// `coordination.type: local` and the simulations get the same semantics as the fleet.
import type { Clock } from "../clock.ts";
import { CasConflict, type KvEntry, type KvWatch } from "./contract.ts";
import { filterMatches, validateWireKey, type Bucket } from "./bucket.ts";

type Op = KvEntry["operation"];

interface Watcher {
  filter: string;
  onEntry: (e: KvEntry) => void;
  stopped: boolean;
}

export class MemoryBucket implements Bucket {
  private seq = 0;
  /** The one message each key holds (history 1), markers included. */
  private readonly latest = new Map<string, KvEntry>();
  private watchers: Watcher[] = [];

  constructor(
    readonly bucket: string,
    readonly max_age_ms: number,
    private readonly clock: Clock,
  ) {}

  async get(key: string): Promise<KvEntry | null> {
    validateWireKey(key);
    const e = this.current(key);
    return e && e.operation === "put" ? copy(e) : null;
  }

  async at(key: string, revision: number): Promise<KvEntry | null> {
    validateWireKey(key);
    const e = this.current(key);
    return e && e.revision === revision ? copy(e) : null;
  }

  async create(key: string, value: Uint8Array): Promise<number> {
    validateWireKey(key);
    const e = this.current(key);
    if (e && e.operation === "put") throw new CasConflict(key, null);
    return this.write(key, value, "put");
  }

  async update(key: string, value: Uint8Array, revision: number): Promise<number> {
    validateWireKey(key);
    if (revision <= 0) throw new Error("version must be greater than 0");
    this.expect(key, revision);
    return this.write(key, value, "put");
  }

  async put(key: string, value: Uint8Array): Promise<number> {
    validateWireKey(key);
    return this.write(key, value, "put");
  }

  async delete(key: string, revision?: number): Promise<void> {
    validateWireKey(key);
    if (revision) this.expect(key, revision);
    this.write(key, new Uint8Array(0), "delete");
  }

  async purge(key: string, revision?: number): Promise<void> {
    validateWireKey(key);
    if (revision) this.expect(key, revision);
    this.write(key, new Uint8Array(0), "purge");
  }

  async removals(filter = ">"): Promise<KvEntry[]> {
    validateWireKey(filter, true);
    return this.live(filter)
      .filter((e) => e.operation !== "put")
      .map(copy);
  }

  async purgeRemoval(key: string, revision: number): Promise<boolean> {
    validateWireKey(key);
    const e = this.current(key);
    if (!e || e.operation === "put" || e.revision !== revision) return false;
    this.latest.delete(key);
    return true;
  }

  async keys(filter = ">"): Promise<string[]> {
    validateWireKey(filter, true);
    return this.live(filter)
      .filter((e) => e.operation === "put")
      .map((e) => e.key);
  }

  async entries(filter = ">"): Promise<KvEntry[]> {
    validateWireKey(filter, true);
    return this.live(filter)
      .filter((e) => e.operation === "put")
      .map(copy);
  }

  async watch(onEntry: (e: KvEntry) => void, opts?: { key?: string; includeCurrent?: boolean }): Promise<KvWatch> {
    const filter = opts?.key ?? ">";
    validateWireKey(filter, true);
    const watcher: Watcher = { filter, onEntry, stopped: false };
    if (opts?.includeCurrent) {
      // JetStream delivers the last message of every subject, markers included, in order.
      for (const e of this.live(filter)) this.deliver(watcher, e);
    }
    this.watchers.push(watcher);
    return {
      stop: () => {
        watcher.stopped = true;
        this.watchers = this.watchers.filter((w) => w !== watcher);
      },
    };
  }

  async lastRevision(): Promise<number> {
    return this.live(">").length > 0 ? this.seq : 0;
  }

  async now(): Promise<number> {
    return this.clock.now();
  }

  /** The key's message, or undefined once its age ran out (dropped silently). */
  private current(key: string): KvEntry | undefined {
    const e = this.latest.get(key);
    if (!e) return undefined;
    if (this.max_age_ms > 0 && e.created + this.max_age_ms <= this.clock.now()) {
      this.latest.delete(key);
      return undefined;
    }
    return e;
  }

  private live(filter: string): KvEntry[] {
    const out: KvEntry[] = [];
    for (const key of [...this.latest.keys()]) {
      const e = this.current(key);
      if (e && filterMatches(filter, key)) out.push(e);
    }
    return out.sort((a, b) => a.revision - b.revision);
  }

  private expect(key: string, revision: number): void {
    const last = this.current(key)?.revision ?? 0;
    if (last !== revision) throw new CasConflict(key, revision);
  }

  private write(key: string, value: Uint8Array, operation: Op): number {
    this.seq += 1;
    const e: KvEntry = { key, value: new Uint8Array(value), revision: this.seq, created: this.clock.now(), operation };
    this.latest.set(key, e);
    for (const w of this.watchers) if (filterMatches(w.filter, key)) this.deliver(w, e);
    return this.seq;
  }

  /** Asynchronously, in write order, like a watch over the wire. */
  private deliver(w: Watcher, e: KvEntry): void {
    const c = copy(e);
    queueMicrotask(() => {
      if (w.stopped) return;
      try {
        w.onEntry(c);
      } catch {
        // a watcher's own bug is not the store's
      }
    });
  }
}

function copy(e: KvEntry): KvEntry {
  return { ...e, value: new Uint8Array(e.value) };
}

/** One in-memory "server": named buckets shared by every node handle opened on it. */
export class MemoryBuckets {
  private readonly buckets = new Map<string, MemoryBucket>();

  constructor(private readonly clock: Clock) {}

  /** The bucket by name; created with max_age_ms on first use, adopted as found after. */
  bucket(name: string, max_age_ms: number): MemoryBucket {
    let b = this.buckets.get(name);
    if (!b) {
      b = new MemoryBucket(name, max_age_ms, this.clock);
      this.buckets.set(name, b);
    }
    return b;
  }
}
