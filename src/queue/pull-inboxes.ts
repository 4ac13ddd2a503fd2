// Where one attachment's pulled deliveries come back: one wildcard subscription for the
// attachment's life, one subject under it per pull. A pull that ends only stops being routed;
// its subject stays subscribed, so a delivery that arrives after the status that ended its
// pull is never dropped by our member.
//
// Why: nats-server 2.15.2 can send a redelivery BEHIND the 408 that ends a no_wait pull on
// the same inbox (seen in the queue conformance case "a drain handler that throws" on 3
// members, about 1 run in 15: the NAKed m1 came back after the 408 that followed m2). With an
// inbox per pull, unsubscribed at that 408, our member dropped it and the message sat
// ack-pending for the 30-minute ack wait.
//
// A delivery names its stream subject, not the inbox it was sent to, so it cannot say which
// of our pulls it answers; only statuses (408, 409 …) do. A delivery therefore goes to the
// pull that is open (an attachment has at most one), or to `onStray` when none is.
import { createInbox, type Msg, type NatsConnection, type Subscription } from "nats";
import type { Clock, Timer } from "../clock.ts";

export type InboxHandler = (err: Error | null, msg: Msg | null) => void;

export interface PullInbox {
  /** The reply subject to give the broker for this pull. */
  readonly subject: string;
  /** Stops routing to this pull's handler. */
  close(): void;
}

/**
 * How long a retired attachment's subscription outlives its last pull. The late deliveries
 * it is kept for were already on their way when the pull ended (one trip through a route,
 * milliseconds); 5 s covers a stalled route many times over, like PULL_LOST_AFTER_MS.
 */
export const LATE_DELIVERY_GRACE_MS = 5_000;

export class PullInboxes {
  private sub: Subscription | null = null;
  private readonly prefix = createInbox();
  private serial = 0;
  private readonly open = new Map<string, InboxHandler>();
  private retired = false;
  private onClosed: (() => void) | null = null;
  private graceTimer: Timer | null = null;

  constructor(
    private readonly nc: NatsConnection,
    private readonly clock: Clock,
    /** A delivery that arrived while no pull is open. */
    private readonly onStray: (msg: Msg) => void,
  ) {}

  /** A fresh subject for one pull. Throws as nc.subscribe does if the connection is closed. */
  openInbox(handler: InboxHandler): PullInbox {
    this.ensureSubscribed();
    this.serial += 1;
    const subject = `${this.prefix}.${this.serial}`;
    this.open.set(subject, handler);
    return {
      subject,
      close: () => {
        this.open.delete(subject);
        this.unsubscribeWhenDone();
      },
    };
  }

  /** No more pulls will be opened: unsubscribe once the open ones are over, after the grace. */
  retire(onClosed?: () => void): void {
    this.retired = true;
    this.onClosed = onClosed ?? null;
    this.unsubscribeWhenDone();
  }

  /** Unsubscribes now; pulls still open are told so. */
  close(): void {
    this.retired = true;
    this.graceTimer?.cancel();
    this.graceTimer = null;
    const sub = this.sub;
    this.sub = null;
    sub?.unsubscribe();
    this.failAll(new Error("queue closed under the pull"));
    const onClosed = this.onClosed;
    this.onClosed = null;
    onClosed?.();
  }

  private unsubscribeWhenDone(): void {
    if (!this.retired || this.open.size > 0 || this.graceTimer) return;
    this.graceTimer = this.clock.setTimeout(() => this.close(), LATE_DELIVERY_GRACE_MS);
  }

  private ensureSubscribed(): void {
    if (this.sub && !this.sub.isClosed()) return;
    const sub = this.nc.subscribe(`${this.prefix}.*`, { callback: (err, msg) => this.route(err, msg) });
    this.sub = sub;
    // The connection closed (or the subscription was dropped): nothing more arrives for any
    // open pull, so each is over. A later pull subscribes afresh (and fails if closed).
    void sub.closed.then(() => {
      if (this.sub !== sub) return; // closed on purpose: close() told the pulls
      this.sub = null;
      this.failAll(new Error("connection closed under the pull"));
    });
  }

  private route(err: Error | null, msg: Msg): void {
    if (err) return this.failAll(err);
    const exact = this.open.get(msg.subject);
    if (exact) return exact(null, msg); // a status for an open pull
    if (!msg.reply?.startsWith("$JS.ACK.")) return; // a status for a pull that is over
    const newest = [...this.open.values()].at(-1);
    if (newest) newest(null, msg);
    else this.onStray(msg);
  }

  private failAll(err: Error): void {
    const handlers = [...this.open.values()];
    this.open.clear();
    for (const h of handlers) h(err, null);
  }
}
