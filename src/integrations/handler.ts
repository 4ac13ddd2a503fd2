// The notifications handler: every node with the `seats` role (leaf nodes included) joins
// the one fleet-wide group `notify-inbound` on CREWLET_NOTIFICATIONS, and whichever takes a
// notification turns it into wakes: through the rate valve, a trigger in each routed
// seat's inbox whose message id and event id derive from the delivery — so a redelivered
// notification, or one two nodes both took, wakes nobody twice (the inbox's duplicate
// window, then the completion ledger on the same event id). The handler reads nothing from
// the estate, which is why a stateless node may take its share.
import type { Clock, Timer } from "../clock.ts";
import type { KvSlot } from "../coord/contract.ts";
import type { Logger } from "../log.ts";
import type { Org } from "../org/org.ts";
import { encodeTrigger, type Trigger } from "../org/trigger.ts";
import { ack, defer, type Attachment, type Delivery, type Outcome, type Queue } from "../queue/contract.ts";
import { mailboxSubject, NOTIFICATIONS_GROUP, NOTIFICATIONS_SUBJECT } from "../queue/topics.ts";
import { DEFAULT_RATE_PER_MINUTE, type IntegrationConfig } from "../config/integrations.ts";
import { decodeNotification, triggerFor, type Notification } from "./notification.ts";
import { renderCoalesced, renderLine } from "./render.ts";
import { RateValve, VALVE_FLUSH_MARGIN_MS, VALVE_WINDOW_MS, windowOf } from "./valve.ts";

/** Notifications one pull takes: each is a few KV calls and publishes, so a handful keeps
 * the pipe full without one node hoarding what a peer could run. */
const HANDLER_BATCH = 8;
/**
 * A notification the store or the broker could not take is handed back and the handler
 * pauses this long before taking more: 25 deliveries then span ~50 s of trouble, not the
 * milliseconds an immediate redelivery would burn them in.
 */
export const HANDLER_RETRY_MS = 2_000;
/**
 * Every handler looks for ended windows nobody flushed (the node that held them died)
 * this often; a held list therefore goes out at most this long after its minute.
 */
export const VALVE_SWEEP_MS = 15_000;
/** A flush a peer claimed and has not finished in this long is taken over (it died). */
export const FLUSH_STALE_MS = 30_000;
/** Records one sweep looks at: seats × minutes with traffic, normally a handful. */
const SWEEP_MAX_RECORDS = 2_000;

export interface HandlerOptions {
  queue: Queue;
  rate: KvSlot;
  org: () => Org;
  integrations: () => readonly IntegrationConfig[];
  clock: Clock;
  log: Logger;
}

export class NotificationHandler {
  private readonly valve: RateValve;
  private attachment: Attachment | null = null;
  private sweepTimer: Timer | null = null;
  private resumeTimer: Timer | null = null;
  private readonly flushTimers = new Map<string, Timer>();
  private stopped = false;

  constructor(private readonly o: HandlerOptions) {
    this.valve = new RateValve(o.rate);
  }

  async start(): Promise<void> {
    this.attachment = await this.o.queue.attach(NOTIFICATIONS_SUBJECT, NOTIFICATIONS_GROUP, (d) => this.handle(d), { batch: HANDLER_BATCH });
    this.sweepTimer = this.o.clock.setInterval(() => void this.sweep(), VALVE_SWEEP_MS);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.sweepTimer?.cancel();
    this.resumeTimer?.cancel();
    for (const t of this.flushTimers.values()) t.cancel();
    this.flushTimers.clear();
    await this.attachment?.detach();
  }

