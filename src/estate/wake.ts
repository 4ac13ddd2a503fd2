// The wake feeds: one fleet-wide durable consumer group per domain on the state logs,
// attached by every data node (a node without data joins none: its handler would answer
// from nothing). Each record is handed to one data node, which waits until its copy has
// applied it, derives the triggers (wakes.ts) and publishes each to the seat's inbox.
//
// Exactly one trigger per (record, seat), through two layers, because they cover different
// windows:
//  1. The inbox message id is the trigger's event id, so the agent stream drops a second
//     publish within its duplicate window (35 min). A node that published and died before
//     acking has its record redelivered after WAKE_ACK_WAIT_MS (30 s) — well inside it.
//  2. A redelivery can also come much later than any window: every data node down for an
//     hour with the record unacked, or the feed's consumer re-created and the log replayed.
//     So after publishing, the node writes a claim (`crewlet_claims`, key = event id), and
//     a trigger whose claim exists is not published again. Publish-then-claim, never the
//     reverse: a claim written before a publish that then failed would lose the wake, while
//     a publish whose claim failed is still covered by layer 1 on the prompt redelivery.
import { AckPolicy, DeliverPolicy, ReplayPolicy, type ConsumerMessages, type JsMsg, type JetStreamClient, type JetStreamManager } from "nats";
import type { Clock } from "../clock.ts";
import type { Company } from "../config/company.ts";
import { CasConflict, type KvSlot } from "../coord/contract.ts";
import type { Logger } from "../log.ts";
import { encodeTrigger, type Trigger } from "../org/trigger.ts";
import { durableName, mailboxStream, mailboxSubject, stateLogStream, wakeGroup } from "../queue/topics.ts";
import type { EstateCopy } from "./copy.ts";
import { decodeRecord } from "./records.ts";
import { DOMAINS, type Domain } from "./schema.ts";
import { KeyedOrder } from "./keyed-order.ts";
import { deriveTriggers } from "./wakes.ts";

/**
 * A wake handler publishes a few small messages; one that has not acked in 30 s has died,
 * and its record should go to another data node while the inbox dedupe window (35 min)
 * still covers a second publish.
 */
export const WAKE_ACK_WAIT_MS = 30_000;
/** Redeliveries before a record's wakes are given up (logged as wake_dropped). */
export const WAKE_MAX_DELIVER = 25;
/** Records one node holds unacked at once: a small batch, so a dead node strands little. */
export const WAKE_MAX_ACK_PENDING = 64;
const WAKE_PULL_MSGS = 16;
/** How long a handler waits for its copy to apply the record before handing it back. */
const WAKE_APPLY_WAIT_MS = 5_000;
/** A handed-back record returns after this long: time for the copy to catch up or a peer to take it. */
const WAKE_RETRY_DELAY_MS = 2_000;
const RESTART_BACKOFF_MS = 1_000;
/**
 * A record older than this wakes nobody. The claims slot keeps a claim for a day, so past
 * that a replayed record's claim may be gone and its wake could be a second one; 20 h leaves
 * room for skew between the writer's clock and this one. A record that old is history, not
 * news: the seat reads it from the estate when it matters.
 */
export const WAKE_HORIZON_MS = 20 * 60 * 60 * 1000;
const NS_PER_MS = 1_000_000;

/** The claims slot's two operations the feed uses (coord.slot("claims") satisfies it). */
export type WakeClaims = Pick<KvSlot, "get" | "create">;

export interface WakeFeedOptions {
  js: JetStreamClient;
  jsm: () => Promise<JetStreamManager>;
  copy: EstateCopy;
  claims: WakeClaims;
  company: () => Company;
  clock: Clock;
  log: Logger;
}

export class WakeFeeds {
  private iters = new Map<Domain, ConsumerMessages>();
  private loops: Promise<void>[] = [];
  private closed = false;
  private readonly order = new KeyedOrder();
  private kinds: { company: Company; kind: Map<string, "agent" | "human"> } | null = null;

  constructor(private readonly o: WakeFeedOptions) {}

  /** Creates each domain's group consumer (idempotent) and starts consuming. */
  async start(): Promise<void> {
    const jsm = await this.o.jsm();
    for (const domain of DOMAINS) {
      await jsm.consumers.add(stateLogStream(domain), {
        durable_name: durableName(wakeGroup(domain)),
        ack_policy: AckPolicy.Explicit,
        // From the log's start: a feed created after the first records (boot order) must
        // still see them; the claims stop a re-created feed from waking anyone twice.
        deliver_policy: DeliverPolicy.All,
        replay_policy: ReplayPolicy.Instant,
        ack_wait: WAKE_ACK_WAIT_MS * NS_PER_MS,
        max_deliver: WAKE_MAX_DELIVER,
        max_ack_pending: WAKE_MAX_ACK_PENDING,
        // Never reaped while every data node is down: the feed's cursor is the fleet's.
        inactive_threshold: 0,
      });
    }
    for (const domain of DOMAINS) this.loops.push(this.run(domain));
  }

