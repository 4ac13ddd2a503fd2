// Moving a seat's memory with the seat: hydrate on acquire (replay the seat's changelog
// subjects into this node's store before the inbox attaches; a failure refuses the seat),
// flush what the seat wrote (before a turn's completion is recorded, on a 30 s cycle for
// anything else, and once more on release), know which seats are being hydrated (a read
// of one is "unavailable", never empty), and cap the diaries of the seats this node holds
// (capDiaries, run by the node's own retention tick: every node, a leaf too, holds its own
// seats' rows).
import type { Clock, Timer } from "../clock.ts";
import type { Logger } from "../log.ts";
import type { Changelog, Replay } from "./changelog.ts";
import { isVectorTable, MEMORY_TABLES, type MemoryRecord } from "./records.ts";
import type { ImportOutcome, MemoryStore } from "./store.ts";

const isVectorRecord = (r: MemoryRecord): boolean => isVectorTable(r.table);

/**
 * How often the rows written outside a turn's own flush (a reflection pass racing a
 * release, a write whose flush failed) are carried: the spec's cycle, and the bound on what
 * a crash can lose of them. A turn's own rows are flushed before its completion is recorded.
 */
export const MEMORY_FLUSH_MS = 30_000;
/** A release's flush is tried this many times before the seat goes with what it has: a
 * broker that cannot take three flushes in a row will not take a fourth in time either. */
const RELEASE_FLUSH_ATTEMPTS = 3;
/**
 * A replay the broker could not answer is tried again after these pauses before the seat
 * is refused: a stream leader's election answers "no responders" for ~0.3–4 s (measured on
 * an R3 cluster), and a replay is idempotent. Past ~4 s a peer that can hydrate should
 * take the seat instead.
 */
export const HYDRATE_RETRY_MS = [250, 500, 1_000, 2_000] as const;

export type SeatMemoryState = "hydrating" | "ready";

export interface HydrateReport {
  rows: number;
  outcomes: Record<ImportOutcome, number>;
  undecodable: number;
  ms: number;
}

export interface MemorySyncOptions {
  store: MemoryStore;
  changelog: Changelog;
  clock: Clock;
  log: Logger;
}

export class MemorySync {
  private readonly states = new Map<string, SeatMemoryState>();
  /** One flush at a time per seat: two overlapping would publish a row twice. */
  private readonly flushing = new Map<string, Promise<number>>();
  private timer: Timer | null = null;

  constructor(private readonly o: MemorySyncOptions) {}

  state(handle: string): SeatMemoryState | null {
    return this.states.get(handle) ?? null;
  }

  /** Replays the seat's changelog into the store. Throws when it cannot (refuse the seat). */
  async hydrate(handle: string): Promise<HydrateReport> {
    const started = this.o.clock.now();
    this.states.set(handle, "hydrating");
    try {
      const replay = await this.replayRetrying(handle);
      const outcomes: Record<ImportOutcome, number> = { inserted: 0, kept_local: 0, took_carried: 0, skipped_collision: 0, skipped_no_row: 0 };
      // Rows before vectors: a vector is kept only beside its row, and a row republished
      // after its vector (the same note written again elsewhere) comes later in the stream.
      const ordered = [...replay.records.filter((r) => !isVectorRecord(r)), ...replay.records.filter(isVectorRecord)];
      // One transaction for the whole replay: 10,000 rows in one commit, not 10,000 fsyncs.
      this.o.store.sqlite.transaction(() => {
        for (const r of ordered) outcomes[this.o.store.importDecoded(r)] += 1;
      })();
      this.logUndecodable(handle, replay.undecodable);
      const report = { rows: replay.records.length, outcomes, undecodable: replay.undecodable.length, ms: this.o.clock.now() - started };
      this.o.log.info("memory_hydrated", { seat: handle, ...report });
      this.states.set(handle, "ready");
      return report;
    } catch (err) {
      this.states.delete(handle);
      this.o.log.warn("memory_hydrate_failed", { seat: handle, error: err as Error });
      throw new Error(`seat ${handle}: memory could not be hydrated from the changelog: ${(err as Error).message}`);
    }
  }