  /** One notification → wakes (or holds). Exported for tests through the queue only. */
  async handle(d: Delivery): Promise<Outcome> {
    const decoded = decodeNotification(d.data);
    if (!decoded.ok) {
      // Redelivering it could only fail the same way 25 times.
      this.o.log.error("integration_notification_invalid", { seq: d.streamSeq, error: decoded.error });
      return ack();
    }
    const n = decoded.notification;
    const org = this.o.org();
    const integ = this.o.integrations().find((i) => i.id === n.integration);
    const limit = integ?.rate_per_minute ?? DEFAULT_RATE_PER_MINUTE;
    const answersBack = integ?.token !== undefined && integ.kind !== "generic";
    try {
      for (const seat of n.seats) {
        if (!org.agentSeat(seat)) {
          this.o.log.warn("integration_seat_unknown", { integration: n.integration, seat, delivery: n.delivery });
          continue;
        }
        const { decision, window } = await this.valve.admit(seat, n.delivery, renderLine(n.integration, n.event), limit, this.o.clock.now());
        if (decision.kind === "wake") {
          await this.publish(triggerFor(n, seat, answersBack));
          this.o.log.debug("integration_wake_published", { integration: n.integration, seat, delivery: n.delivery, event_type: n.event.event });
        } else {
          this.o.log.info("integration_wake_held", { integration: n.integration, seat, delivery: n.delivery, window, limit });
          if (decision.first) this.scheduleFlush(seat, window);
        }
      }
    } catch (err) {
      return this.retryLater(n, err);
    }
    return ack();
  }

  private retryLater(n: Notification, err: unknown): Outcome {
    this.o.log.warn("integration_notification_retry", { integration: n.integration, delivery: n.delivery, error: err as Error });
    if (!this.stopped) {
      this.resumeTimer?.cancel();
      this.resumeTimer = this.o.clock.setTimeout(() => this.attachment?.resume(), HANDLER_RETRY_MS);
    }
    return defer(`notification ${n.delivery}: ${(err as Error).message ?? String(err)}`);
  }

  private publish(t: Trigger): Promise<unknown> {
    return this.o.queue.publish(mailboxSubject(t.seat, "inbox"), encodeTrigger(t), { msgId: t.event_id });
  }

  private scheduleFlush(seat: string, window: number): void {
    const key = `${seat}.${window}`;
    if (this.flushTimers.has(key) || this.stopped) return;
    const due = (window + 1) * VALVE_WINDOW_MS + VALVE_FLUSH_MARGIN_MS;
    this.flushTimers.set(
      key,
      this.o.clock.setTimeout(() => {
        this.flushTimers.delete(key);
        void this.flush(seat, window).catch((err) => this.o.log.warn("integration_valve_flush_failed", { seat, window, error: err as Error }));
      }, Math.max(0, due - this.o.clock.now())),
    );
  }

  /** Publishes a window's held notifications as one wake (idempotent: a fixed event id). */
  async flush(seat: string, window: number): Promise<boolean> {
    const rec = await this.valve.claimFlush(seat, window, this.o.clock.now(), FLUSH_STALE_MS);
    if (!rec) return false;
    const lines = rec.held.flatMap((h) => (h.line === null ? [] : [h.line]));
    const unlisted = rec.held.length - lines.length + rec.more;
    const t: Trigger = {
      type: "external_notification",
      event_id: `hook.valve.${seat}.${window}`,
      seat,
      conversation: `notifications:${seat}:${window}`,
      from: "rate-valve",
      text: renderCoalesced(seat, rec.limit, lines, unlisted),
      refs: {},
      created_at: window * VALVE_WINDOW_MS,
    };
    await this.publish(t);
    await this.valve.markPublished(seat, window);
    this.o.log.info("integration_wake_coalesced", { seat, window, notifications: rec.held.length + rec.more });
    return true;
  }

  /** Flushes ended windows nobody flushed and drops finished ones. Errors wait for the next pass. */
  async sweep(): Promise<void> {
    if (this.stopped) return;
    try {
      const now = this.o.clock.now();
      const current = windowOf(now);
      const all = (await this.valve.windows()).filter((w) => w.window < current).slice(0, SWEEP_MAX_RECORDS);
      for (const { seat, window } of all) {
        if (this.stopped) return;
        if (now < (window + 1) * VALVE_WINDOW_MS + VALVE_FLUSH_MARGIN_MS) continue;
        const got = await this.valve.read(seat, window);
        if (!got) continue;
        const nothingHeld = got.rec.held.length === 0 && got.rec.more === 0;
        if (nothingHeld || got.rec.flush?.published) await this.valve.retire(seat, window);
        else await this.flush(seat, window);
      }
    } catch (err) {
      this.o.log.warn("integration_valve_sweep_failed", { error: err as Error });
    }
  }
}
