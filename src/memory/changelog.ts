// The memory changelog contract and its two backends: CREWLET_MEMORY on JetStream, and the
// in-memory twin the seeded simulations run on. One subject per row,
// `crewlet.memory.{handle}.{table}.{row}`, on a stream that keeps one message per subject,
// so the stream holds the current value of every row rather than a log of every write
// (spec: Seat Ownership § "A seat's memory follows it"). test/conformance/changelog.ts
// holds both backends to the same behaviour.
import { AckPolicy, DeliverPolicy, DiscardPolicy, ReplayPolicy, RetentionPolicy, StorageType, type Consumer, type JetStreamClient, type JetStreamManager, type NatsConnection, type StreamConfig } from "nats";
import { apiErrorCode, WAITING_FOR_MEMBERS } from "../queue/streams.ts";
import { HandleSchema } from "../queue/topics.ts";
import { encodeRecord, MEMORY_TABLES, parseRecordBytes, RowIdSchema, type MemoryRecord, type MemoryTable } from "./records.ts";

export const STREAM_MEMORY = "CREWLET_MEMORY";
/** Exactly five tokens: a row's subject. `crewlet.memory.read.{node}` (four) is never captured. */
export const MEMORY_SUBJECTS = "crewlet.memory.*.*.*";

export function memorySubject(handle: string, table: MemoryTable, row: string): string {
  if (!HandleSchema.safeParse(handle).success) throw new Error(`invalid seat handle ${JSON.stringify(handle)}`);
  if (!MEMORY_TABLES.includes(table)) throw new Error(`unknown memory table ${JSON.stringify(table)}`);
  if (!RowIdSchema.safeParse(row).success) throw new Error(`invalid memory row id ${JSON.stringify(row)}`);
  return `crewlet.memory.${handle}.${table}.${row}`;
}

export function seatFilter(handle: string): string {
  if (!HandleSchema.safeParse(handle).success) throw new Error(`invalid seat handle ${JSON.stringify(handle)}`);
  return `crewlet.memory.${handle}.>`;
}

/** A replay's subject filters: the whole seat, or only the named tables' rows. */
export function replayFilters(handle: string, tables?: readonly MemoryTable[]): string[] {
  const all = seatFilter(handle);
  if (tables === undefined) return [all];
  for (const t of tables) if (!MEMORY_TABLES.includes(t)) throw new Error(`unknown memory table ${JSON.stringify(t)}`);
  return [...new Set(tables)].map((t) => `crewlet.memory.${handle}.${t}.*`);
}

export const recordSubject = (r: MemoryRecord): string => memorySubject(r.row.handle, r.table, r.row.id);

export interface Replay {
  /** The current value of every row subject of the seat, in stream order. */
  records: MemoryRecord[];
  /** Subjects whose value no schema accepts: skipped (never a refused seat), with why. */
  undecodable: { subject: string; error: string }[];
}

export interface Changelog {
  /** Creates the stream, idempotently (a peer's boot may have). */
  ensure(): Promise<void>;
  /** Puts each record on its subject; resolves once every one is stored. */
  publish(records: readonly MemoryRecord[]): Promise<void>;
  /** Everything the changelog holds for one seat; with `tables`, only those tables' rows (the
   *  learning duty reads episodes and skills, never the seat's vectors). */
  replay(handle: string, tables?: readonly MemoryTable[]): Promise<Replay>;
}

/**
 * Publishes in flight at once in one flush. A turn writes a handful of rows; a node that
 * held a seat through a broker outage may owe thousands, and a window keeps that from
 * opening thousands of requests at once while still pipelining (a round trip per window,
 * not per row).
 */
export const PUBLISH_WINDOW = 64;
/** Messages one replay pull asks for: a seat's rows arrive in a few pulls, not thousands. */
const REPLAY_BATCH = 1_000;
/** A replay pull that brings nothing for this long while rows are still owed has failed. */
export const REPLAY_STALL_MS = 5_000;
/** Bounds a replay's walk: rows of one seat. 1,000,000 is far past any cap we keep. */
const REPLAY_MAX_ROWS = 1_000_000;
/** The broker drops a replay's consumer this long after its reader went quiet (a node that
 * died mid-replay); the replay deletes it itself when done. */
