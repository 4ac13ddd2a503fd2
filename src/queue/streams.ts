// The streams the queue owns, with every setting spelled out and its reason. streamSpecs is
// pure (the memory twin reads the same table); ensureStreams is the JetStream I/O.
import { DiscardPolicy, RetentionPolicy, StorageType, type JetStreamManager, type StreamConfig } from "nats";
import type { Logger } from "../log.ts";
import { ACK_WAIT_MS } from "./contract.ts";
import {
  AGENT_SHARDS,
  agentStream,
  agentSubjects,
  AUDIT_SUBJECTS,
  DLQ_SUBJECTS,
  EVENTS_SUBJECTS,
  NOTIFICATIONS_SUBJECT,
  STREAM_AUDIT,
  STREAM_DLQ,
  STREAM_EVENTS,
  STREAM_NOTIFICATIONS,
} from "./topics.ts";

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;

/**
 * Msg-id de-duplication window on the mail streams. A wake is published with an id derived
 * from the record that caused it, and the publisher's own feed can hand that record back
 * as late as one ack wait after first taking it (a dead node's batch), so the window covers
 * the ack wait plus five minutes for the slow republish. The broker keeps one map entry per
 * id for the window; at wake rates that is kilobytes.
 */
export const MAIL_DUPLICATE_WINDOW_MS = ACK_WAIT_MS + 5 * MINUTE_MS;

/**
 * Events are observability for the dashboard and for nodes catching up after a restart;
 * the node store keeps its own copy of what it needs. A day covers an overnight outage of
 * the dashboard; older history is in node.db, not here.
 */
export const EVENTS_MAX_AGE_MS = DAY_MS;
/** Bounds the events stream's disk whatever the event rate; oldest go first. */
export const EVENTS_MAX_BYTES = 256 * 1024 * 1024;
/** Events rarely carry ids; the broker's usual two minutes covers a publisher's retry. */
export const EVENTS_DUPLICATE_WINDOW_MS = 2 * MINUTE_MS;

/** Dead letters wait for an operator: two weeks spans a holiday; a count cap bounds disk. */
export const DLQ_MAX_AGE_MS = 14 * DAY_MS;
export const DLQ_MAX_MSGS = 100_000;
/** A dead-letter copy carries an id per (mailbox, message), so a retried copy is one copy. */
export const DLQ_DUPLICATE_WINDOW_MS = MAIL_DUPLICATE_WINDOW_MS;

/**
 * The fleet's audit log (who did what through the API, on any node): a quarter covers the
 * usual review cycle and an incident found weeks later. An entry is ~250 bytes, so the byte
 * cap holds ~500,000 write requests (a busy company's quarter several times over) and bounds
 * a runaway client's worth, oldest first; it is reserved against the broker's JetStream
 * storage like the events stream's cap, so it stays small.
 */
export const AUDIT_MAX_AGE_MS = 90 * DAY_MS;
export const AUDIT_MAX_BYTES = 128 * 1024 * 1024;
/** An entry carries an id per (node.db, row): a publisher's retry after a lost answer is one entry. */
export const AUDIT_DUPLICATE_WINDOW_MS = 10 * MINUTE_MS;

/**
 * Largest message on any of our streams. Triggers and events are small JSON; a megabyte
 * (the nats-server default max_payload) stops a runaway payload at the publish.
 */
export const MAX_MSG_BYTES = 1024 * 1024;

const NS_PER_MS = 1_000_000;

export interface StreamSpec {
  name: string;
  subjects: string[];
  /** interest: kept while a mailbox covering it has not acked it; limits: age/size caps. */
  retention: "interest" | "limits";
  max_age_ms: number;
  max_bytes: number;
  max_msgs: number;
  duplicate_window_ms: number;
}