  async stop(): Promise<void> {
    this.closed = true;
    for (const it of this.iters.values()) it.stop();
    await Promise.all(this.loops);
    await this.order.idle();
  }

  private async run(domain: Domain): Promise<void> {
    while (!this.closed) {
      try {
        const consumer = await this.o.js.consumers.get(stateLogStream(domain), durableName(wakeGroup(domain)));
        const iter = await consumer.consume({ max_messages: WAKE_PULL_MSGS });
        this.iters.set(domain, iter);
        if (this.closed) iter.stop();
        // Records are judged in log order (the apply wait, the derivation); their publishes
        // then run at once across seats and in order per seat (KeyedOrder). Handled one
        // after another, each record's claim read, publish and claim write were round trips
        // in series, and 10,000 seats with one message a minute each outran the feed (p50
        // 42 s from publish to turn start). What is in flight is bounded by the consumer's
        // WAKE_MAX_ACK_PENDING: the broker delivers no more until some are settled.
        for await (const m of iter) await this.handle(domain, m);
      } catch (err) {
        if (this.closed) return;
        this.o.log.warn("wake_feed_restarting", { domain, error: (err as Error).message });
      } finally {
        this.iters.delete(domain);
      }
      if (this.closed) return;
      await this.o.clock.sleep(RESTART_BACKOFF_MS);
    }
  }

  private handBack(m: JsMsg, domain: Domain, why: string): void {
    if (m.info.deliveryCount >= WAKE_MAX_DELIVER) {
      this.o.log.error("wake_dropped", { domain, seq: m.seq, deliveries: m.info.deliveryCount, reason: why });
      m.term();
      return;
    }
    this.o.log.debug("wake_handed_back", { domain, seq: m.seq, reason: why });
    m.nak(WAKE_RETRY_DELAY_MS);
  }

  /** Handles one record; exported behaviour is only through the consumer. */
  private async handle(domain: Domain, m: JsMsg): Promise<void> {
    const copy = this.o.copy;
    if (!copy.inService(domain)) return this.handBack(m, domain, "copy out of service");
    const decoded = decodeRecord(domain, m.data);
    // A peer running a newer build may read it; this node's applier is the one that judges.
    if (!decoded.ok) return this.handBack(m, domain, `undecodable: ${decoded.error}`);
    const applier = copy.appliers[domain];
    if (!(await applier.waitApplied(m.seq, WAKE_APPLY_WAIT_MS))) return this.handBack(m, domain, "not applied here yet");
    const record = decoded.record;
    const done = applier.outcomeOf(record.op_id);
    if (!done) return this.handBack(m, domain, "no ledger entry");
    // Wake only for the record's first position: a retried op id appended again past the
    // log's window is applied once, and wakes once.
    if (done.position !== m.seq) {
      m.ack();
      return;
    }
    if (this.o.clock.now() - record.at > WAKE_HORIZON_MS) {
      if (record.at > 0) this.o.log.debug("wake_skipped_stale", { domain, seq: m.seq, op_id: record.op_id });
      m.ack();
      return;
    }
    const triggers = deriveTriggers(record, m.seq, {
      seatKind: (h) => this.seatKinds().get(h) ?? null,
      outcome: done.outcome,
      channel: (id) => {
        const row = copy.sqlite.query<{ kind: string; members: string }, [string]>("SELECT kind, members FROM chat_channels WHERE id = ?").get(id);
        return row ? { kind: row.kind, members: JSON.parse(row.members) as string[] } : null;
      },
    });
    // Not awaited: the next record is judged while these go out (see run).
    void Promise.all(triggers.map((t) => this.order.run([t.seat], () => this.deliver(t, m.seq)))).then(
      () => m.ack(),
      (err: Error) => this.handBack(m, domain, `publish failed: ${err.message}`),
    );
  }

  /** One trigger into its seat's inbox, unless its claim says it went already; then the claim. */
  private async deliver(t: Trigger, seq: number): Promise<void> {
    if (await this.o.claims.get(t.event_id)) return;
    await this.o.js.publish(mailboxSubject(t.seat, "inbox"), encodeTrigger(t), {
      msgID: t.event_id,
      expect: { streamName: mailboxStream(t.seat) },
      timeout: WAKE_ACK_WAIT_MS / 3,
    });
    try {
      await this.o.claims.create(t.event_id, new TextEncoder().encode(String(seq)));
    } catch (err) {
      if (!(err instanceof CasConflict)) throw err;
    }
    this.o.log.debug("wake_published", { seat: t.seat, type: t.type, event_id: t.event_id });
  }

  /** Handle → kind for the company in force, built once per company rather than per record. */
  private seatKinds(): Map<string, "agent" | "human"> {
    const company = this.o.company();
    if (this.kinds?.company !== company) this.kinds = { company, kind: new Map(company.roles.map((r) => [r.handle, r.kind] as const)) };
    return this.kinds.kind;
  }
}
