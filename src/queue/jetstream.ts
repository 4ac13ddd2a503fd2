// The queue contract on JetStream, over the node's ONE NatsConnection (it is borrowed, never
// closed here). Mailboxes are durable pull consumers; an attachment makes one pull at a time,
// only when it is ready to run what the pull brings (attachment.ts decides when).
import { AckPolicy, createInbox, DeliverPolicy, headers as natsHeaders, ReplayPolicy, type ConsumerConfig, type JetStreamClient, type JetStreamManager, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from "nats";
import { z } from "zod";
import type { Clock, Timer } from "../clock.ts";
import type { Logger } from "../log.ts";
import {
  ACK_WAIT_MS,
  MAX_BATCH,
  MAX_DELIVERIES,
  type Answer,
  type AttachOptions,
  type Attachment,
  type BatchAttachOptions,
  type BatchHandler,
  type DeadLetter,
  type Delivery,
  type Handler,
  type MailboxRef,
  type MailboxSnapshot,
  type PublishOptions,
  type PublishResult,
  type Queue,
  type Responder,
  type ScatterOptions,
} from "./contract.ts";
import { PullInboxes, type PullInbox } from "./pull-inboxes.ts";
import { AttachmentCore, PRODUCTION_PACING, PULL_EXPIRES_MS, settleDelivery, type CoreOptions, type Pacing, type MailboxSource, type PullMode, type PullSink, type RawMessage, type Runner } from "./attachment.ts";
import { DEAD_LETTER_LIST_MAX, deadLetterCopy, H_MSG_ID, parseDeadLetter, replayDeadLetterVia } from "./deadletter.ts";
import { apiErrorCode, CONSUMER_NOT_FOUND, ensureStreams, WAITING_FOR_MEMBERS } from "./streams.ts";
import { AGENT_STREAMS, durableName, groupCandidates, groupOfDurable, parseMailbox, STREAM_DLQ, streamForSubject } from "./topics.ts";
import { isReplayable, MailTrim } from "./trim.ts";

/**
 * A pull the broker has not ended this long after its expiry (PULL_EXPIRES_MS, attachment.ts)
 * is over: the leader counts the expiry from when the request reached it, which is later than
 * our send by one trip through our member and a route, milliseconds even on a loaded box;
 * 5 s covers a stalled route many times over. Normally the broker's 408 ends the pull
 * first; what the leader still sends after either end is caught by the attachment's
 * subscription, which outlives its pulls (pull-inboxes.ts).
 */
export const PULL_LOST_AFTER_MS = 5_000;
/**
 * Pulls a consumer may have waiting at once. Each attachment holds at most one; a lost
 * client's pulls linger until they expire. 128 leaves room for both on any one mailbox.
 */
export const MAX_WAITING_PULLS = 128;
/**
 * Unacked deliveries a mailbox may have out. An attachment holds at most MAX_BATCH; a
 * handoff race or a dead node's batch adds a few more. Well above that so it never
 * throttles a live seat, still a bound.
 */
export const MAX_ACK_PENDING = 1_000;
/** Pulls refused with "no responders" in a row (one a second) before a mailbox is made again
 *  elsewhere: an R1 consumer has no election to wait out, and the broker calls its member
 *  gone only 150 s later. A silent pull is 10 s already, so one unanswered INFO decides it. */
export const REVIVE_AFTER_UNREACHABLE_PULLS = 3;
/**
 * How long a mailbox's consumer INFO may go unanswered before the mailbox is judged gone
 * with its member and made again. A live one answers within a second on a loaded box; a
 * wrong judgement costs a rerun of settled mail the ledger skips, not a message.
 */
const REVIVE_CALL_TIMEOUT_MS = 2_000;
/** A revival's delete and its polls for "gone": the meta leader answers those in milliseconds. */
const REVIVE_POLL_TIMEOUT_MS = 1_000;
/**
 * How long a revival waits for the meta layer to say the old consumer is gone: a meta
 * election when the dead member led the meta group (4–9 s after its last heartbeat) and a
 * proposal, with room on a loaded box.
 */
const REVIVE_GONE_WITHIN_MS = 30_000;
/** Consumer INFO calls handOffLeaderships keeps in flight: fast, without a burst of hundreds. */
const LIST_INFO_CONCURRENCY = 16;
/**
 * How long handOffLeaderships waits for a peer to lead a consumer this member stepped down
 * from. An R3 election takes a few hundred ms on a loaded 2-core box (measured ~250 ms per
 * stepdown on 2.9.10, ~1 s on 2.15.2 counting its unanswered first INFO poll); 10 s covers a
 * stalled route many times over and keeps a drain short.
 * A mailbox still led here after that is logged and the drain goes on (its hand-backs are
 * then at the mercy of the ack wait, as before).
 */
export const LEADER_HANDOFF_WITHIN_MS = 10_000;
/**
 * A settlement (ack, NAK, term) is sent as a request and counts only once the consumer's
 * leader answers it (a "double ack"). A fire-and-forget ack that meets a dying leader is
 * lost, and the message comes back after the 30-minute ack wait to run again (seen in the
 * chaos runs). Each attempt waits ACK_CONFIRM_ATTEMPT_MS for the answer; attempts go on
 * through an election (R3: ~0.3–4 s) for up to SETTLE_CONFIRM_WITHIN_MS, then the
 * settlement is reported unconfirmed (the ledger absorbs the redelivery).
 */
export const SETTLE_CONFIRM_WITHIN_MS = 15_000;
const ACK_CONFIRM_ATTEMPT_MS = 2_000;
const ACK_CONFIRM_RETRY_MS = 250;
/** Between consumer INFO polls while waiting for a new leader: an election's own pace. */
const LEADER_POLL_MS = 100;
/**
 * One consumer INFO poll while waiting for a new leader. Since 2.10 only the consumer's
 * leader answers INFO, so a request sent during the election goes unanswered until the
 * client gives up (seen on 2.15.2: the usual 10 s API timeout outlasted the whole hand-off
 * window). A short timeout turns that into one more poll; an answer on a loaded box comes
 * well within it.
 */
const LEADER_POLL_TIMEOUT_MS = 1_000;
/**
 * The consumer LIST API pages 256 consumers at a time (nats-server 2.9 stopped at the
 * first page in a cluster, so this walked NAMES and asked INFO of each; from 2.10 LIST
 * pages, re-measured on 2.15.2: 300 listed of 300). This many pages bound the walk.
 */
const LIST_PAGES_MAX = 1_000;

const NS_PER_MS = 1_000_000;

/** JetStream API error codes this module handles. */
const NO_MESSAGE_FOUND = 10037;
/**
 * The other ways a stream says a message is not there: a deleted sequence inside the
 * stream ("sequence N not found") and a delete of a missing one ("no message found").
 */
const SEQUENCE_NOT_FOUND = 10043;
const DELETE_NO_MESSAGE = 10057;
/** A reset is one consumer-leader call; on a box at load 30 an answer has come within this. */
const CONSUMER_RESET_TIMEOUT_MS = 10_000;
/** nats.js's codes for a request nobody subscribes to (a 503 status) and one nobody answered. */
const NO_RESPONDERS = "503";
const REQUEST_TIMEOUT = "TIMEOUT";
const isMissingMessage = (err: unknown) => {
  const code = apiErrorCode(err);
  return code === NO_MESSAGE_FOUND || code === SEQUENCE_NOT_FOUND || code === DELETE_NO_MESSAGE;
};

export interface JetStreamQueueOptions {
  nc: NatsConnection;
  /** stream.replicas: 1 on one box, 3 on a three-member fleet. */
  replicas: number;
  clock: Clock;
  log: Logger;
  /**
   * Tests only. The ack wait is a consumer setting on a real broker, so a test that proves
   * "an unsettled delivery comes back after the ack wait" must create its consumers with a
   * short one rather than wait 30 minutes. Production never passes it.
   */
  ackWait_ms?: number;
  /** Tests only: the trim cadence (trim.ts TRIM_EVERY_MS), so a test sees a trim in seconds. */
  trimEvery_ms?: number;
  /** Tests only: an idle attachment's safety pull and first nap (attachment.ts PRODUCTION_PACING),
   *  so a test proves what waits for them in seconds rather than a minute. */
  pacing?: Pacing;
  /**
   * False on a leaf: the members decide the fleet's streams and their replication. The
   * leaf looks streams and mailboxes up without creating or updating them.
   */
  decidesStreams?: boolean;
}

// ---- wire parsing -----------------------------------------------------------------------

const Positive = z.coerce.number().int().positive();

export interface AckInfo {
  stream: string;
  consumer: string;
  deliveryCount: number;
  streamSeq: number;
}

/**
 * A JetStream delivery's reply subject carries its metadata:
 * v1 `$JS.ACK.{stream}.{consumer}.{delivered}.{sseq}.{dseq}.{ts}.{pending}` (9 tokens), or
 * v2 `$JS.ACK.{domain}.{account}.{stream}.{consumer}.{delivered}.{sseq}.{dseq}.{ts}.{pending}.{token}`.
 */
export function parseAckSubject(reply: string): AckInfo {
  const t = reply.split(".");
  if (t[0] !== "$JS" || t[1] !== "ACK") throw new Error(`delivery reply ${JSON.stringify(reply)}: not a JetStream ack subject`);
  const base = t.length === 9 ? 2 : t.length >= 11 ? 4 : -1;
  if (base < 0) throw new Error(`delivery reply ${JSON.stringify(reply)}: ${t.length} tokens, want 9 or 11+`);
  const delivered = Positive.safeParse(t[base + 2]);
  const sseq = Positive.safeParse(t[base + 3]);
  if (!delivered.success) throw new Error(`delivery reply ${JSON.stringify(reply)}: field delivered is not a positive integer`);
  if (!sseq.success) throw new Error(`delivery reply ${JSON.stringify(reply)}: field stream_seq is not a positive integer`);
  return { stream: t[base]!, consumer: t[base + 1]!, deliveryCount: delivered.data, streamSeq: sseq.data };
}

export function headerRecord(h: MsgHdrs | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!h) return out;
  for (const [k, values] of h) out[k] = values.join(",");
  return out;
}

