// Mail left in an earlier build's mail streams (LEGACY_MAIL_STREAMS): the one stream before
// the shards (LEGACY_AGENT_STREAM, `crewlet.agent.>`) and the interest-retained shards
// (INTEREST_SHARD_STREAMS, `crewlet.mail.NN.>`). A fleet upgraded from such a build may still
// hold messages there that no node of this build reads. Each pass moves what each legacy
// mailbox holds into the seat's mailbox of this build, then deletes the emptied legacy
// mailboxes and, last, each stream that has none left.
//
// Only once no older node is alive (no live presence or seat lease below this build's lease
// protocol, which each of these layout changes raised): until then an older node may still
// hold a seat and read its legacy mailbox, and taking its mail from under it would only delay
// it; and an older node's wake feed still publishes there, so a legacy mailbox deleted beside
// it would drop what it publishes next (interest retention). A node of this build claims
// nothing while an older lease is live (the protocol gate), so no seat is served from both
// layouts.
import type { Consumer, JetStreamManager, JsMsg, NatsConnection } from "nats";
import type { Clock, Timer } from "../clock.ts";
import type { Logger } from "../log.ts";
import { eachInFlight } from "../in-flight.ts";
import type { MailboxRef, Queue } from "./contract.ts";
import { isPublishControlHeader } from "./deadletter.ts";
import { resetConsumer } from "./jetstream.ts";
import { apiErrorCode, CONSUMER_NOT_FOUND, STREAM_NOT_FOUND } from "./streams.ts";
import { groupOfDurable, LEGACY_MAIL_STREAMS, mailbox, parseLegacyMailbox } from "./topics.ts";

/**
 * Between passes. A fleet that has no legacy stream pays one stream-names request a pass, so a
 * minute keeps that to one message per twelve sweeps; mail left behind by an upgrade waits at
 * most this long once the last older node is gone.
 */
export const LEGACY_PASS_MS = 60_000;
/** Legacy mailboxes forwarded at once: a one-off migration, kept well inside the broker's API queue. */
const LEGACY_MAILBOXES_IN_FLIGHT = 16;
/** Messages taken per fetch: a batch is forwarded (each publish confirmed) before its acks. */
const FETCH_BATCH = 64;
/** A fetch asks only for what the mailbox holds; one that finds less ends within this. */
const FETCH_EXPIRES_MS = 2_000;
/** Bounds one mailbox's forwarding in a pass, so one deep backlog cannot hold a pass forever. */
const FETCHES_PER_MAILBOX_MAX = 1_000;
/**
 * A failing mailbox or stream is that one: it is reported and the pass goes on to the others,
 * so one bad mailbox never keeps every other seat's mail where no node reads it. This many
 * failures in one pass, over all its streams, is the broker, not the mailboxes (a round of
 * every mailbox in flight failing): the pass ends there rather than walking thousands of
 * mailboxes into the same timeout.
 */
export const LEGACY_FAILURES_PER_PASS_MAX = LEGACY_MAILBOXES_IN_FLIGHT;

export interface LegacyMailOptions {
  nc: NatsConnection;
  queue: Queue;
  /** True while a live presence or seat lease is held below this build's protocol. */
  olderNodeAlive: () => Promise<boolean>;
  /** Pass cadence; LEGACY_PASS_MS unless a test shortens it. */
  every_ms?: number;
  clock: Clock;
  log: Logger;
}

/** What a pass did to one legacy stream. */
export interface LegacyStreamPass {
  stream: string;
  forwarded: number;
  mailboxes_deleted: number;
  stream_deleted: boolean;
  /** Mailboxes this pass could not finish, and why; the next pass tries them again. */
  failed: { mailbox: string; error: Error }[];
  /** The stream itself could not be read or deleted; the next pass tries again. */
  error: Error | null;
}

export interface LegacyPass {
  /** Each legacy stream there at the start of the pass, in LEGACY_MAIL_STREAMS order. */
  streams: LegacyStreamPass[];
  /** Nothing was done because an older node is alive. */
  waited: boolean;
  /** The pass ended at LEGACY_FAILURES_PER_PASS_MAX failures: the broker is failing. */
  gave_up: boolean;
}

interface LegacyBox {
  stream: string;
  name: string;
  ref: MailboxRef;
  /**
   * Messages not yet delivered plus those delivered and never settled. The latter (an older
   * node or a pass that died holding them) come back at the pass's reset (or after their
   * ack wait), but only to a fetch: counting them makes the pass fetch while any is out, or
   * they would stay in a mailbox nobody reads, and the mailbox and stream with them, for good.
   */
  unsettled: number;
  /** Of those, delivered and never settled. */
  ackPending: number;
}

/**
 * One pass over every legacy stream there is. A mailbox or stream that fails is in its
 * stream's `failed` or `error` and the others go on; at LEGACY_FAILURES_PER_PASS_MAX failures
 * the pass gives up, and says what it had moved. It throws only when the streams cannot be
 * listed or the leases cannot be read. The next pass tries again.
 */
