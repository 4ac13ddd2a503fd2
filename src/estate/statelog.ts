// The state logs: one JetStream stream per domain (CREWLET_{TRACKER,PAGES,CHAT}_LOG on
// `crewlet.{domain}.log.>`). A write is a record appended here under its operation id;
// the log's order is the estate's order, and every data node's applier follows it.
import {
  DiscardPolicy,
  RetentionPolicy,
  StorageType,
  type JetStreamClient,
  type JetStreamManager,
  type NatsConnection,
  type StreamConfig,
} from "nats";
import { systemClock, type Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import { stateLogStream, stateLogSubject, stateLogSubjects } from "../queue/topics.ts";
import { checkRecord, decodeRecord, MAX_RECORD_BYTES, opToken, recordSubjectTokens, type LogSkip, type StateRecord } from "./records.ts";
import { DOMAINS, type Domain } from "./schema.ts";
import { durableName, wakeGroup } from "../queue/topics.ts";

const MINUTE_MS = 60_000;
const NS_PER_MS = 1_000_000;

/**
 * Msg-id de-duplication window on the logs. A write may be retried under its op id for as
 * long as the router's write budget (60 s) runs, through any data node, so the broker must
 * still recognise the id when the last retry lands; two budgets cover a retry that starts
 * at the very end of one. Beyond the window the ledger (estate_ops) still applies an op id
 * once, so the window only saves log space, never correctness.
 */
export const LOG_DUPLICATE_WINDOW_MS = 2 * MINUTE_MS;

export { MAX_RECORD_BYTES };

/**
 * Room left in one log message for its headers (Nats-Msg-Id with an op id of ≤ 100 bytes,
 * Nats-Expected-Stream, the header preamble): the stream's max_msg_size and the broker's
 * max_payload both count headers and data together.
 */
export const APPEND_HEADER_ROOM_BYTES = 1024;

/**
 * The largest encoded record this connection can append: the log streams' cap or the
 * broker's max_payload (a server may be configured lower than its 1 MiB default),
 * whichever is smaller, less the headers' room.
 */
export function recordLimitBytes(nc: Pick<NatsConnection, "info">): number {
  const max_payload = nc.info?.max_payload ?? MAX_RECORD_BYTES;
  return Math.min(MAX_RECORD_BYTES, max_payload) - APPEND_HEADER_ROOM_BYTES;
}

/**
 * Waits this long for the log to acknowledge an append. A stream leader's death stops
 * writes for ~4 s while a new one is elected; 10 s rides that out and still leaves the
 * router most of its 60 s write budget to try another node.
 */
export const APPEND_TIMEOUT_MS = 10_000;
/** Between appends that met a log with no leader: a fraction of an R3 election (~0.3–4 s). */
const APPEND_RETRY_MS = 250;
/** What a publish answers when the stream has no leader to take it: nothing was stored. */
const NO_LEADER = /\b503\b|no responders/i;

/**
 * A log's identity is a generation minted when it is created and kept in its config
 * description, which the meta layer replicates identically to every member. Not the
 * stream's `created` time: in a cluster each member stamps its own replica's creation, so
 * a copy reading it from another leader after a leadership change would judge its own log
 * foreign (seen as two data nodes' checkpoints differing by a few milliseconds).
 */
const GENERATION_PREFIX = "crewlet estate log, generation ";

export function logGeneration(description: string | undefined, created: string): string {
  return description?.startsWith(GENERATION_PREFIX) ? description.slice(GENERATION_PREFIX.length) : created;
}

export function logStreamConfig(domain: Domain, replicas: number): StreamConfig {
  return {
    name: stateLogStream(domain),
    description: `${GENERATION_PREFIX}${crypto.randomUUID()}`,
    subjects: [stateLogSubjects(domain)],
    // The log IS the history every copy is rebuilt from: nothing ages out by itself; a
    // retention duty trims it below every copy's applied position.
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    num_replicas: replicas,
    max_consumers: -1,
    max_msgs: -1,
    max_bytes: -1,
    max_age: 0,
    max_msgs_per_subject: -1,
    max_msg_size: MAX_RECORD_BYTES,
    // Never drop a record to make room: a full log refuses the write instead (discard new),
    // and the writer hears `unknown` rather than a copy silently losing history.
    discard: DiscardPolicy.New,
    duplicate_window: LOG_DUPLICATE_WINDOW_MS * NS_PER_MS,
    no_ack: false,
    sealed: false,
    // A deleted record would be a hole no copy could fill.
    deny_delete: true,
    deny_purge: false,
    allow_rollup_hdrs: false,
    allow_direct: false,
    mirror_direct: false,
  } as StreamConfig;
}

/** JetStream API error: stream name already in use with a different configuration. */
const STREAM_NAME_IN_USE = 10058;
/** Looks-then-creates per log before boot gives up: three API timeouts is 30 s. */
const ENSURE_ATTEMPTS = 3;
/** JetStream API error: stream not found. */
const STREAM_NOT_FOUND = 10059;
/** JetStream API error: consumer not found. */
const CONSUMER_NOT_FOUND = 10014;
/** JetStream API error: no message found (a last-by-subject lookup that matched nothing). */
const NO_MESSAGE_FOUND = 10037;

function apiErrorCode(err: unknown): number | undefined {
  const api = (err as { api_error?: { err_code?: number } } | null)?.api_error;
  return typeof api?.err_code === "number" ? api.err_code : undefined;
}

export interface LogPosition {
  first_seq: number;
  last_seq: number;
  /** The log's generation (see logGeneration): names this log, not a rebuilt one. */
  created: string;
}

export type AppendResult =
  | { ok: true; seq: number; duplicate: boolean }
  /** The log did not answer: the append may or may not have landed (unless notSent). */
  | { ok: false; error: string; notSent?: true }
  /** Refused before anything was published: no copy could apply it, or it is too large. */
  | { ok: false; error: string; refused: { code: "invalid_record" | "too_large"; field?: string } };

export class StateLog {
  private readonly js: JetStreamClient;
  private jsmP: Promise<JetStreamManager> | null = null;

  constructor(
    private readonly nc: NatsConnection,
    private readonly log: Logger,
    private readonly clock: Clock = systemClock,
  ) {
    this.js = nc.jetstream({ timeout: APPEND_TIMEOUT_MS });
  }

  private jsm(): Promise<JetStreamManager> {
    this.jsmP ??= this.nc.jetstreamManager({ timeout: APPEND_TIMEOUT_MS, checkAPI: false });
    return this.jsmP;
  }

  /**
   * Creates the three logs when missing, concurrently (an R3 stream costs a raft campaign
   * each). An existing log is left as it is: its settings were a peer's decision, and
   * replacing a log's configuration under live copies is an operator's act.
   */
  async ensureStreams(replicas: number): Promise<void> {
    const jsm = await this.jsm();
    await Promise.all(DOMAINS.map((domain) => this.ensureStream(jsm, domain, replicas)));
  }

  private async ensureStream(jsm: JetStreamManager, domain: Domain, replicas: number): Promise<void> {
    const name = stateLogStream(domain);
    for (let attempt = 1; ; attempt++) {
      try {
        try {
          await jsm.streams.info(name);
          return;
        } catch (err) {
          if (apiErrorCode(err) !== STREAM_NOT_FOUND) throw err;
        }
        try {
          await jsm.streams.add(logStreamConfig(domain, replicas));
          this.log.info("estate_log_created", { stream: name, replicas });
        } catch (err) {
          if (apiErrorCode(err) !== STREAM_NAME_IN_USE) throw err;
        }
        return;
      } catch (err) {
        // Several members creating R3 streams at once can outlast one API timeout while the
        // raft groups campaign; the next look usually finds the stream a peer made.
        if (attempt >= ENSURE_ATTEMPTS) throw new Error(`estate: creating ${name} failed after ${attempt} attempts: ${String(err)}`);
        this.log.warn("estate_log_create_retry", { stream: name, attempt, error: String(err) });
      }
    }
  }

  async position(domain: Domain): Promise<LogPosition> {
    const jsm = await this.jsm();
    const info = await jsm.streams.info(stateLogStream(domain));
    return { first_seq: info.state.first_seq, last_seq: info.state.last_seq, created: logGeneration(info.config.description, info.created) };
  }

  /**
   * The last position the domain's wake feed has settled (its ack floor): records above it
   * may still wake a seat. Null when the feed has no consumer (no data node started one).
   */
  async wakeAckFloor(domain: Domain): Promise<number | null> {
    const jsm = await this.jsm();
    try {
      const info = await jsm.consumers.info(stateLogStream(domain), durableName(wakeGroup(domain)));
      return info.ack_floor.stream_seq;
    } catch (err) {
      if (apiErrorCode(err) === CONSUMER_NOT_FOUND) return null;
      throw err;
    }
  }

  /**
   * Purges every record below `first_kept` (the trim; the stream denies single deletes but
   * not a purge). Returns how many went. Only the retention duty calls it, after a snapshot
   * that joins the log from `first_kept` is stored.
   */
  async purgeBelow(domain: Domain, first_kept: number): Promise<number> {
    const jsm = await this.jsm();
    const r = await jsm.streams.purge(stateLogStream(domain), { seq: first_kept });
    return r.purged;
  }

  /*
   * Why no atomic batch and no Nats-Expected-Last-*: every estate write is one record under
   * one op id, so it is already all-or-nothing, and a retried append relies on the broker
   * answering a repeat `duplicate: true`, which a batch turns into a failure of the whole
   * batch. Conditional writes are judged by the appliers in log order on every copy; a log
   * subject names the op type, not the row, so an expected-last header would refuse
   * unrelated writers. Revisit if a write ever needs two records that land together.
   */
  /**
   * Appends a record under its op id. Every append passes the record gate first (see
   * checkRecord): a record no copy could apply never reaches the log. `ok: false` without
   * `refused` means the log did not answer (unknown).
   */
  async append(record: StateRecord): Promise<AppendResult> {
    const checked = checkRecord(record, recordLimitBytes(this.nc));
    if (!checked.ok) return { ok: false, error: checked.message, refused: { code: checked.code, ...(checked.field ? { field: checked.field } : {}) } };
    return this.appendRaw(record.domain, stateLogSubject(record.domain, ...recordSubjectTokens(record.body)), checked.data, record.op_id);
  }

  /**
   * The operator's skip marker for `position`, if the log holds one (the last appended for
   * it), with its op id and its own position. Throws when the log does not answer.
   */
  async skipMarker(domain: Domain, position: number): Promise<{ marker: LogSkip; op_id: string; seq: number } | null> {
    const jsm = await this.jsm();
    let m;
    try {
      m = await jsm.streams.getMessage(stateLogStream(domain), { last_by_subj: stateLogSubject(domain, opToken("log.skip"), String(position)) });
    } catch (err) {
      if (apiErrorCode(err) === NO_MESSAGE_FOUND) return null;
      throw err;
    }
    const decoded = decodeRecord(domain, m.data);
    if (!decoded.ok || decoded.record.body.op !== "log.skip" || decoded.record.body.position !== position) return null;
    return { marker: decoded.record.body, op_id: decoded.record.op_id, seq: m.seq };
  }

  /** Appends bytes as they are (the repair and test path for records this build cannot write). */
  async appendRaw(domain: Domain, subject: string, data: Uint8Array, msg_id: string): Promise<AppendResult> {
    const started = this.clock.now();
    for (let attempt = 1; ; attempt++) {
      const left_ms = APPEND_TIMEOUT_MS - (this.clock.now() - started);
      try {
        const ack = await this.js.publish(subject, data, {
          msgID: msg_id,
          expect: { streamName: stateLogStream(domain) },
          timeout: Math.max(1, left_ms),
        });
        if (attempt > 1) this.log.info("estate_append_through_election", { stream: stateLogStream(domain), attempts: attempt, waited_ms: this.clock.now() - started });
        return { ok: true, seq: ack.seq, duplicate: ack.duplicate };
      } catch (err) {
        // No responders: the log has no leader this moment (its leader died; an election
        // is under way) and nothing was stored. The same op id again is safe (the broker
        // de-duplicates it, the appliers apply an op id once), so the append rides the
        // election out within its budget instead of answering "unknown" in milliseconds —
        // an unknown reply write was a turn acked with its answer lost.
        const message = (err as Error).message ?? String(err);
        const code = (err as { code?: string }).code;
        // The connection closing or closed: the publish never left this process.
        if (code === "CONNECTION_CLOSED" || code === "CONNECTION_DRAINING") return { ok: false, error: message, notSent: true };
        const waited = this.clock.now() - started;
        if (!NO_LEADER.test(`${(err as { code?: string }).code ?? ""} ${message}`) || waited + APPEND_RETRY_MS >= APPEND_TIMEOUT_MS) return { ok: false, error: message };
        await this.clock.sleep(APPEND_RETRY_MS);
      }
    }
  }

  get jetstream(): JetStreamClient {
    return this.js;
  }
}