function toNatsHeaders(record: Record<string, string> | undefined): MsgHdrs | undefined {
  if (!record || Object.keys(record).length === 0) return undefined;
  const h = natsHeaders();
  for (const [k, v] of Object.entries(record)) h.set(k, v);
  return h;
}

/** A status message (408 expired, 409 refused, 503 no responders, 100 heartbeat), not mail. */
function statusOf(msg: Msg): number {
  return msg.data.length === 0 && msg.headers && msg.headers.code > 0 ? msg.headers.code : 0;
}

const MsgGetReply = z.object({
  message: z.object({ seq: z.number().int().positive() }).optional(),
  error: z.object({ code: z.number(), err_code: z.number().optional(), description: z.string() }).optional(),
});

/** A consumer LIST page: only what listMailboxes reads is checked. */
const ListPage = z.object({
  total: z.number().int().nonnegative(),
  offset: z.number().int().nonnegative(),
  limit: z.number().int().nonnegative(),
  consumers: z.array(z.object({ name: z.string(), config: z.object({ filter_subject: z.string().optional() }) })).nullable(),
  /** Consumers the cluster knows of but whose leaders did not answer (2.10+). */
  missing: z.array(z.string()).optional(),
});

// ---- the queue --------------------------------------------------------------------------

export class JetStreamQueue implements Queue {
  private readonly nc: NatsConnection;
  private readonly replicas: number;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly ackWait_ms: number;
  private readonly pacing: Pacing;
  private readonly decidesStreams: boolean;
  private readonly js: JetStreamClient;
  private jsmPromise: Promise<JetStreamManager> | null = null;
  private readonly attachments = new Set<AttachmentCore>();
  /** The consumer behind each attachment, for handOffLeaderships. */
  private readonly consumerOf = new Map<AttachmentCore, { stream: string; durable: string }>();
  private readonly pulls = new PullTracker();
  /** Every attachment's source, so close() can drop their subscriptions. */
  private readonly sources = new Set<JetStreamSource>();
  private readonly serving = new Set<Subscription>();
  /** Purges what mailboxes have read from their limits-retained streams (trim.ts). */
  private readonly trim: MailTrim;
  /** Revivals in flight, one per mailbox, so many failing pulls make one. */
  private readonly reviving = new Map<string, Promise<void>>();

  constructor(opts: JetStreamQueueOptions) {
    if (!Number.isInteger(opts.replicas) || opts.replicas < 1 || opts.replicas > 5) throw new Error(`queue: replicas must be 1..5, got ${opts.replicas}`);
    this.nc = opts.nc;
    this.ringAfterReconnects().catch(() => undefined);
    this.replicas = opts.replicas;
    this.clock = opts.clock;
    this.log = opts.log;
    this.ackWait_ms = opts.ackWait_ms ?? ACK_WAIT_MS;
    this.pacing = opts.pacing ?? PRODUCTION_PACING;
    this.decidesStreams = opts.decidesStreams ?? true;
    this.js = this.nc.jetstream({ timeout: 10_000 });
    this.trim = new MailTrim(
      {
        ackFloor: async (stream, durable) => (await (await this.jsm()).consumers.info(stream, durable)).ack_floor.stream_seq,
        purgeBelow: async (stream, subject, seq) => void (await (await this.jsm()).streams.purge(stream, { filter: subject, seq })),
      },
      this.clock,
      this.log,
      opts.trimEvery_ms,
    );
  }

  private jsm(): Promise<JetStreamManager> {
    // checkAPI off: the first call below is the check; an account-info round trip adds nothing.
    this.jsmPromise ??= this.nc.jetstreamManager({ checkAPI: false, timeout: 10_000 });
    return this.jsmPromise;
  }

