// The queue contract (ARCHITECTURE.md § Contracts; spec: "The unowned seat", "Deferring a
// delivery", "Where the constants come from"). Two backends implement it: jetstream.ts on
// the node's one NATS connection and memory.ts in-process. test/conformance/queue.ts
// holds both to the same behaviour.

/** Ack wait: a delivery nobody settles comes back after this long (a dead node's batch). */
export const ACK_WAIT_MS = 30 * 60 * 1000;
/** Delivery budget: sized for handoffs (one NAK each) as well as failures; then the DLQ. */
export const MAX_DELIVERIES = 25;

export type Outcome =
  | { kind: "ack" }
  | { kind: "nak"; delay_ms?: number }
  | { kind: "defer"; reason: string }
  | { kind: "reject"; reason: string };

export const ack = (): Outcome => ({ kind: "ack" });
/**
 * Ask for the message back and keep consuming. Counts one delivery. With `delay_ms`, the
 * broker holds it back that long first (a failed turn's backoff); without, it may come
 * back at once (a hand-back to a successor).
 */
export const nak = (delay_ms?: number): Outcome => (delay_ms !== undefined && delay_ms > 0 ? { kind: "nak", delay_ms } : { kind: "nak" });
/** Settle it now: copied to the dead-letter stream with `reason` and terminated (a
 * failure no redelivery can fix). */
export const reject = (reason: string): Outcome => ({ kind: "reject", reason });
/** The longest delay a NAK may ask for: past it, a message is not being retried, it is lost
 * in plain sight (the ack wait is the broker's own bound on an unsettled message). */
export const NAK_DELAY_MAX_MS = ACK_WAIT_MS;
/** NAK at once AND quiesce this attachment; resuming is the caller's call. */
export const defer = (reason: string): Outcome => ({ kind: "defer", reason });

export interface Delivery {
  subject: string;
  data: Uint8Array;
  headers: Record<string, string>;
  /** The publisher's de-duplication id, when it gave one. */
  msgId: string | undefined;
  /** 1 on first delivery; every NAK, defer or lapsed ack wait adds one. */
  deliveryCount: number;
  streamSeq: number;
}

export type Handler = (delivery: Delivery) => Promise<Outcome>;

/**
 * A drain's handler: the deliveries one pull brought (what was waiting, oldest first), and
 * one outcome per delivery, in the same order. A defer anywhere quiesces the attachment
 * before any outcome is settled. An answer shorter than the drain hands the deliveries it
 * does not cover back unrun (one delivery each: a NAK); a handler that throws NAKs them all
 * and is logged. The dead-letter rule applies to each delivery on its own.
 */
export type BatchHandler = (deliveries: Delivery[]) => Promise<Outcome[]>;

/** Most messages one pull may take (a drain's worth); bounds what a handback can cost. */
export const MAX_BATCH = 64;

export interface AttachOptions {
  /** Holds taken before the first fetch, e.g. a paused seat's "pause" hold. */
  holds?: string[];
  /**
   * Messages taken per pull, 1..MAX_BATCH (default 1). A pull is only made when the
   * attachment is ready to run everything it takes; what a defer, quiesce or detach leaves
   * unrun is handed back at once (one delivery each).
   */
  batch?: number;
}

export interface BatchAttachOptions {
  /** Holds taken before the first fetch, as AttachOptions.holds. */
  holds?: string[];
  /**
   * Most deliveries one drain takes, 1..MAX_BATCH. A drain is what is waiting, not a wait
   * for this many: each pull waits at the broker for the first message, then takes what
   * else is already there (up to the bound) and ends; the handler runs once the pull is
   * over, with what it got. No pull is out while a drain runs.
   */
  batch: number;
}

export interface Attachment {
  /**
   * Stop running deliveries and make no new pull. A running handler is not interrupted.
   * The pull already out cannot be withdrawn (the broker has no pull cancel): what it still
   * brings is handed back at once, unrun (one delivery each, at most one batch), never kept
   * for the ack wait.
   */
  quiesce(): void;
  /** Run again, unless a named hold is in place; reuses a pull still out from before. */
  resume(): void;
  /** A named hold keeps the attachment quiesced until released, whatever resume() says. */
  hold(name: string): void;
  releaseHold(name: string): void;
  readonly holds: ReadonlySet<string>;
  readonly quiesced: boolean;
  /** Handlers running right now (0 or 1: one delivery, or one drain, at a time per attachment). */
  readonly inFlight: number;
  /**
   * Local clock, ms: until when a delivery this attachment NAK'd with a delay (a turn backing
   * off a failing provider) is held back at the broker on its behalf; 0 when none was. That
   * delivery counts as ack-pending meanwhile: this holder's own, not stranded elsewhere.
   */
  readonly backingOffUntil: number;
  /**
   * Stream sequences of the deliveries this attachment holds unsettled now: running, waiting
   * to run, or parked behind its pull. A delivery the mailbox counts ack-pending that is not
   * among them (and not a delayed NAK of its own) is held by someone else.
   */
  readonly holding: ReadonlySet<number>;
  /** Resolves when no handler is running (for a voluntary release's bounded wait). */
  idle(): Promise<void>;
  /**
   * Mail is waiting that rang nobody (the deaf-seat watch saw it pending): pull now rather
   * than at the next safety pull. Nothing changes while quiesced or a pull is out.
   */
  ring(): void;
  /**
   * Stop for good. Never waits for a running handler, never deletes the mailbox. As with
   * quiesce, what the last pull still brings is handed back at once.
   */
  detach(): Promise<void>;
}

