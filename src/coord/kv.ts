// `embedded-kv`: the coordination store on JetStream KV over the node's ONE NatsConnection
// (Scaling Out: both halves of shared state ride one connection, so "reachable" is one
// fact). A JetStreamBucket implements the same Bucket the in-memory twin does; leases.ts
// runs the lease algorithm on top.
//
// nats-server facts this is built around (found on 2.9.10, re-measured on 2.15.2 with
// bench/server-quirks.ts): an age limit expires a key silently (no watch event; 2.11+ can
// mark it, but only on a stream configured for markers, which these are not), so liveness
// comes from the record's own expiry on the store's clock; a direct get may be answered
// stale by a follower, so every bucket here turns allow_direct off and reads go to the
// stream leader; a compare-and-set conflict is API error 10071 (or, from 2.10 on a
// cluster, 10164 when it meets another write still in flight), matched by code; a stream
// leader's death fails writes for 4–6.5 s (2.9.10: 4.0–6.6 s, 2.15.2: 5.8–6.5 s), which
// callers see as StoreUnavailable (unknown), never as a conflict.
import {
  DiscardPolicy,
  KvWatchInclude,
  RetentionPolicy,
  StorageType,
  nanos,
  type JetStreamClient,
  type JetStreamManager,
  type KV,
  type KvEntry as NatsKvEntry,
  type NatsConnection,
  type StreamConfig,
} from "nats";
import type { Clock, Timer } from "../clock.ts";
import type { Logger } from "../log.ts";
import { CasConflict, StoreUnavailable, type KvEntry, type KvWatch } from "./contract.ts";
import { filterMatches, validateWireKey, type Bucket } from "./bucket.ts";
import type { BucketSpec } from "./buckets.ts";
import { hedged } from "./hedge.ts";

/** API error code nats-server gives a write whose expected last subject sequence is stale. */
export const CAS_CONFLICT_ERR_CODE = 10071;
/**
 * The same refusal from a clustered stream leader (2.10+) when the write's expected
 * sequence meets another proposal for the key still in flight: "wrong last sequence" with
 * no number. Measured on 2.15.2: most losers of six racing creates on R3 get this one, and
 * taken for `unknown` it failed the exclusivity conformance case on every run.
 */
export const CAS_INFLIGHT_CONFLICT_ERR_CODE = 10164;
/** API error code for "stream not found". */
const STREAM_NOT_FOUND_ERR_CODE = 10059;
/** API error code for "stream name already in use" (a peer created it with other settings). */
const STREAM_NAME_IN_USE_ERR_CODE = 10058;
/** JSNoMessageFoundErr: a message get that matched nothing. */
const NO_MESSAGE_FOUND_ERR_CODE = 10037;
/** The server's cap on a stream's duplicate window default, and KV's own choice. */
const DUPLICATE_WINDOW_MAX_MS = 2 * 60 * 1000;
/** The key the store-clock probe writes; outside every lease kind, so no lease view counts it. */
const CLOCK_KEY = "_clock";
/** Starts of one consumer (a watch or a listing): on a cluster that lost a member,
 *  nats-server 2.9.10 placed about one ephemeral consumer in three on the dead member,
 *  where its start never answered, for as long as the member stayed down (12 of 38 over
 *  40 s). 2.15.2 (and 2.14.10) place them on live members once the loss is known: 1 to 3
 *  starts in a hundred or more went unanswered, all within ~6 s of the kill
 *  (bench/server-quirks.ts). Hedging stays for those seconds, cheap as it is (a second
 *  start only after CONSUMER_HEDGE_MS without an answer), but four starts are plenty now,
 *  and a store that is really down answers within three hedges plus one call budget. */
const CONSUMER_ATTEMPTS = 4;
/** A consumer start with no answer after this long gets a second one alongside: a live
 *  member answers in single-digit ms (tens to hundreds on a loaded 2-core box), so this
 *  rarely doubles a healthy start, and a dead placement costs 0.3 s instead of a whole
 *  call budget. */
const CONSUMER_HEDGE_MS = 300;
/** A listing whose consumer started but never delivered its snapshot in one call budget
 *  is asked once more from scratch. */
const LISTING_ATTEMPTS = 2;
/** Bound on one listing (keys/entries): far above any fleet's seat count. */
const LIST_LIMIT = 1_000_000;


function apiErrCode(err: unknown): number | undefined {
  const e = err as { api_error?: { err_code?: number } } | null;
  return e?.api_error?.err_code;
}