  async ensureStreams(): Promise<void> {
    await ensureStreams(await this.jsm(), this.replicas, this.log, this.decidesStreams);
  }

  consumerConfig(subject: string, group: string): ConsumerConfig {
    const mail = isMailStream(mustStream(subject));
    return {
      durable_name: durableName(group),
      filter_subject: subject,
      deliver_policy: DeliverPolicy.All,
      ack_policy: AckPolicy.Explicit,
      ack_wait: this.ackWait_ms * NS_PER_MS,
      max_deliver: MAX_DELIVERIES,
      replay_policy: ReplayPolicy.Instant,
      max_ack_pending: MAX_ACK_PENDING,
      max_waiting: MAX_WAITING_PULLS,
      max_batch: MAX_BATCH,
      // A seat's mailbox is of one replica: no raft group, so idle it costs the broker nothing
      // (bench/mailbox-shapes.ts); the mail itself is on the stream's replicas. Interest
      // streams refuse consumers of fewer replicas than the stream (10134).
      num_replicas: mail ? 1 : this.replicas,
      // File state for a mailbox, so a member's restart keeps its position exactly (memory
      // state would start again from what is stored, rerunning what a trim had not removed).
      // An interest stream's consumer keeps its state in memory on a cluster: a whole-cluster
      // kill loses its position, not mail (interest retention removed what was acknowledged),
      // and it walked twice as fast; a standalone server keeps no memory-state consumer
      // across its restart, so file there.
      mem_storage: !mail && this.replicas > 1,
      headers_only: false,
      // No inactive_threshold: a seat may stay unowned as long as a rebalance or an operator
      // takes, and its mailbox must still be there.
    } as ConsumerConfig;
  }

  /**
   * Creates with the API's `create` action (nats.js sends it; servers 2.10+ honour it): a
   * mailbox a peer made first with the same settings is answered from the existing
   * consumer (on a cluster still a meta proposal, so a cluster reads first: below), and a
   * durable of the same name on another subject is refused. nats-server 2.9 ignored the
   * action and treated such a create as an update, so `bob`'s control group (which shares
   * its name with `bob-control`'s inbox group) could re-point the other's mailbox; this
   * looked before creating those, and no longer needs to (re-measured on 2.15.2 by the
   * conformance case "a group already used on another subject is refused").
   */
  async ensureMailbox(subject: string, group: string): Promise<void> {
    const stream = mustStream(subject);
    const config = this.consumerConfig(subject, group);
    const durable = config.durable_name!;
    const jsm = await this.jsm();
    if (!this.decidesStreams && !isMailStream(stream)) {
      // A leaf creates no fleet asset: the members make them. Waiting for them beats a
      // consumer of the leaf's own making, whose settings (replicas) would differ from
      // theirs. A seat's mailbox is the exception: its settings do not depend on the
      // replicas (consumerConfig), and a control mailbox is made only by the seat's
      // acquirer (sandbox/seat-runs.ts), which may be a leaf.
      const found = await jsm.consumers.info(stream, durable).catch((err) => {
        if (apiErrorCode(err) === CONSUMER_NOT_FOUND) throw new Error(`queue: mailbox ${group} on ${subject} is not there yet: ${WAITING_FOR_MEMBERS}`);
        if (isMailStream(stream) && isUnanswered(err)) return null;
        throw new Error(`queue: reading mailbox ${group} on ${subject} failed: ${String(err)}`);
      });
      if (found === null) return this.unanswered(subject, group);
      if (found.config.filter_subject !== subject) throw new Error(`queue: mailbox ${group} already exists on ${found.config.filter_subject}, not ${subject}`);
      return;
    }
    if (this.replicas > 1 || !this.decidesStreams) {
      // On a cluster a create is a proposal to the meta group that every member applies, even
      // for a mailbox a peer already made with these settings (nats-server 2.15 proposes it as
      // an update: jsClusteredConsumerRequest). A read is not: the mailbox's leader answers it,
      // or the meta leader says "not found". Members booting together walk the same list, so
      // much of each walk finds a peer's mailbox; reading first keeps their walks from
      // proposing every mailbox three times. A read that fails says nothing: create.
      const found = await jsm.consumers.info(stream, durable).catch((err: unknown) => (isMailStream(stream) && isUnanswered(err) ? "unanswered" : null));
      if (found === "unanswered") return this.unanswered(subject, group);
      if (found?.config.filter_subject === subject) {
        // What the create path hears from the server as "settings differ", said here too.
        const differ = mailboxSettingsDiffer(config, found.config);
        if (differ.length > 0) this.log.warn("queue_mailbox_settings_differ", { subject, group, settings: differ });
        return;
      }
    }
    try {
      await jsm.consumers.add(stream, config);
    } catch (err) {
      // Made by a peer with other settings (an older node): the mailbox exists and holds the
      // mail, which is what this call promises. On another subject it is a clash: refused.
      const info = await jsm.consumers.info(stream, durable).catch(() => null);
      // "Already exists" with the info unreadable (its leader not elected yet): a peer made
      // it, and when this group's name is unambiguous it can only be this mailbox.
      if (!info && /already exists/i.test(String(err)) && groupCandidates(group).length <= 1) {
        this.log.warn("queue_mailbox_settings_differ", { subject, group, error: String(err) });
        return;
      }
      if (!info || info.config.filter_subject !== subject) throw new Error(`queue: creating mailbox ${group} on ${subject} failed: ${String(err)}`);
      this.log.warn("queue_mailbox_settings_differ", { subject, group, error: String(err) });
    }
  }

  /**
   * A seat's mailbox that exists and does not answer (its one member gone, or marked
   * offline) is left as it is: its mail is kept by the stream whatever becomes of the
   * consumer, and whoever holds the seat makes it again on a live member (reviveMailbox).
   * A boot walk failing on it would stop every node while one member is away.
   */
  private unanswered(subject: string, group: string): void {
    this.log.debug("queue_mailbox_unanswered", { subject, group });
  }

  /** Deletes the consumer and, on a mail stream, the subject's mail (limits retention keeps it otherwise). */
  async deleteMailbox(subject: string, group: string): Promise<void> {
    const stream = mustStream(subject);
    const jsm = await this.jsm();
    try {
      await jsm.consumers.delete(stream, durableName(group));
    } catch (err) {
      if (apiErrorCode(err) !== CONSUMER_NOT_FOUND) throw err;
    }
    this.trim.forget(stream, durableName(group));
    if (isMailStream(stream)) await jsm.streams.purge(stream, { filter: subject });
  }

