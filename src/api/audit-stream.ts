// The fleet's audit log: each node's entries (node.db first, audit.ts) published to
// CREWLET_AUDIT, and GET /audit read from that stream, so an operator asking any node sees
// every node's operator actions — a drain sent to one box, a pause sent to another.
//
// Why a shared stream and not a read across the nodes (as memory reads ask each holder):
// an audit log must outlive the box that wrote it (a dead node's node.db is where its
// entries would be, exactly when they are wanted), and one stream gives one order and one
// cursor for paging, where a scatter would merge N pages and miss every node that is down.
// The cost is one small publish per write request, which already made a log append.
import type { JetStreamClient, JetStreamManager } from "nats";
import type { Clock, Timer } from "../clock.ts";
import type { Logger } from "../log.ts";
import { AUDIT_SUBJECTS, auditSubject, STREAM_AUDIT } from "../queue/topics.ts";
import type { AuditEntry, AuditLog } from "./audit.ts";
import { readBacklog } from "./event-backlog.ts";

/** Unpublished entries are tried again this often (after a broker outage, a restart). */
export const AUDIT_PUBLISH_RETRY_MS = 5_000;
/** Entries one flush publishes at most; the rest go on the next (each is one small publish). */
const AUDIT_FLUSH_MAX = 2_000;
/** One publish's wait for the stream's ack: a leader election is over in ~4 s. */
const PUBLISH_TIMEOUT_MS = 5_000;

/** What GET /audit answers: entries newest first; `next` is the `before` of the older page. */
export interface AuditPage {
  entries: (AuditEntry & { seq: number; node: string })[];
  next: number | null;
}

export interface AuditReader {
  page(q: { before?: number; limit: number }): Promise<AuditPage>;
}

export class AuditPublisher {
  private running: Promise<void> = Promise.resolve();
  private pending = false;
  private timer: Timer | null = null;

  constructor(private readonly o: { audit: AuditLog; js: JetStreamClient; node: string; clock: Clock; log: Logger }) {}

  start(): void {
    this.timer ??= this.o.clock.setInterval(() => void this.flush(), AUDIT_PUBLISH_RETRY_MS);
    void this.flush();
  }

  stop(): void {
    this.timer?.cancel();
    this.timer = null;
  }

  /** Publishes what is not on the stream yet; one flush at a time, a call during one joins the next. */
  flush(): Promise<void> {
    if (this.pending) return this.running;
    this.pending = true;
    this.running = this.running.then(async () => {
      this.pending = false;
      await this.publishOwed();
    });
    return this.running;
  }

  private async publishOwed(): Promise<void> {
    const rows = this.o.audit.unpublished(AUDIT_FLUSH_MAX);
    const subject = auditSubject(this.o.node);
    for (const e of rows) {
      try {
        await this.o.js.publish(subject, JSON.stringify({ ...e, node: this.o.node }), { msgID: `${this.o.node}.${this.o.audit.fileId}.${e.id}`, timeout: PUBLISH_TIMEOUT_MS });
      } catch (err) {
        this.o.log.warn("audit_publish_deferred", { entries: rows.length, error: (err as Error).message });
        return;
      }
      this.o.audit.markPublished(e.id);
    }
  }
}

/** GET /audit over the fleet's stream; this node's own unpublished entries are published first. */
export function fleetAuditReader(o: { js: JetStreamClient; jsm: JetStreamManager; publisher: AuditPublisher }): AuditReader {
  return {
    async page(q) {
      await o.publisher.flush();
      const got = await readBacklog({ js: o.js, jsm: o.jsm, stream: { name: STREAM_AUDIT, subjects: AUDIT_SUBJECTS } }, q);
      return {
        entries: got.events.map((e) => ({ ...(e.body as unknown as AuditEntry), node: e.name, seq: e.seq })),
        next: got.next,
      };
    },
  };
}