function mapError(err: unknown, what: string, key: string, expected: number | null): Error {
  const code = apiErrCode(err);
  if (code === CAS_CONFLICT_ERR_CODE || code === CAS_INFLIGHT_CONFLICT_ERR_CODE) return new CasConflict(key, expected);
  const text = err instanceof Error ? err.message : String(err);
  return new StoreUnavailable(`${what} ${key}: ${text}`);
}

function operationOf(e: NatsKvEntry): KvEntry["operation"] {
  return e.operation === "DEL" ? "delete" : e.operation === "PURGE" ? "purge" : "put";
}

function toEntry(e: NatsKvEntry): KvEntry {
  return { key: e.key, value: e.value, revision: e.revision, created: e.created.getTime(), operation: operationOf(e) };
}

export class JetStreamBucket implements Bucket {
  readonly stream: string;

  constructor(
    private readonly kv: KV,
    private readonly jsm: JetStreamManager,
    readonly bucket: string,
    readonly max_age_ms: number,
    private readonly timeout_ms: number,
    private readonly clock: Clock,
  ) {
    this.stream = `KV_${bucket}`;
  }

  async get(key: string): Promise<KvEntry | null> {
    validateWireKey(key);
    try {
      const e = await this.kv.get(key);
      return e && e.operation === "PUT" ? toEntry(e) : null;
    } catch (err) {
      throw mapError(err, `get ${this.bucket}`, key, null);
    }
  }

  async at(key: string, revision: number): Promise<KvEntry | null> {
    validateWireKey(key);
    try {
      const e = await this.kv.get(key, { revision });
      return e ? toEntry(e) : null;
    } catch (err) {
      throw mapError(err, `get ${this.bucket}`, key, revision);
    }
  }

  async create(key: string, value: Uint8Array): Promise<number> {
    validateWireKey(key);
    try {
      return await this.kv.create(key, value);
    } catch (err) {
      throw mapError(err, `create ${this.bucket}`, key, null);
    }
  }

  async update(key: string, value: Uint8Array, revision: number): Promise<number> {
    validateWireKey(key);
    if (revision <= 0) throw new Error("version must be greater than 0");
    try {
      return await this.kv.update(key, value, revision);
    } catch (err) {
      throw mapError(err, `update ${this.bucket}`, key, revision);
    }
  }

  async put(key: string, value: Uint8Array): Promise<number> {
    validateWireKey(key);
    try {
      return await this.kv.put(key, value);
    } catch (err) {
      throw mapError(err, `put ${this.bucket}`, key, null);
    }
  }

  async delete(key: string, revision?: number): Promise<void> {
    validateWireKey(key);
    try {
      await this.kv.delete(key, revision ? { previousSeq: revision } : undefined);
    } catch (err) {
      throw mapError(err, `delete ${this.bucket}`, key, revision ?? null);
    }
  }

  async purge(key: string, revision?: number): Promise<void> {
    validateWireKey(key);
    try {
      await this.kv.purge(key, revision ? { previousSeq: revision } : undefined);
    } catch (err) {
      throw mapError(err, `purge ${this.bucket}`, key, revision ?? null);
    }
  }

  async keys(filter = ">"): Promise<string[]> {
    return (await this.entries(filter)).map((e) => e.key);
  }

  async removals(filter = ">"): Promise<KvEntry[]> {
    validateWireKey(filter, true);
    let lastErr: unknown = null;
    for (let attempt = 0; attempt < LISTING_ATTEMPTS; attempt++) {
      try {
        return await this.listOnce(filter, "removals");
      } catch (err) {
        lastErr = err;
      }
    }
    throw lastErr;
  }

  /** A stream purge of the key's subject below revision + 1: the marker goes, and a value
   *  written after it (a higher sequence) stays, whatever happens between the look and the
   *  purge. KV deletes are denied on these streams (deny_delete), purges are not. */
  async purgeRemoval(key: string, revision: number): Promise<boolean> {
    validateWireKey(key);
    try {
      const e = await this.kv.get(key);
      if (!e || e.operation === "PUT" || e.revision !== revision) return false;
      await this.jsm.streams.purge(this.stream, { filter: `$KV.${this.bucket}.${key}`, seq: revision + 1 });
      return true;
    } catch (err) {
      throw mapError(err, `purge marker ${this.bucket}`, key, revision);
    }
  }

  /** A snapshot: an ordered consumer on the last message per key, until it has them all. */
  async entries(filter = ">"): Promise<KvEntry[]> {
    validateWireKey(filter, true);
    let lastErr: unknown = null;
    for (let attempt = 0; attempt < LISTING_ATTEMPTS; attempt++) {
      try {
        return await this.listOnce(filter);
      } catch (err) {
        lastErr = err;
      }
    }
    throw lastErr;
  }