export async function forwardLegacyMail(o: LegacyMailOptions): Promise<LegacyPass> {
  const jsm = await o.nc.jetstreamManager({ checkAPI: false });
  const streams = (await legacyStreamsThere(jsm)).map(untouched);
  const out: LegacyPass = { streams, waited: false, gave_up: false };
  if (streams.length === 0) return out;
  if (await o.olderNodeAlive()) {
    out.waited = true;
    return out;
  }
  const failures = () => failuresOf(streams).length;
  for (const s of streams) {
    if (failures() >= LEGACY_FAILURES_PER_PASS_MAX) break;
    await forwardStream(o, jsm, s, failures).catch((err: unknown) => {
      // Another member's pass deleted it first: done, not failed.
      if (apiErrorCode(err) !== STREAM_NOT_FOUND) s.error = err as Error;
    });
  }
  out.gave_up = failures() >= LEGACY_FAILURES_PER_PASS_MAX;
  return out;
}

/**
 * The legacy streams there, from one names request: the price of a pass where none is left,
 * which is every pass of a fleet that never ran an earlier build.
 */
async function legacyStreamsThere(jsm: JetStreamManager): Promise<string[]> {
  const there = new Set<string>();
  for await (const name of jsm.streams.names()) if (LEGACY_MAIL_STREAMS.includes(name)) there.add(name);
  return LEGACY_MAIL_STREAMS.filter((name) => there.has(name));
}

function untouched(stream: string): LegacyStreamPass {
  return { stream, forwarded: 0, mailboxes_deleted: 0, stream_deleted: false, failed: [], error: null };
}

/** Every failure of a pass so far, streams and mailboxes, in stream order. */
function failuresOf(streams: LegacyStreamPass[]): { stream: string; mailbox?: string; error: Error }[] {
  return streams.flatMap((s) => [...(s.error ? [{ stream: s.stream, error: s.error }] : []), ...s.failed.map((f) => ({ stream: s.stream, ...f }))]);
}

/**
 * One stream's mailboxes, then the stream once it has none left. Stops early once the pass
 * has failed LEGACY_FAILURES_PER_PASS_MAX times (`failures`, over every stream so far).
 */
async function forwardStream(o: LegacyMailOptions, jsm: JetStreamManager, out: LegacyStreamPass, failures: () => number): Promise<void> {
  const boxes = await legacyBoxes(jsm, out.stream);
  await eachInFlight(boxes, LEGACY_MAILBOXES_IN_FLIGHT, async (box) => {
    if (failures() >= LEGACY_FAILURES_PER_PASS_MAX) return;
    try {
      // Counted as each message is moved, so a mailbox that fails halfway still counts what it moved.
      if (await forwardMailbox(o, box, () => (out.forwarded += 1))) out.mailboxes_deleted += 1;
    } catch (err) {
      // Another member's pass emptied and deleted it first: done, not failed.
      if (apiErrorCode(err) === CONSUMER_NOT_FOUND) return;
      out.failed.push({ mailbox: box.name, error: err as Error });
    }
  });
  if (failures() >= LEGACY_FAILURES_PER_PASS_MAX) return;
  const after = await jsm.streams.info(out.stream);
  if (after.state.consumer_count > 0) return;
  await jsm.streams.delete(out.stream);
  out.stream_deleted = true;
}

/** The stream's consumers that are seat mailboxes of an earlier build. */
async function legacyBoxes(jsm: JetStreamManager, stream: string): Promise<LegacyBox[]> {
  const boxes: LegacyBox[] = [];
  for await (const c of jsm.consumers.list(stream)) {
    const group = groupOfDurable(c.name);
    const ref = group === null ? null : parseLegacyMailbox(c.config.filter_subject ?? "", group);
    // Somebody else's consumer is theirs to delete.
    if (ref) boxes.push({ stream, name: c.name, ref, unsettled: c.num_pending + c.num_ack_pending, ackPending: c.num_ack_pending });
  }
  return boxes;
}

/**
 * One legacy mailbox: its mail into the seat's mailbox of this build, then the mailbox itself
 * once empty. True when the mailbox was deleted.
 */