  /**
   * Makes a seat's mailbox again on a live member, from the first message stored: nothing
   * unsettled is lost, and the ledger skips settled mail not yet trimmed. Only the seat's
   * holder calls it (deliveries are screened by epoch); one revival per mailbox at a time.
   */
  reviveMailbox(subject: string, group: string, reason: string, wanted: () => boolean = () => true): Promise<void> {
    const key = `${subject}\u0000${group}`;
    const running = this.reviving.get(key);
    if (running) return running;
    const p = this.revive(subject, group, reason, wanted).finally(() => this.reviving.delete(key));
    this.reviving.set(key, p);
    return p;
  }

  /** `wanted` is asked before each delete and the create: a holder that detached meanwhile
   * (its lease lapsed: the seat may be another node's by now) leaves the mailbox alone. */
  private async revive(subject: string, group: string, reason: string, wanted: () => boolean): Promise<void> {
    const stream = mustStream(subject);
    const durable = durableName(group);
    const started = this.clock.now();
    // The delete's answer may never come (the meta leader answers it only for a member it
    // knows is offline), so it is not waited for; its effect is read: once applied, the meta
    // leader answers an INFO "not found" at once, while before it the INFO goes unanswered.
    // It is sent again each round: one sent while the meta leader died with the member (its
    // election takes seconds) was never proposed. A delete of a deleted consumer is a no-op.
    const poll = await this.nc.jetstreamManager({ checkAPI: false, timeout: REVIVE_POLL_TIMEOUT_MS });
    const deadline = started + REVIVE_GONE_WITHIN_MS;
    for (;;) {
      if (!wanted()) return;
      await poll.consumers.delete(stream, durable).catch(() => undefined);
      const gone = await poll.consumers.info(stream, durable).then(
        () => false,
        (err) => apiErrorCode(err) === CONSUMER_NOT_FOUND,
      );
      if (gone) break;
      if (this.clock.now() >= deadline) throw new Error(`queue: reviving mailbox ${group} on ${subject}: its consumer was not gone within ${REVIVE_GONE_WITHIN_MS / 1000} s`);
      await this.clock.sleep(LEADER_POLL_MS);
    }
    this.trim.forget(stream, durable);
    if (!wanted()) return;
    await (await this.jsm()).consumers.add(stream, this.consumerConfig(subject, group));
    this.log.warn("queue_mailbox_revived", { subject, group, reason, elapsed_ms: this.clock.now() - started });
  }

  private async ringAfterReconnects(): Promise<void> {
    for await (const s of this.nc.status()) if (s.type === "reconnect") for (const source of this.sources) source.reconnected();
  }

  /**
   * A mailbox can be made on another member: a cluster's, or a leaf's (its own replica count
   * says nothing of the members' streams, and a mailbox's settings do not depend on it, so
   * what a leaf makes is what a member would). On one box there is no other member: a
   * mailbox that does not answer is its broker restarting, and comes back with it.
   */
  private mayRevive(): boolean {
    return this.replicas > 1 || !this.decidesStreams;
  }

  /**
   * A seat mailbox whose consumer does not answer (its one member gone) is made again; an
   * interest stream's consumer has peers to elect a leader. "missing" also means "not one
   * this checks": ensureMailbox decides those.
   */
  async reviveIfUnanswered(subject: string, group: string, reason = "unanswered at attach", wanted: () => boolean = () => true): Promise<"answered" | "missing" | "revived"> {
    const stream = mustStream(subject);
    if (!isMailStream(stream) || !this.mayRevive()) return "missing";
    const jsm = await this.nc.jetstreamManager({ checkAPI: false, timeout: REVIVE_CALL_TIMEOUT_MS });
    // Not found is an answer too (ensureMailbox makes it); "consumer is offline" (the meta
    // leader's word once it knows the member is gone) and silence are not.
    const answer = await jsm.consumers.info(stream, durableName(group)).then(
      (info) => (info.config.filter_subject === subject ? "answered" : "missing"),
      (err) => (apiErrorCode(err) === CONSUMER_NOT_FOUND ? "missing" : null),
    );
    if (answer) return answer;
    await this.reviveMailbox(subject, group, reason, wanted);
    return "revived";
  }

  /**
   * Every mailbox, from each mail shard's consumer LIST one page (256) at a time. Strict: a
   * consumer the cluster could not describe in time (the page's `missing`, e.g. one whose
   * leader is being elected) fails the call rather than being left out of the answer.
   */
  async listMailboxes(): Promise<MailboxRef[]> {
    const out: MailboxRef[] = [];
    for (const stream of AGENT_STREAMS) {
      for (const c of await this.listConsumers(stream)) {
        const group = groupOfDurable(c.name);
        if (group === null) continue;
        // The name alone is ambiguous (see parseMailbox), so the filter decides.
        const ref = parseMailbox(c.filter_subject, group);
        if (ref) out.push(ref);
      }
    }
    return out;
  }

  /** One stream's consumers (durable name and filter), every page; strict as listMailboxes. */
  async listConsumers(stream: string): Promise<{ name: string; filter_subject: string }[]> {
    const out: { name: string; filter_subject: string }[] = [];
    let seen = 0;
    for (let page = 0; page < LIST_PAGES_MAX; page++) {
      const reply = await this.nc.request(`$JS.API.CONSUMER.LIST.${stream}`, JSON.stringify({ offset: seen }), { timeout: 10_000 });
      const body: unknown = JSON.parse(new TextDecoder().decode(reply.data));
      const apiError = (body as { error?: { code: number; err_code?: number; description: string } }).error;
      if (apiError) throw new Error(`queue: consumers of ${stream}: ${apiError.description} (${apiError.err_code ?? apiError.code})`);
      const parsed = ListPage.safeParse(body);
      if (!parsed.success) throw new Error(`queue: consumers of ${stream}: field ${String(parsed.error.issues[0]?.path.join("."))}: ${parsed.error.issues[0]?.message}`);
      const { consumers, missing, total } = parsed.data;
      if (missing && missing.length > 0) throw new Error(`queue: consumers of ${stream}: the cluster did not describe ${missing.length} in time (${missing.slice(0, 5).join(", ")}); ask again`);
      const got = consumers ?? [];
      seen += got.length;
      for (const c of got) out.push({ name: c.name, filter_subject: c.config.filter_subject ?? "" });
      if (got.length === 0 || seen >= total) return out;
    }
    throw new Error(`queue: consumers of ${stream}: more than ${LIST_PAGES_MAX} pages`);
  }

  attach(subject: string, group: string, handler: Handler, opts: AttachOptions = {}): Promise<Attachment> {
    return this.attachRunner(subject, group, { kind: "each", handler }, opts);
  }

  attachBatch(subject: string, group: string, handler: BatchHandler, opts: BatchAttachOptions): Promise<Attachment> {
    return this.attachRunner(subject, group, { kind: "drain", handler }, opts);
  }