const REPLAY_CONSUMER_INACTIVE_MS = 30_000;

const NS_PER_MS = 1_000_000;
const STREAM_NAME_IN_USE = 10058;
const NO_MESSAGE_FOUND = 10037;

export function memoryStreamConfig(replicas: number): StreamConfig {
  return {
    name: STREAM_MEMORY,
    subjects: [MEMORY_SUBJECTS],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    num_replicas: replicas,
    // One message per subject: the newest value of a row replaces the old (compaction).
    max_msgs_per_subject: 1,
    max_msgs: -1,
    // Memory is kept until the seat's own rules drop it; an age would make a seat that sat
    // idle for a month forget everything on its next move.
    max_age: 0,
    max_bytes: -1,
    max_consumers: -1,
    max_msg_size: 1024 * 1024,
    discard: DiscardPolicy.Old,
    // A retried publish of one row is the same value on the same subject; the window only
    // needs to cover a publisher's own retry.
    duplicate_window: 2 * 60_000 * NS_PER_MS,
    allow_rollup_hdrs: false,
    allow_direct: false,
    mirror_direct: false,
    deny_delete: false,
    deny_purge: false,
    sealed: false,
  } as StreamConfig;
}

export class JetStreamChangelog implements Changelog {
  private readonly js: JetStreamClient;
  private jsmP: Promise<JetStreamManager> | null = null;

  constructor(
    private readonly nc: NatsConnection,
    private readonly replicas: number,
    timeout_ms = 10_000,
    /** False on a leaf: the members decide the stream (a leaf's update set it to R1). */
    private readonly decidesStreams = true,
  ) {
    this.js = nc.jetstream({ timeout: timeout_ms });
  }

  private jsm(): Promise<JetStreamManager> {
    this.jsmP ??= this.nc.jetstreamManager({ checkAPI: false, timeout: 10_000 });
    return this.jsmP;
  }

  async ensure(): Promise<void> {
    const jsm = await this.jsm();
    if (!this.decidesStreams) {
      await jsm.streams.info(STREAM_MEMORY).catch((err: unknown) => {
        throw new Error(`memory: stream ${STREAM_MEMORY} is not there yet: ${WAITING_FOR_MEMBERS} (${String(err)})`);
      });
      return;
    }
    const config = memoryStreamConfig(this.replicas);
    try {
      await jsm.streams.add(config);
    } catch (err) {
      if (apiErrorCode(err) !== STREAM_NAME_IN_USE) throw new Error(`memory: creating stream ${STREAM_MEMORY} failed: ${String(err)}`);
      await jsm.streams.update(STREAM_MEMORY, config);
    }
  }

  async publish(records: readonly MemoryRecord[]): Promise<void> {
    for (let i = 0; i < records.length; i += PUBLISH_WINDOW) {
      await Promise.all(records.slice(i, i + PUBLISH_WINDOW).map((r) => this.js.publish(recordSubject(r), encodeRecord(r), { expect: { streamName: STREAM_MEMORY } })));
    }
  }

  async replay(handle: string, tables?: readonly MemoryTable[]): Promise<Replay> {
    const filters = replayFilters(handle, tables);
    const jsm = await this.jsm();
    // The seat's newest row marks where this replay ends: rows written after it started
    // are the holder's own, and nothing else writes the seat's memory while we acquire it.
    const lasts = await Promise.all(filters.map((f) => this.lastSeq(jsm, f)));
    const last = Math.max(0, ...lasts.filter((n): n is number => n !== null));
    if (last === 0) return { records: [], undecodable: [] };
    // A plain ephemeral consumer, not the client's ordered one: an ordered consumer's first
    // fetch retries its create up to 30 times with 5 s pauses (minutes), where a replay must
    // fail within seconds so the hydrate's own bounded retries, or a peer, take over.
    const info = await jsm.consumers.add(STREAM_MEMORY, {
      ack_policy: AckPolicy.None,
      deliver_policy: DeliverPolicy.All,
      replay_policy: ReplayPolicy.Instant,
      ...(filters.length === 1 ? { filter_subject: filters[0] } : { filter_subjects: filters }),
      inactive_threshold: REPLAY_CONSUMER_INACTIVE_MS * NS_PER_MS,
      mem_storage: true,
      num_replicas: 1,
    });
    try {
      return await this.readReplay(handle, await this.js.consumers.get(STREAM_MEMORY, info.name), last);
    } finally {
      await jsm.consumers.delete(STREAM_MEMORY, info.name).catch(() => undefined);
    }
  }

