// A listing of one filter answered from a standing watch rather than a consumer per call.
// The seat sweep lists every presence row each pass; as a listing that is a consumer
// created and torn down every 5 s on every node (on a cluster, a proposal to the meta
// leader each time, and a hedged second one when it is slow to answer) plus every row
// sent again. A watch sends a row only when it is written.
//
// A watch can go quiet without saying so (its server left and the client has not reset it
// yet), so the view is used only while it has heard something recently: the caller names
// how recently (`fresh_within_ms`), and past that the view is rebuilt from a listing. For
// presence rows, which every live node rewrites each heartbeat, that bound is a little
// over one heartbeat: a watch that heard nothing for longer is not hearing.
import type { Clock } from "../clock.ts";
import type { KvEntry, KvWatch } from "./contract.ts";
import type { Bucket } from "./bucket.ts";

export class WatchedListing {
  /** key → its last value (puts only). */
  private readonly rows = new Map<string, KvEntry>();
  /** key → revision of a removal the watch delivered: a listing taken before it must not
   * bring the row back. Bounded by the keys the filter ever saw removed. */
  private readonly removed = new Map<string, number>();
  private watch: KvWatch | null = null;
  private heard_ms = Number.NEGATIVE_INFINITY;
  private rebuilding: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly bucket: Bucket,
    private readonly filter: string,
    private readonly clock: Clock,
  ) {}

  /** The filter's rows as they stand, from the watch when it heard within `fresh_within_ms`. */
  async entries(fresh_within_ms: number): Promise<KvEntry[]> {
    if (this.stopped) throw new Error(`watched listing of ${this.filter} stopped`);
    if (this.watch === null || this.clock.now() - this.heard_ms > fresh_within_ms) {
      this.rebuilding ??= this.rebuild().finally(() => (this.rebuilding = null));
      await this.rebuilding;
    }
    return [...this.rows.values()].sort((a, b) => a.revision - b.revision);
  }

  stop(): void {
    this.stopped = true;
    this.watch?.stop();
    this.watch = null;
  }

  /** A new watch of updates first, then a listing: a write between the two is in one of
   * them, and the higher revision of a key wins. */
  private async rebuild(): Promise<void> {
    this.watch?.stop();
    this.watch = null;
    this.rows.clear();
    this.removed.clear();
    const watch = await this.bucket.watch((e) => this.take(e), { key: this.filter });
    try {
      for (const e of await this.bucket.entries(this.filter)) this.seed(e);
    } catch (err) {
      watch.stop();
      throw err;
    }
    if (this.stopped) return watch.stop();
    this.watch = watch;
    this.heard_ms = this.clock.now();
  }

  private take(e: KvEntry): void {
    this.heard_ms = this.clock.now();
    const had = this.rows.get(e.key);
    if (had && had.revision >= e.revision) return;
    if (e.operation === "put") {
      this.rows.set(e.key, e);
    } else {
      this.rows.delete(e.key);
      this.removed.set(e.key, e.revision);
    }
  }

  private seed(e: KvEntry): void {
    const had = this.rows.get(e.key);
    if ((had && had.revision >= e.revision) || (this.removed.get(e.key) ?? 0) >= e.revision) return;
    this.rows.set(e.key, e);
  }
}