  private async attachRunner(subject: string, group: string, runner: Runner, opts: CoreOptions): Promise<Attachment> {
    // Attaching creates the mailbox if it is missing: the seat's owner must never consume
    // from nothing (idempotent and cheap when it exists).
    // A mailbox found answering on its subject needs no ensure (its INFO was the same read).
    if ((await this.reviveIfUnanswered(subject, group)) === "missing") await this.ensureMailbox(subject, group);
    const log = this.log.child({ subject, group });
    const stream = mustStream(subject);
    let retired = false;
    // A pull sent before the mailbox was made again waits on the old consumer, silent until
    // its expiry: it is given up at once, so the next pull asks the new one.
    const revived = (revival: Promise<boolean>) => {
      revival.then(
        (made) => made && source.abandonPullsBefore(this.clock.now()),
        (err: unknown) => log.warn("queue_mailbox_revive_failed", { error: (err as Error).message }),
      );
    };
    const hooks: SourceHooks = isMailStream(stream)
      ? {
          settled: (seq, replayable) => this.trim.settled(stream, durableName(group), subject, seq, replayable),
          unreachable: () => {
            if (retired || !this.mayRevive()) return;
            revived(this.reviveMailbox(subject, group, "pulls refused", () => !retired).then(() => true));
          },
          silent: () => {
            if (retired || !this.mayRevive()) return;
            revived(this.reviveIfUnanswered(subject, group, "pull and INFO unanswered", () => !retired).then((r) => r === "revived"));
          },
        }
      : { settled: () => undefined, unreachable: () => undefined, silent: () => undefined };
    const source = new JetStreamSource(this.nc, this.js, stream, group, this.clock, this.pulls, log, hooks, isMailStream(stream) ? subject : null);
    this.sources.add(source);
    const core: AttachmentCore = new AttachmentCore(source, runner, this.clock, log, { ...opts, pacing: this.pacing }, () => {
      this.attachments.delete(core);
      this.consumerOf.delete(core);
      retired = true;
      source.retire(() => this.sources.delete(source));
    });
    this.attachments.add(core);
    this.consumerOf.set(core, { stream: mustStream(subject), durable: durableName(group) });
    core.start();
    return core;
  }

  async publish(subject: string, data: Uint8Array, opts: PublishOptions = {}): Promise<PublishResult> {
    const ack = await this.js.publish(subject, data, { msgID: opts.msgId, headers: toNatsHeaders(opts.headers), timeout: 10_000 });
    return { seq: ack.seq, duplicate: ack.duplicate };
  }

  async deadLetters(): Promise<DeadLetter[]> {
    const jsm = await this.jsm();
    const info = await jsm.streams.info(STREAM_DLQ);
    const last = info.state.last_seq;
    const first = Math.max(info.state.first_seq, last - DEAD_LETTER_LIST_MAX + 1);
    const out: DeadLetter[] = [];
    if (info.state.messages === 0) return out;
    for (let seq = first; seq <= last; seq++) {
      try {
        const m = await jsm.streams.getMessage(STREAM_DLQ, { seq });
        out.push(parseDeadLetter(seq, m.subject, headerRecord(m.header), m.data));
      } catch (err) {
        if (!isMissingMessage(err)) throw err; // aged out or deleted: a gap
      }
    }
    return out;
  }

  async deadLetter(id: number): Promise<DeadLetter | null> {
    if (!Number.isSafeInteger(id) || id < 1) return null;
    const jsm = await this.jsm();
    try {
      const m = await jsm.streams.getMessage(STREAM_DLQ, { seq: id });
      return parseDeadLetter(id, m.subject, headerRecord(m.header), m.data);
    } catch (err) {
      if (isMissingMessage(err)) return null;
      throw err;
    }
  }

  replayDeadLetter(id: number): Promise<{ seq: number; duplicate: boolean } | null> {
    return replayDeadLetterVia(this, id);
  }

  async deleteDeadLetter(id: number): Promise<boolean> {
    if (!Number.isSafeInteger(id) || id < 1) return false;
    const jsm = await this.jsm();
    try {
      // Not erased: the slot is only marked deleted (an operator's act, not a secret).
      return await jsm.streams.deleteMessage(STREAM_DLQ, id, false);
    } catch (err) {
      if (isMissingMessage(err)) return false;
      throw err;
    }
  }

  async scatter(subject: string, data: Uint8Array, opts: ScatterOptions): Promise<Answer[]> {
    const answers: Answer[] = [];
    if (opts.responders <= 0) return answers;
    const inbox = createInbox();
    return new Promise<Answer[]>((resolve) => {
      let timer: Timer | null = null;
      const finish = () => {
        timer?.cancel();
        sub.unsubscribe();
        resolve(answers);
      };
      const sub = this.nc.subscribe(inbox, {
        max: opts.responders,
        callback: (err, msg) => {
          if (err) return finish();
          const status = statusOf(msg);
          if (status === 503) return finish(); // nobody serves the subject: no answer will come
          if (status !== 0) return;
          answers.push({ data: msg.data, headers: headerRecord(msg.headers) });
          if (answers.length >= opts.responders) finish();
        },
      });
      timer = this.clock.setTimeout(finish, opts.budget_ms);
      this.nc.publish(subject, data, { reply: inbox, headers: toNatsHeaders(opts.headers) });
    });
  }

  async serve(subject: string, responder: Responder, queueGroup?: string): Promise<{ stop(): void }> {
    const sub = this.nc.subscribe(subject, {
      queue: queueGroup,
      callback: (err, msg) => {
        if (err) {
          this.log.warn("queue_serve_failed", { subject, error: err });
          return;
        }
        if (!msg.reply) return;
        responder({ data: msg.data, headers: headerRecord(msg.headers) }).then(
          (answer) => {
            if (answer !== null) msg.respond(answer);
          },
          (error) => this.log.warn("queue_serve_failed", { subject, error }),
        );
      },
    });
    this.serving.add(sub);
    // The subscription must reach the server before a caller announces it is serving.
    await this.nc.flush();
    return {
      stop: () => {
        this.serving.delete(sub);
        sub.unsubscribe();
      },
    };
  }

  /**
   * A mailbox's state as its broker reports it, for the deaf-seat watch (seat/mailbox-watch.ts):
   * the consumer's counters and pointers, and the first message stored for its subject
   * above its ack floor (a stream read by subject from that sequence; none → null).
   */
  async inspectMailbox(subject: string, group: string): Promise<MailboxSnapshot> {
    const stream = mustStream(subject);
    const jsm = await this.jsm();
    const info = await jsm.consumers.info(stream, durableName(group));
    const ack_floor_seq = info.ack_floor.stream_seq;
    const reply = await this.nc.request(`$JS.API.STREAM.MSG.GET.${stream}`, JSON.stringify({ seq: ack_floor_seq + 1, next_by_subj: subject }), { timeout: 10_000 });
    const body = MsgGetReply.parse(JSON.parse(new TextDecoder().decode(reply.data)));
    if (body.error && body.error.err_code !== NO_MESSAGE_FOUND) throw new Error(`queue: reading ${subject} above ${ack_floor_seq}: ${body.error.description}`);
    return {
      num_pending: info.num_pending,
      num_ack_pending: info.num_ack_pending,
      delivered_seq: info.delivered.stream_seq,
      ack_floor_seq,
      first_unacked_seq: body.message?.seq ?? null,
    };
  }