  /**
   * A row of a kind this build does not know is a newer node's (its vectors were, to the
   * build before them): one line per kind, with a count, rather than one per row — a seat
   * carries thousands. A row of a known kind that fails its schema is named row by row.
   */
  private logUndecodable(handle: string, undecodable: Replay["undecodable"]): void {
    const newer = new Map<string, number>();
    for (const u of undecodable) {
      const table = u.subject.split(".")[3] ?? "";
      if ((MEMORY_TABLES as readonly string[]).includes(table)) this.o.log.warn("memory_row_undecodable", { seat: handle, subject: u.subject, error: u.error });
      else newer.set(table, (newer.get(table) ?? 0) + 1);
    }
    for (const [table, rows] of newer) this.o.log.warn("memory_rows_of_newer_kind", { seat: handle, table, rows });
  }

  private async replayRetrying(handle: string) {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.o.changelog.replay(handle);
      } catch (err) {
        const pause = HYDRATE_RETRY_MS[attempt];
        if (pause === undefined) throw err;
        this.o.log.info("memory_hydrate_retry", { seat: handle, attempt: attempt + 1, error: err as Error });
        await this.o.clock.sleep(pause);
      }
    }
  }

  /** Publishes the seat's rows written past the last flush; returns how many. Throws on failure. */
  flush(handle: string): Promise<number> {
    const prev = this.flushing.get(handle) ?? Promise.resolve(0);
    const next = prev.catch(() => 0).then(() => this.flushNow(handle));
    this.flushing.set(handle, next);
    void next.finally(() => {
      if (this.flushing.get(handle) === next) this.flushing.delete(handle);
    }).catch(() => undefined);
    return next;
  }

  private async flushNow(handle: string): Promise<number> {
    const pending = this.o.store.pending(handle);
    if (pending.length === 0) return 0;
    await this.o.changelog.publish(pending.map((p) => p.record));
    this.o.store.markPublished(handle, pending[pending.length - 1]!.seq);
    return pending.length;
  }

  /** Flushes, logging rather than throwing (the cycle and the turn's end use this). */
  async flushQuietly(handle: string, why: string): Promise<boolean> {
    try {
      await this.flush(handle);
      return true;
    } catch (err) {
      this.o.log.warn("memory_flush_failed", { seat: handle, why, error: err as Error });
      return false;
    }
  }

  /** The release's last flush, then the seat is no longer this node's to keep current. */
  async release(handle: string): Promise<void> {
    for (let attempt = 1; attempt <= RELEASE_FLUSH_ATTEMPTS; attempt++) {
      if (await this.flushQuietly(handle, `release (attempt ${attempt})`)) break;
    }
    this.states.delete(handle);
  }

  /** Seats whose memory this node keeps current now (hydrated, not yet released). */
  ready(): string[] {
    return [...this.states].filter(([, s]) => s === "ready").map(([h]) => h);
  }

  /**
   * The diary cap over every seat this node keeps current: the oldest notes beyond `cap`
   * (DIARY_CAP unless told) are dropped (store.dropOldestDiary); returns what went, per
   * seat. Run on every node by its retention tick (src/duty/retention.ts startNodeRetention,
   * the engine passes it as a sweep). Not replicated (deletes never are): a later hydration
   * elsewhere may bring dropped notes back, and that node's tick drops them again.
   */
  capDiaries(cap?: number): Record<string, number> {
    const out: Record<string, number> = {};
    for (const h of this.ready()) {
      const n = this.o.store.dropOldestDiary(h, cap);
      if (n > 0) out[h] = n;
    }
    if (Object.keys(out).length > 0) this.o.log.info("memory_diary_capped", { dropped: out });
    return out;
  }

  /** Starts the flush cycle over the seats this node holds. */
  start(): void {
    this.timer ??= this.o.clock.setInterval(() => {
      for (const [handle, state] of this.states) if (state === "ready") void this.flushQuietly(handle, "cycle");
    }, MEMORY_FLUSH_MS);
  }

  /** Stops the cycle and flushes every seat still held here once more. */
  async stop(): Promise<void> {
    this.timer?.cancel();
    this.timer = null;
    await Promise.all([...this.states.keys()].map((h) => this.flushQuietly(h, "stop")));
  }
}