async function forwardMailbox(o: LegacyMailOptions, box: LegacyBox, moved: () => void): Promise<boolean> {
  const jsm = await o.nc.jetstreamManager({ checkAPI: false });
  const target = mailbox(box.ref.handle, box.ref.kind);
  if (box.unsettled > 0) {
    // The seat's mailbox first, so what is forwarded has its reader: the walk made it for a
    // seat of the company, but a seat gone from it has none.
    await o.queue.ensureMailbox(target.subject, target.group);
    if (box.ackPending > 0) {
      // Delivered to a process that never settled them: an older node killed with mail in
      // hand (a paused seat's pull holds one), or a pass killed halfway. No older node is
      // alive (the pass's condition), so they come back now rather than after the older
      // build's ack wait, 30 minutes: a reset to the ack floor. A pass of this build on
      // another member may hold some of them this moment; both forward them, with the
      // message's id, and the seat's stream keeps one. A broker without the call (older
      // than 2.14) answers false: they come back after the ack wait, to a later pass.
      await resetConsumer(o.nc, box.stream, box.name, {}, `resetting legacy mailbox ${box.name} on ${box.stream}`);
    }
    const consumer = await o.nc.jetstream().consumers.get(box.stream, box.name);
    await drain(consumer, box.unsettled, (m) => forwardOne(o.queue, target.subject, m), moved);
  }
  // What is still out within its ack wait comes back to a later pass; until it is forwarded
  // too, the mailbox stays.
  const now = await jsm.consumers.info(box.stream, box.name);
  if (now.num_pending + now.num_ack_pending > 0) return false;
  await jsm.consumers.delete(box.stream, box.name).catch((err: unknown) => {
    if (apiErrorCode(err) !== CONSUMER_NOT_FOUND) throw err;
  });
  return true;
}

/**
 * Forwards what the mailbox holds, a batch at a time, asking only for what it knows is there;
 * an unsettled message still within its ack wait is not delivered, and the fetch waiting for
 * it ends within FETCH_EXPIRES_MS.
 */
async function drain(consumer: Consumer, unsettled: number, forward: (m: JsMsg) => Promise<void>, moved: () => void): Promise<void> {
  for (let i = 0; i < FETCHES_PER_MAILBOX_MAX && unsettled > 0; i++) {
    const batch = await consumer.fetch({ max_messages: Math.min(unsettled, FETCH_BATCH), expires: FETCH_EXPIRES_MS });
    let got = 0;
    for await (const m of batch) {
      got += 1;
      await forward(m);
      // Confirmed, so a pass that ends here has moved the message out before it counts it.
      await m.ackAck();
      moved();
      // Redeliveries come first, so once none is left undelivered the due ones are taken.
      unsettled = m.info.pending;
    }
    if (got === 0) return;
  }
}

/**
 * The same message into the seat's mailbox of this build, with its id: a copy forwarded twice
 * (a pass that died between the publish and the ack) is one copy within the duplicate window, and
 * the completion ledger settles a later one. Headers the broker acts on are not carried.
 */
async function forwardOne(queue: Queue, subject: string, m: JsMsg): Promise<void> {
  const headers: Record<string, string> = {};
  for (const [k, v] of m.headers ?? []) if (!isPublishControlHeader(k) && v[0] !== undefined) headers[k] = v[0];
  const msgId = m.headers?.get("Nats-Msg-Id") || `legacy-${m.info.streamSequence}`;
  await queue.publish(subject, m.data, { msgId, headers });
}

/** Runs a pass now and every LEGACY_PASS_MS (or `every_ms`, tests'); logs what each pass did, a line per stream. */
export function startLegacyMail(o: LegacyMailOptions): { stop(): void } {
  let running = false;
  let stopped = false;
  let waitedBefore = false;
  const pass = async () => {
    if (running || stopped) return;
    running = true;
    try {
      const r = await forwardLegacyMail(o);
      // Once when the wait begins, not every pass it lasts.
      if (r.waited && !waitedBefore) for (const s of r.streams) o.log.info("legacy_mail_waiting", { stream: s.stream, reason: "an older node is alive" });
      waitedBefore = r.waited;
      logMoved(o.log, r);
      if (!stopped) logFailed(o.log, r);
    } catch (err) {
      // A pass cut short by the node's own stop (its connection closing) is not news.
      if (!stopped) o.log.warn("legacy_mail_failed", { error: err as Error });
    } finally {
      running = false;
    }
  };
  void pass();
  const timer: Timer = o.clock.setInterval(() => void pass(), o.every_ms ?? LEGACY_PASS_MS);
  return {
    stop: () => {
      stopped = true;
      timer.cancel();
    },
  };
}

function logMoved(log: Logger, r: LegacyPass): void {
  for (const s of r.streams) {
    if (s.forwarded > 0 || s.mailboxes_deleted > 0 || s.stream_deleted) {
      log.info("legacy_mail_forwarded", { stream: s.stream, forwarded: s.forwarded, mailboxes_deleted: s.mailboxes_deleted, stream_deleted: s.stream_deleted });
    }
  }
}

function logFailed(log: Logger, r: LegacyPass): void {
  if (r.gave_up) {
    // One line for the pass: at this count the cause is one.
    const failures = failuresOf(r.streams);
    log.warn("legacy_mail_failed", { ...failures[0]!, reason: `${failures.length} mailboxes or streams failed in one pass` });
    return;
  }
  for (const s of r.streams) {
    if (s.error) log.warn("legacy_mail_failed", { stream: s.stream, error: s.error });
    for (const f of s.failed) log.warn("legacy_mailbox_failed", { stream: s.stream, mailbox: f.mailbox, error: f.error });
  }
}