  /**
   * Resets a mailbox's consumer to its ack floor (nats-server ≥ 2.14, $JS.API.CONSUMER.RESET,
   * an empty request): everything not acknowledged is delivered again (the contract's
   * resetMailbox). False when this broker does not know the call.
   */
  resetMailbox(subject: string, group: string): Promise<boolean> {
    return resetConsumer(this.nc, mustStream(subject), durableName(group), {}, `resetting mailbox ${group} on ${subject}`);
  }

  /**
   * The contract's rewindMailbox (the deaf-seat heal). A floor past the stream's end is as
   * broken as such a pointer, so then the rewind starts at the subject's first message; with
   * nothing stored, just past the last sequence, read first so a concurrent publish lands
   * at or above it.
   */
  async rewindMailbox(subject: string, group: string): Promise<boolean> {
    const stream = mustStream(subject);
    const jsm = await this.jsm();
    const floor = await jsm.consumers.info(stream, durableName(group)).then(
      (info) => info.ack_floor.stream_seq,
      (err) => {
        if (apiErrorCode(err) === CONSUMER_NOT_FOUND) throw new Error(`queue: rewinding mailbox ${group} on ${subject}: no such mailbox`);
        throw err;
      },
    );
    const last = (await jsm.streams.info(stream)).state.last_seq;
    const from = floor <= last ? floor + 1 : 1;
    const reply = await this.nc.request(`$JS.API.STREAM.MSG.GET.${stream}`, JSON.stringify({ seq: from, next_by_subj: subject }), { timeout: 10_000 });
    const body = MsgGetReply.parse(JSON.parse(new TextDecoder().decode(reply.data)));
    if (body.error && body.error.err_code !== NO_MESSAGE_FOUND) throw new Error(`queue: reading ${subject} from ${from}: ${body.error.description}`);
    const seq = body.message?.seq ?? last + 1;
    return resetConsumer(this.nc, stream, durableName(group), { seq }, `rewinding mailbox ${group} on ${subject} to ${seq}`);
  }