  /** Starts a consumer with hedged asks (see CONSUMER_ATTEMPTS): the first that answers
   *  wins. `initialized` is that start's own: a losing start may report its own snapshot
   *  done before it is stopped, which says nothing about the winner's. */
  private startConsumer(opts: Parameters<KV["watch"]>[0]): Promise<{ iter: Awaited<ReturnType<KV["watch"]>>; initialized: Promise<void> }> {
    return hedged(
      async () => {
        const initialized = Promise.withResolvers<void>();
        const iter = await this.kv.watch({ ...opts, initializedFn: () => initialized.resolve() });
        return { iter, initialized: initialized.promise };
      },
      (late) => late.iter.stop(),
      { attempts: CONSUMER_ATTEMPTS, hedge_ms: CONSUMER_HEDGE_MS, clock: this.clock },
    );
  }

  /**
   * One listing. The replay's end is not a whole snapshot (a key rewritten during it comes
   * only after it), so the consumer is read on past the filter's newest revision.
   */
  private async listOnce(filter: string, want: "values" | "removals" = "values"): Promise<KvEntry[]> {
    const out: KvEntry[] = [];
    let timer: Timer | undefined;
    try {
      const { iter, initialized } = await this.startConsumer({ key: filter, include: KvWatchInclude.LastValue, ignoreDeletes: false });
      const failed = Promise.withResolvers<never>();
      timer = this.clock.setTimeout(() => failed.reject(new Error(`listing timed out after ${this.timeout_ms} ms`)), this.timeout_ms);
      let seen = 0;
      let target = Infinity;
      const caughtUp = Promise.withResolvers<void>();
      (async () => {
        for await (const e of iter) {
          // Every op is kept (last per key wins below), so a key deleted during the
          // listing shows its marker rather than its older value.
          if (out.length < LIST_LIMIT) out.push(toEntry(e));
          seen = Math.max(seen, e.revision);
          if (seen >= target) caughtUp.resolve();
        }
      })().catch((err) => failed.reject(err));
      try {
        await Promise.race([initialized, failed.promise]);
        target = await Promise.race([this.newestRevision(filter), failed.promise]);
        if (seen >= target) caughtUp.resolve();
        await Promise.race([caughtUp.promise, failed.promise]);
      } finally {
        iter.stop();
      }
    } catch (err) {
      throw mapError(err, `list ${this.bucket}`, filter, null);
    } finally {
      timer?.cancel();
    }
    // A key deleted during the listing still shows its older value: last per key wins.
    const byKey = new Map<string, KvEntry>();
    for (const e of out) byKey.set(e.key, e);
    return [...byKey.values()]
      .filter((e) => filterMatches(filter, e.key) && (want === "values" ? e.operation === "put" : e.operation !== "put"))
      .sort((a, b) => a.revision - b.revision);
  }

  /** The newest revision of any key `filter` matches, from the stream leader; 0 when none. */
  private async newestRevision(filter: string): Promise<number> {
    try {
      return (await this.jsm.streams.getMessage(this.stream, { last_by_subj: `$KV.${this.bucket}.${filter}` })).seq;
    } catch (err) {
      if (apiErrCode(err) === NO_MESSAGE_FOUND_ERR_CODE) return 0;
      throw err;
    }
  }

  async watch(onEntry: (e: KvEntry) => void, opts?: { key?: string; includeCurrent?: boolean }): Promise<KvWatch> {
    const filter = opts?.key ?? ">";
    validateWireKey(filter, true);
    let it: Awaited<ReturnType<KV["watch"]>>;
    try {
      ({ iter: it } = await this.startConsumer({
        key: filter,
        include: opts?.includeCurrent ? KvWatchInclude.LastValue : KvWatchInclude.UpdatesOnly,
        ignoreDeletes: false,
      }));
    } catch (err) {
      throw mapError(err, `watch ${this.bucket}`, filter, null);
    }
    let stopped = false;
    (async () => {
      for await (const e of it) {
        if (stopped) break;
        try {
          onEntry(toEntry(e));
        } catch {
          // a watcher's own bug is not the store's
        }
      }
    })().catch(() => undefined);
    return {
      stop: () => {
        stopped = true;
        it.stop();
      },
    };
  }

  async lastRevision(): Promise<number> {
    try {
      const info = await this.jsm.streams.info(this.stream);
      return info.state.messages === 0 ? 0 : info.state.last_seq;
    } catch (err) {
      throw mapError(err, `info ${this.bucket}`, this.stream, null);
    }
  }