  /** The stream sequence of the newest message on `filter`, or null when it has none. */
  private async lastSeq(jsm: JetStreamManager, filter: string): Promise<number | null> {
    try {
      return (await jsm.streams.getMessage(STREAM_MEMORY, { last_by_subj: filter })).seq;
    } catch (err) {
      if (apiErrorCode(err) === NO_MESSAGE_FOUND || /no message found/i.test(String(err))) return null;
      throw err;
    }
  }

  /** Pulls the seat's rows up to `last`; a pull that brings nothing, or skips one, fails it. */
  private async readReplay(handle: string, consumer: Consumer, last: number): Promise<Replay> {
    const out: Replay = { records: [], undecodable: [] };
    let seen = 0;
    for (;;) {
      const batch = await consumer.fetch({ max_messages: REPLAY_BATCH, expires: REPLAY_STALL_MS });
      let got = 0;
      for await (const m of batch) {
        got += 1;
        seen += 1;
        // Unacknowledged delivery has no redelivery: a message lost on the way is a gap in
        // the consumer's sequence, and a replay with a hole would hydrate a seat short.
        if (m.info.deliverySequence !== seen) throw new Error(`memory: replay of ${handle} skipped a row (delivery ${m.info.deliverySequence}, expected ${seen})`);
        const d = parseRecordBytes(m.data);
        if (d.ok && recordSubject(d.record) === m.subject) out.records.push(d.record);
        else out.undecodable.push({ subject: m.subject, error: d.ok ? "row does not match its subject" : d.error });
        if (m.seq >= last) {
          batch.stop();
          return out;
        }
      }
      if (got === 0) throw new Error(`memory: replay of ${handle} stalled after ${seen} rows (stream ${STREAM_MEMORY}, last seq ${last})`);
      if (seen > REPLAY_MAX_ROWS) throw new Error(`memory: replay of ${handle} passed ${REPLAY_MAX_ROWS} rows`);
    }
  }
}

/** The in-memory twin: per seat, one map from subject to its newest value, in publish order. */
export class MemoryChangelog implements Changelog {
  private readonly seats = new Map<string, Map<string, { seq: number; data: Uint8Array }>>();
  private seq = 0;
  /** Simulations: make the next replays fail (a broker the node cannot reach). */
  failReplays = false;

  async ensure(): Promise<void> {}

  async publish(records: readonly MemoryRecord[]): Promise<void> {
    for (const r of records) this.put(recordSubject(r), encodeRecord(r));
  }

  private put(subject: string, data: Uint8Array): void {
    const handle = subject.split(".")[2]!;
    let m = this.seats.get(handle);
    if (!m) this.seats.set(handle, (m = new Map()));
    this.seq += 1;
    // Delete first: a replaced value moves to the end, as a newer message in the stream.
    m.delete(subject);
    m.set(subject, { seq: this.seq, data });
  }

  async replay(handle: string, tables?: readonly MemoryTable[]): Promise<Replay> {
    if (this.failReplays) throw new Error("memory: changelog unreachable (simulated)");
    replayFilters(handle, tables);
    const out: Replay = { records: [], undecodable: [] };
    for (const [subject, { data }] of this.seats.get(handle) ?? []) {
      if (tables !== undefined && !(tables as readonly string[]).includes(subject.split(".")[3]!)) continue;
      const d = parseRecordBytes(data);
      if (d.ok && recordSubject(d.record) === subject) out.records.push(d.record);
      else out.undecodable.push({ subject, error: d.ok ? "row does not match its subject" : d.error });
    }
    return out;
  }

  /** Tests: a raw value on a subject (a foreign or corrupt row). */
  putRaw(subject: string, data: Uint8Array): void {
    this.put(subject, data);
  }

  get size(): number {
    let n = 0;
    for (const m of this.seats.values()) n += m.size;
    return n;
  }
}