export type MailboxKind = "inbox" | "control" | "reflect";

export interface MailboxRef {
  handle: string;
  kind: MailboxKind;
}

export interface PublishOptions {
  msgId?: string;
  headers?: Record<string, string>;
}

export interface PublishResult {
  seq: number;
  duplicate: boolean;
}

export interface DeadLetter {
  /** Its sequence in the dead-letter stream: how an operator names it. */
  id: number;
  subject: string;
  originalSubject: string;
  group: string;
  reason: string;
  headers: Record<string, string>;
  data: Uint8Array;
  deliveryCount: number;
}

export interface ScatterOptions {
  /** Stop collecting after this many answers. */
  responders: number;
  /** …or after this long, whichever comes first. */
  budget_ms: number;
  headers?: Record<string, string>;
}

export interface Answer {
  data: Uint8Array;
  headers: Record<string, string>;
}

export type Responder = (request: Answer) => Promise<Uint8Array | null>;

export interface Queue {
  /** Creates the streams the architecture names, idempotently. */
  ensureStreams(): Promise<void>;
  /**
   * Creates the durable consumer (mailbox) for subject under group; attaches nothing. A seat's
   * mail is kept whether or not its mailbox exists yet (limits retention), and a new mailbox
   * delivers what is stored for its subject; what a mailbox settles is removed soon after.
   */
  ensureMailbox(subject: string, group: string): Promise<void>;
  /** Deletes the mailbox and the mail stored for its subject: a mailbox made again starts empty. */
  deleteMailbox(subject: string, group: string): Promise<void>;
  /**
   * Resets a mailbox to its ack floor: every message it owes and has not had acknowledged
   * goes out again now, as a first delivery — what is ack-pending (a dead holder's turn),
   * waiting out a NAK's delay, or not yet delivered — oldest first; what was acknowledged
   * stays settled. The delivery counts start again at 1 (nats-server 2.14's consumer
   * reset clears them), so a reset also renews each message's dead-letter budget. A
   * delivery made before the reset and settled after it settles nothing while its message
   * waits to go out again; once it has gone out again, whether the old settlement lands is
   * not promised (the completion ledger absorbs a rerun). Pulls waiting at the mailbox stay
   * and get the mail. The deaf-seat heal and the inbox reclaim after a kill (node.ts). False when the backend
   * does not know the call (nats-server < 2.14); throws when there is no such mailbox.
   */
  resetMailbox(subject: string, group: string): Promise<boolean>;
  /**
   * As resetMailbox, but from the first message stored above the ack floor, whatever the
   * delivered pointer says: the heal for a pointer that stands beyond undelivered mail.
   * False when the backend does not know the call; throws when there is no such mailbox.
   */
  rewindMailbox(subject: string, group: string): Promise<boolean>;
  /** Mailboxes the broker holds whose names the mailbox grammar produces. */
  listMailboxes(): Promise<MailboxRef[]>;
  attach(subject: string, group: string, handler: Handler, opts?: AttachOptions): Promise<Attachment>;
  /** As attach, but the handler gets a drain: everything one pull brought, at once. */
  attachBatch(subject: string, group: string, handler: BatchHandler, opts: BatchAttachOptions): Promise<Attachment>;
  publish(subject: string, data: Uint8Array, opts?: PublishOptions): Promise<PublishResult>;
  /** The newest dead letters (at most DEAD_LETTER_LIST_MAX), oldest first. */
  deadLetters(): Promise<DeadLetter[]>;
  /** One dead letter by id, or null when there is none (aged out, deleted, never). */
  deadLetter(id: number): Promise<DeadLetter | null>;
  /**
   * Publishes a dead letter again to its mailbox's subject (see replayOf) and then removes
   * it from the dead-letter stream. Null when there is no such dead letter.
   */
  replayDeadLetter(id: number): Promise<{ seq: number; duplicate: boolean } | null>;
  /** Removes one dead letter; false when there was none. */
  deleteDeadLetter(id: number): Promise<boolean>;
  /** Sends one request; collects answers from up to `responders` within the budget. */
  scatter(subject: string, data: Uint8Array, opts: ScatterOptions): Promise<Answer[]>;
  /** Answers requests on subject (a null answer stays silent). */
  serve(subject: string, responder: Responder, queueGroup?: string): Promise<{ stop(): void }>;
  close(): Promise<void>;
}

/** A mailbox's state as its broker reports it (JetStreamQueue.inspectMailbox), for the
 * deaf-seat watch (seat/mailbox-watch.ts). */
export interface MailboxSnapshot {
  num_pending: number;
  num_ack_pending: number;
  /** Stream sequence of the last message delivered. */
  delivered_seq: number;
  /** Stream sequence below which everything is acknowledged. */
  ack_floor_seq: number;
  /** The first message stored for this mailbox's subject above its ack floor, or null when
   * the stream holds none. */
  first_unacked_seq: number | null;
}