  /**
   * Before a cluster member leaves gracefully: every attached mailbox whose consumer leader
   * is this member (`serverName`, its sidecar's server_name) is stepped down, and each waits
   * (bounded, LEADER_HANDOFF_WITHIN_MS) until a peer leads it. Call it BEFORE the attachments
   * hand mail back. nats-server keeps a NAK's redelivery in the leader's memory only: a
   * NAK processed here and then this member's shutdown leaves the message delivered-and-
   * pending on the next leader, redelivered only after the 30-minute ack wait (reproduced on
   * 2.9.10 and again on 2.15.2 with a 3-member cluster: test/queue/leader-handoff.test.ts). After the handoff the NAKs land on a leader that
   * survives. Pulls waiting at the old leader are dropped by the change; they end at their
   * expiry here as any lost pull does. Returns how many consumers were handed off.
   */
  async handOffLeaderships(serverName: string): Promise<{ handedOff: number; stillHere: string[] }> {
    if (this.replicas === 1) return { handedOff: 0, stillHere: [] }; // no peer to lead
    const jsm = await this.nc.jetstreamManager({ checkAPI: false, timeout: LEADER_POLL_TIMEOUT_MS });
    const seen = new Set<string>();
    const consumers = [...this.consumerOf.values()].filter((c) => {
      // A mailbox's consumer is of one replica: no peer could lead it. Its NAKs are kept in
      // its file state across its member's restart (the delay-0 NAK, rawMessage).
      if (isMailStream(c.stream)) return false;
      const key = `${c.stream}.${c.durable}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
    const leaderOf = async (c: { stream: string; durable: string }): Promise<string | null> => {
      const info = await jsm.consumers.info(c.stream, c.durable).catch(() => null);
      return info?.cluster?.leader ?? null;
    };
    let handedOff = 0;
    const stillHere: string[] = [];
    const handOff = async (c: { stream: string; durable: string }): Promise<void> => {
      if ((await leaderOf(c)) !== serverName) return;
      try {
        await this.nc.request(`$JS.API.CONSUMER.LEADER.STEPDOWN.${c.stream}.${c.durable}`, "", { timeout: LEADER_HANDOFF_WITHIN_MS });
      } catch (err) {
        this.log.warn("queue_leader_stepdown_failed", { stream: c.stream, consumer: c.durable, error: String(err) });
      }
      // The stepdown answers before a peer is elected; a NAK sent in between has no leader.
      const deadline = this.clock.now() + LEADER_HANDOFF_WITHIN_MS;
      while (this.clock.now() < deadline) {
        const leader = await leaderOf(c);
        if (leader && leader !== serverName) {
          handedOff += 1;
          return;
        }
        await this.clock.sleep(LEADER_POLL_MS);
      }
      stillHere.push(`${c.stream}.${c.durable}`);
    };
    for (let i = 0; i < consumers.length; i += LIST_INFO_CONCURRENCY) {
      await Promise.all(consumers.slice(i, i + LIST_INFO_CONCURRENCY).map(handOff));
    }
    if (stillHere.length > 0) this.log.warn("queue_leaders_not_handed_off", { consumers: stillHere, within_ms: LEADER_HANDOFF_WITHIN_MS });
    return { handedOff, stillHere };
  }

  /**
   * Detaches everything, then waits for every pull still out to end (bounded by a pull's
   * expiry plus PULL_LOST_AFTER_MS) before the caller closes the connection. A pull cannot
   * be withdrawn (no nats-server has a pull cancel, 2.15.2 included): one still waiting
   * when the connection goes may take the next message to a subscriber that no longer
   * exists (the server skips an asker it already knows is gone, not one whose going is
   * still in flight), and that message would sit
   * ack-pending for the 30-minute ack wait instead of going to the seat's next owner. While
   * we wait, whatever such a pull brings is handed back at once.
   */
  async close(): Promise<void> {
    for (const a of [...this.attachments]) await a.detach();
    for (const s of this.serving) s.unsubscribe();
    this.serving.clear();
    await this.pulls.idle();
    await this.trim.stop();
    for (const s of this.sources) s.close();
    this.sources.clear();
  }

  /** Pulls still out at the broker (for tests and the shutdown log). */
  get pullsOut(): number {
    return this.pulls.count;
  }
}

/** Counts pulls that are out at the broker and lets a caller wait until none are. */
class PullTracker {
  count = 0;
  private waiters: (() => void)[] = [];
  started(): void {
    this.count += 1;
  }
  ended(): void {
    this.count = Math.max(0, this.count - 1);
    if (this.count === 0) for (const w of this.waiters.splice(0)) w();
  }
  idle(): Promise<void> {
    return this.count === 0 ? Promise.resolve() : new Promise((r) => this.waiters.push(r));
  }
}

/**
 * One consumer reset ($JS.API.CONSUMER.RESET, nats-server ≥ 2.14): to its ack floor with an
 * empty request, or to `seq`. The call is answered by the consumer's leader on its own
 * subscription; the JetStream API's catch-all subscription also hears it and stays silent,
 * so a consumer that is not there shows as a request that times out (measured on 2.15.2,
 * R1 and R3, by the conformance case "reset and rewind of a mailbox that does not exist are
 * errors"), not as "no responders". A broker older than 2.14 should look the same (not
 * measured: none is shipped or kept). The consumer INFO then tells which: missing → throws
 * "no such mailbox", as the contract says; present → the timeout is thrown (a leader that
 * did not answer, or an old broker), or false after "no responders" (nothing serves the
 * call). `doing` names the call in its errors.
 */
export async function resetConsumer(nc: NatsConnection, stream: string, durable: string, request: { seq?: number }, doing: string): Promise<boolean> {
  let reply: Msg;
  try {
    reply = await nc.request(`$JS.API.CONSUMER.RESET.${stream}.${durable}`, JSON.stringify(request), { timeout: CONSUMER_RESET_TIMEOUT_MS });
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code !== NO_RESPONDERS && code !== REQUEST_TIMEOUT) throw err;
    const jsm = await nc.jetstreamManager({ checkAPI: false });
    await jsm.consumers.info(stream, durable).catch((infoErr) => {
      if (apiErrorCode(infoErr) === CONSUMER_NOT_FOUND) throw new Error(`queue: ${doing}: no such mailbox`);
      throw infoErr;
    });
    if (code === REQUEST_TIMEOUT) throw new Error(`queue: ${doing}: not answered within ${CONSUMER_RESET_TIMEOUT_MS / 1000} s`);
    return false;
  }
  const answer = z.object({ error: z.object({ code: z.number(), description: z.string() }).optional() }).parse(JSON.parse(new TextDecoder().decode(reply.data)));
  if (answer.error) throw new Error(`queue: ${doing}: ${answer.error.description} (${answer.error.code})`);
  return true;
}

/** JetStream API errors: a consumer whose member the meta leader knows is gone. */
const CONSUMER_OFFLINE = [10119, 10195];
/** The consumer exists but its member does not answer for it: offline, silent, or no responders. */
function isUnanswered(err: unknown): boolean {
  const code = apiErrorCode(err);
  if (code !== undefined) return CONSUMER_OFFLINE.includes(code);
  return /TIMEOUT|\b503\b|no responders|consumer is offline/i.test(String((err as { code?: string })?.code ?? "") + " " + String(err));
}

/** A seat mail stream: limits-retained, its mailboxes of one replica and trimmed by their readers. */
function isMailStream(stream: string): boolean {
  return AGENT_STREAMS.includes(stream);
}

function mustStream(subject: string): string {
  const stream = streamForSubject(subject);
  if (!stream) throw new Error(`queue: no stream captures subject ${JSON.stringify(subject)}`);
  return stream;
}

// ---- one mailbox's pulls ----------------------------------------------------------------

/** What a mailbox's pulls and settlements tell its queue (attachRunner). */
interface SourceHooks {
  /** An ack or term of stream sequence `seq` was confirmed: the mailbox's read mail can be trimmed (lazily, when only `replayable` mail was settled: trim.ts). */
  settled(seq: number, replayable: boolean): void;
  /** REVIVE_AFTER_UNREACHABLE_PULLS pulls in a row were refused: nobody serves the consumer. */
  unreachable(): void;
  /** A pull went unanswered past its expiry: the consumer's member may be cut off. */
  silent(): void;
}

class JetStreamSource implements MailboxSource {
  private readonly durable: string;
  private readonly nextSubject: string;
  private readonly inboxes: PullInboxes;
  readonly doorbell?: (ring: () => void) => () => void;
  private ring: (() => void) | null = null;
  /** Pulls in a row refused with "no responders" (503). */
  private unserved = 0;
  /** The open pull: when it was sent, and how to end it. */
  private open: { sent_at: number; finish: (error?: unknown) => void } | null = null;

  constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly stream: string,
    private readonly group: string,
    private readonly clock: Clock,
    private readonly pulls: PullTracker,
    private readonly log: Logger,
    private readonly hooks: SourceHooks,
    /** A seat mailbox's subject: each publish on it reaches a core subscription too, the doorbell. */
    bellSubject: string | null,
  ) {
    if (bellSubject !== null) {
      this.doorbell = (ring) => {
        const sub = nc.subscribe(bellSubject, { callback: () => ring() });
        this.ring = ring;
        return () => {
          this.ring = null;
          sub.unsubscribe();
        };
      };
    }
    this.durable = durableName(group);
    this.nextSubject = `$JS.API.CONSUMER.MSG.NEXT.${stream}.${this.durable}`;
    this.inboxes = new PullInboxes(nc, clock, (msg) => void this.handBackStray(msg));
  }

  /** The connection came back: what was published while it was away rang nobody. */
  reconnected(): void {
    this.ring?.();
  }

  /** Ends the open pull if it was sent before `at` (its consumer has since been made again). */
  abandonPullsBefore(at: number): void {
    if (this.open && this.open.sent_at <= at) this.open.finish(new Error("its mailbox was made again; asking the new one"));
  }

  /** The attachment is gone: its subscription goes once its last pull is over. */
  retire(onClosed: () => void): void {
    this.inboxes.retire(onClosed);
  }

  close(): void {
    this.inboxes.close();
  }

  /**
   * A delivery that came after its pull ended and with no other pull open (see
   * pull-inboxes.ts): no attachment will run it, so it is handed back now, as an
   * attachment hands back what it may not run, rather than left for the ack wait.
   */
  private async handBackStray(msg: Msg): Promise<void> {
    try {
      const m = this.rawMessage(msg);
      this.log.info("queue_late_delivery_handed_back", { seq: m.delivery.streamSeq, delivery_count: m.delivery.deliveryCount });
      await settleDelivery(this, m, "handback", "delivered after its pull ended", this.log);
    } catch (error) {
      this.log.error("queue_late_delivery_unsettled", { reply: msg.reply, error });
    }
  }

  /**
   * One pull on its own subject of this attachment's pull inboxes (pull-inboxes.ts). It is
   * over when the broker ended it (408 expired, a refusal), it delivered its batch, or its
   * expiry plus PULL_LOST_AFTER_MS passed; never earlier, since nats-server cannot withdraw
   * a waiting pull (2.15.2 neither) and a second request would queue behind it. A delivery
   * the broker still sends afterwards goes to the pull then open, or to handBackStray —
   * never to this pull's sink.
   */
  pull(batch: number, sink: PullSink, mode: PullMode): void {
    let done = false;
    let timer: Timer | null = null;
    let inbox: PullInbox | null = null;
    let received = 0;
    const finish = (error?: unknown) => {
      if (done) return;
      done = true;
      if (this.open?.finish === finish) this.open = null;
      timer?.cancel();
      inbox?.close();
      this.pulls.ended();
      sink.end(error);
    };
    this.pulls.started();
    this.open = { sent_at: this.clock.now(), finish };
    try {
      inbox = this.inboxes.openInbox((err, msg) => {
        if (err || !msg) return finish(err ?? new Error("pull inbox closed"));
        const status = statusOf(msg);
        if (status === 100) return; // idle heartbeat
        if (status === 503) this.noteUnserved();
        else this.unserved = 0;
        if (status === 408 || status === 404) return finish(); // expired: ask again
        if (status !== 0) return finish(new Error(`pull refused: ${status} ${msg.headers?.description ?? ""}`.trim()));
        received += 1;
        let raw: RawMessage;
        try {
          raw = this.rawMessage(msg);
        } catch (error) {
          return finish(error);
        }
        sink.message(raw);
        if (received >= batch) finish();
      });
      timer = this.clock.setTimeout(() => {
        this.unserved = 0;
        this.hooks.silent();
        finish(new Error("pull went unanswered past its expiry"));
      }, PULL_EXPIRES_MS + PULL_LOST_AFTER_MS);
      // A drain is no_wait WITH an expiry: nats-server then waits for the first message up
      // to the expiry, delivers what else is waiting up to the batch, and ends the pull at
      // once with a 408 (measured on 2.9.10, on one member and in a 3-member cluster, and
      // held by the drain conformance cases on 2.15.2; with
      // nothing waiting it ends at the expiry, 408). Without no_wait the pull would hold out
      // for the whole batch; no_wait without an expiry would answer 404 at once when idle.
      const request = { batch, expires: PULL_EXPIRES_MS * NS_PER_MS, no_wait: mode === "drain" };
      this.nc.publish(this.nextSubject, JSON.stringify(request), { reply: inbox.subject });
    } catch (error) {
      // A closed connection throws synchronously; the attachment's retry path handles it.
      queueMicrotask(() => finish(error));
    }
  }

  private noteUnserved(): void {
    this.unserved += 1;
    if (this.unserved < REVIVE_AFTER_UNREACHABLE_PULLS) return;
    this.unserved = 0;
    this.hooks.unreachable();
  }

  private rawMessage(msg: Msg): RawMessage {
    const reply = msg.reply ?? "";
    const info = parseAckSubject(reply);
    const headers = headerRecord(msg.headers);
    const delivery: Delivery = {
      subject: msg.subject,
      data: msg.data,
      headers,
      msgId: headers[H_MSG_ID],
      deliveryCount: info.deliveryCount,
      streamSeq: info.streamSeq,
    };
    // Every settlement is confirmed by the consumer's leader (see confirmed()).
    // A delayed NAK is `-NAK {"delay": ns}`: the server rewrites the delivery's stored
    // timestamp, which is persisted and replicated, and redelivers once it is due. A NAK
    // for "at once" is sent as that with delay 0 AND a bare `-NAK`: the bare one puts the
    // message first in line (before new mail, as the contract says), but only in the
    // leader's memory; the delay-0 one makes the hand-back survive a restart of the broker
    // or a leader change — without it, a drained single box whose sidecar stopped right
    // after left the message ack-pending for the 30-minute ack wait (measured, 2.15.2).
    //
    // Neither NAK names a delivery (2.15.2's processNak checks only that the stream
    // sequence is still pending), so one landing after the other's redelivery hands back
    // the NEW delivery while it runs, and the message runs twice (seen in CI: the bare NAK,
    // sent once the delay-0 one was confirmed, met the redelivery of the server's pending
    // timer, which fires 10 ms after a delayed NAK). So the bare one is written right behind
    // the delay-0 one, before its confirmation: the leader takes both from one connection in
    // order on its ack queue, and the bare NAK's redelivery restamps the delivery before the
    // timer looks. Only the delay-0 one is confirmed (a retried bare NAK could hand back a
    // later delivery); a lost bare one costs the order, not the message.
    const delayed = (ms: number) => `-NAK ${JSON.stringify({ delay: Math.round(ms) * NS_PER_MS })}`;
    const nak = async (delay_ms?: number) => {
      if (delay_ms !== undefined && delay_ms > 0) return this.confirmed(reply, delayed(delay_ms));
      const durable = this.confirmed(reply, delayed(0)); // its first request is written now
      this.nc.publish(reply, "-NAK");
      await durable;
    };
    const settle = (body: string) => async () => {
      await this.confirmed(reply, body);
      this.hooks.settled(info.streamSeq, isReplayable(headers));
    };
    return { delivery, ack: settle("+ACK"), nak, term: settle("+TERM") };
  }

  /** Sends a settlement until the consumer's leader confirms it (SETTLE_CONFIRM_WITHIN_MS). */
  private async confirmed(reply: string, body: string): Promise<void> {
    const started = this.clock.now();
    for (let attempt = 1; ; attempt++) {
      const left_ms = SETTLE_CONFIRM_WITHIN_MS - (this.clock.now() - started);
      try {
        await this.nc.request(reply, body, { timeout: Math.max(1, Math.min(ACK_CONFIRM_ATTEMPT_MS, left_ms)) });
        return;
      } catch (err) {
        if (this.nc.isClosed() || this.clock.now() - started + ACK_CONFIRM_RETRY_MS >= SETTLE_CONFIRM_WITHIN_MS) {
          throw new Error(`${body} not confirmed by the consumer's leader after ${attempt} attempt(s): ${(err as Error).message}`);
        }
        await this.clock.sleep(ACK_CONFIRM_RETRY_MS);
      }
    }
  }

  async deadLetter(m: RawMessage, reason: string): Promise<void> {
    const copy = deadLetterCopy(this.stream, m.delivery, this.group, reason);
    await this.js.publish(copy.subject, m.delivery.data, { msgID: copy.msgId, headers: toNatsHeaders(copy.headers), timeout: 10_000 });
  }
}

/** The settings this build gives a mailbox, where an older build may have given others. */
const MAILBOX_SETTINGS = ["ack_policy", "deliver_policy", "ack_wait", "max_deliver", "max_ack_pending", "max_waiting", "max_batch", "num_replicas", "mem_storage"] as const;

/**
 * The names of the settings a found mailbox does not share with the one this build would
 * make. The server leaves out of its answer a boolean that is false and a number it was
 * never given, so both sides are read that way.
 */
export function mailboxSettingsDiffer(want: Partial<ConsumerConfig>, found: Partial<ConsumerConfig>): string[] {
  const norm = (v: unknown) => (v === false || v === 0 ? undefined : v);
  return MAILBOX_SETTINGS.filter((k) => norm(want[k]) !== norm(found[k]));
}