export function streamSpecs(): StreamSpec[] {
  return [
    // Mail is never aged out or capped: discarding a seat's mail is the failure this stream
    // exists to prevent. Limits retention, so a seat's mail is kept whether or not any
    // mailbox reads it, and a mailbox's consumer can be of one replica (interest streams
    // refuse those: 10134) and made again anywhere from what is stored. What a mailbox has
    // read is purged by its reader (queue/trim.ts) and a removed seat's with its mailbox, so
    // the streams hold unread mail plus a trim interval's worth. One stream a shard (topics.ts).
    ...Array.from({ length: AGENT_SHARDS }, (_, shard): StreamSpec => ({
      name: agentStream(shard),
      subjects: [agentSubjects(shard)],
      retention: "limits",
      max_age_ms: 0,
      max_bytes: -1,
      max_msgs: -1,
      duplicate_window_ms: MAIL_DUPLICATE_WINDOW_MS,
    })),
    { name: STREAM_NOTIFICATIONS, subjects: [NOTIFICATIONS_SUBJECT], retention: "interest", max_age_ms: 0, max_bytes: -1, max_msgs: -1, duplicate_window_ms: MAIL_DUPLICATE_WINDOW_MS },
    { name: STREAM_EVENTS, subjects: [EVENTS_SUBJECTS], retention: "limits", max_age_ms: EVENTS_MAX_AGE_MS, max_bytes: EVENTS_MAX_BYTES, max_msgs: -1, duplicate_window_ms: EVENTS_DUPLICATE_WINDOW_MS },
    { name: STREAM_DLQ, subjects: [DLQ_SUBJECTS], retention: "limits", max_age_ms: DLQ_MAX_AGE_MS, max_bytes: -1, max_msgs: DLQ_MAX_MSGS, duplicate_window_ms: DLQ_DUPLICATE_WINDOW_MS },
    { name: STREAM_AUDIT, subjects: [AUDIT_SUBJECTS], retention: "limits", max_age_ms: AUDIT_MAX_AGE_MS, max_bytes: AUDIT_MAX_BYTES, max_msgs: -1, duplicate_window_ms: AUDIT_DUPLICATE_WINDOW_MS },
  ];
}

export function streamConfig(spec: StreamSpec, replicas: number): StreamConfig {
  return {
    name: spec.name,
    subjects: spec.subjects,
    retention: spec.retention === "interest" ? RetentionPolicy.Interest : RetentionPolicy.Limits,
    storage: StorageType.File,
    num_replicas: replicas,
    max_consumers: -1,
    max_msgs: spec.max_msgs,
    max_bytes: spec.max_bytes,
    max_age: spec.max_age_ms * NS_PER_MS,
    max_msgs_per_subject: -1,
    max_msg_size: MAX_MSG_BYTES,
    // Capped streams drop their oldest: an old event or dead letter is worth less than a new one.
    discard: DiscardPolicy.Old,
    duplicate_window: spec.duplicate_window_ms * NS_PER_MS,
    no_ack: false,
    sealed: false,
    deny_delete: false,
    deny_purge: false,
    allow_rollup_hdrs: false,
    allow_direct: false,
    mirror_direct: false,
  } as StreamConfig;
}

/** JetStream API error: stream name already in use with a different configuration. */
const STREAM_NAME_IN_USE = 10058;
export const STREAM_NOT_FOUND = 10059;
/** JetStream API error: no consumer by that name on the stream. */
export const CONSUMER_NOT_FOUND = 10014;

/** What a node that does not decide the fleet's streams (a leaf) says while the members
 * have not created one yet; the boot waits it out like a forming cluster. */
export const WAITING_FOR_MEMBERS = "waiting for the members to create it";

/**
 * Creates each stream, or brings an existing one to our settings (a peer created it first
 * with the same ones: nothing happens; an older node's settings: updated). Retention cannot
 * change on a live stream, so a mismatch there is an error naming the stream.
 */
export async function ensureStreams(jsm: JetStreamManager, replicas: number, log: Logger, decides = true): Promise<void> {
  for (const spec of streamSpecs()) {
    if (!decides) {
      // A leaf holds no replica: the members decide every stream's settings (replication
      // above all), so a leaf only looks. Updating would set the members' R3 streams to
      // the leaf's own replica count (seen: R3 → R1, then flipped back by a member's boot).
      await jsm.streams.info(spec.name).catch((err: unknown) => {
        if (apiErrorCode(err) === STREAM_NOT_FOUND) throw new Error(`queue: stream ${spec.name} is not there yet: ${WAITING_FOR_MEMBERS}`);
        throw err;
      });
      continue;
    }
    const config = streamConfig(spec, replicas);
    try {
      await jsm.streams.add(config);
    } catch (err) {
      if (apiErrorCode(err) !== STREAM_NAME_IN_USE) throw new Error(`queue: creating stream ${spec.name} failed: ${String(err)}`);
      const info = await jsm.streams.info(spec.name);
      if (info.config.retention !== config.retention) {
        throw new Error(`queue: stream ${spec.name} exists with retention ${info.config.retention}, want ${config.retention}; delete it or fix stream settings`);
      }
      await jsm.streams.update(spec.name, config);
      log.info("queue_stream_updated", { stream: spec.name });
    }
  }
}

export function apiErrorCode(err: unknown): number | undefined {
  const api = (err as { api_error?: { err_code?: number } } | null)?.api_error;
  return typeof api?.err_code === "number" ? api.err_code : undefined;
}