  /**
   * The store's clock: the time on this bucket's stream leader now. Read from this bucket's
   * own stream, because its leader stamps every record in it and so is the clock they are
   * judged by (another stream may have its leader on another machine). A stream info is
   * answered by the leader alone (a follower stays silent; checked on 2.15.2 with the
   * leader stopped) and carries the leader's time (`ts`, servers 2.10+): one round trip and
   * no write. A write read back (two round trips, and a replicated write of the clock key
   * by every node every sweep) is the way on a server that does not say `ts`.
   */
  async now(): Promise<number> {
    try {
      const info = (await this.jsm.streams.info(this.stream)) as { ts?: unknown };
      const ts = typeof info.ts === "string" ? Date.parse(info.ts) : Number.NaN;
      if (Number.isFinite(ts)) return ts;
      await this.kv.put(CLOCK_KEY, new Uint8Array(0));
      // The last clock write is ours or a later peer's: either was made during this call.
      const e = await this.kv.get(CLOCK_KEY);
      if (!e) throw new Error("clock probe vanished");
      return e.created.getTime();
    } catch (err) {
      throw mapError(err, `clock ${this.bucket}`, CLOCK_KEY, null);
    }
  }

  /** For tests and the bench: the time budget each call runs under. */
  get op_timeout_ms(): number {
    return this.timeout_ms;
  }
}

export interface OpenBucketOptions {
  nc: NatsConnection;
  /** Times listings and hedged consumer starts. */
  clock: Clock;
  spec: BucketSpec;
  replicas: number;
  timeout_ms: number;
  log: Logger;
  /** False on a leaf: a missing bucket is waited for (the members create it), never made here. */
  creates?: boolean;
}

function streamConfig(spec: BucketSpec, replicas: number): Partial<StreamConfig> {
  const dup_ms = spec.max_age_ms > 0 ? Math.min(spec.max_age_ms, DUPLICATE_WINDOW_MAX_MS) : DUPLICATE_WINDOW_MAX_MS;
  return {
    name: `KV_${spec.name}`,
    subjects: [`$KV.${spec.name}.>`],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    num_replicas: replicas,
    // One value per key: a lease, a counter, a slot value; history is not read.
    max_msgs_per_subject: 1,
    max_age: nanos(spec.max_age_ms),
    max_msgs: -1,
    max_bytes: -1,
    max_msg_size: -1,
    max_consumers: -1,
    duplicate_window: nanos(dup_ms),
    discard: DiscardPolicy.New,
    // Leader reads only: a follower's direct answer can be stale, and every read here
    // precedes a compare-and-set or an ownership judgement.
    allow_direct: false,
    mirror_direct: false,
    allow_rollup_hdrs: true,
    deny_delete: true,
    deny_purge: false,
  };
}

/**
 * Checks one bucket at boot: creates it with our settings, or adopts the one a peer made.
 * Retention that differs from ours is adopted and logged (`bucket_retention_mismatch`):
 * two nodes cannot run one bucket with two ages, and the first one decided.
 */
export async function openBucket(opts: OpenBucketOptions): Promise<JetStreamBucket> {
  const { nc, spec, replicas, timeout_ms, log, clock } = opts;
  const js: JetStreamClient = nc.jetstream({ timeout: timeout_ms });
  const jsm = await nc.jetstreamManager({ timeout: timeout_ms });
  const stream = `KV_${spec.name}`;
  let max_age_ms = spec.max_age_ms;
  const adopt = (found_ns: number) => {
    const found_ms = Math.round(found_ns / 1e6);
    if (found_ms !== spec.max_age_ms) {
      log.warn("bucket_retention_mismatch", { bucket: spec.name, wanted_ms: spec.max_age_ms, found_ms, adopted_ms: found_ms });
    }
    max_age_ms = found_ms;
  };
  try {
    adopt((await jsm.streams.info(stream)).config.max_age);
  } catch (err) {
    if (apiErrCode(err) !== STREAM_NOT_FOUND_ERR_CODE) throw err;
    if (opts.creates === false) throw new Error(`coordination: bucket ${spec.name} is not there yet: waiting for the members to create it`);
    try {
      await jsm.streams.add(streamConfig(spec, replicas));
      log.info("bucket_created", { bucket: spec.name, max_age_ms: spec.max_age_ms, replicas });
    } catch (addErr) {
      // A peer created it between our look and our add.
      if (apiErrCode(addErr) !== STREAM_NAME_IN_USE_ERR_CODE) throw addErr;
      adopt((await jsm.streams.info(stream)).config.max_age);
    }
  }
  const kv = await js.views.kv(spec.name, { bindOnly: true, allow_direct: false });
  return new JetStreamBucket(kv, jsm, spec.name, max_age_ms, timeout_ms, clock);
}
