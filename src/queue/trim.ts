// Mail is limits-retained, so a mailbox's reader purges what it has settled: below the ack
// floor, and never past the highest message it settled itself, since a consumer whose
// pointers stand beyond the stream's end reports a floor beyond unread mail.
import type { Clock, Timer } from "../clock.ts";
import type { Logger } from "../log.ts";
import { eachInFlight } from "../in-flight.ts";

/**
 * Between trims. Read mail waits this long at most before it is purged, and a mailbox made
 * again after its member died reruns (and the ledger skips) what was read in that time. Each
 * trim of a busy mailbox is two requests (its consumer's INFO and a stream purge, one raft
 * proposal): at 10 s a node running 100 busy seats sends 20 a second, a quiet seat none.
 */
export const TRIM_EVERY_MS = 10_000;
/** Trims in flight at once: each is a consumer read and a stream proposal. */
const TRIMS_IN_FLIGHT = 8;

export interface TrimPort {
  /** The stream sequence below which (inclusive) the mailbox has settled everything. */
  ackFloor(stream: string, durable: string): Promise<number>;
  /** Removes the subject's messages below `seq` from the stream. */
  purgeBelow(stream: string, subject: string, seq: number): Promise<void>;
}

interface Due {
  stream: string;
  durable: string;
  subject: string;
  /** The highest stream sequence this reader settled since it was last trimmed. */
  settled_seq: number;
}

export class MailTrim {
  private readonly due = new Map<string, Due>();
  /** The floor each mailbox was last purged to, so an unmoved floor costs no proposal. */
  private readonly purgedTo = new Map<string, number>();
  private timer: Timer | null = null;
  private running: Promise<void> | null = null;

  constructor(
    private readonly port: TrimPort,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly every_ms = TRIM_EVERY_MS,
  ) {}

  /** Delivery `seq` of this mailbox was settled: trim it at the next tick. */
  settled(stream: string, durable: string, subject: string, seq: number): void {
    const key = `${stream}.${durable}`;
    const before = this.due.get(key)?.settled_seq ?? 0;
    this.due.set(key, { stream, durable, subject, settled_seq: Math.max(before, seq) });
    this.timer ??= this.clock.setInterval(() => void this.tick(), this.every_ms);
  }

  /** The mailbox is gone (deleted or made again): its next consumer's floor starts afresh. */
  forget(stream: string, durable: string): void {
    this.due.delete(`${stream}.${durable}`);
    this.purgedTo.delete(`${stream}.${durable}`);
  }

  /** One trim of every due mailbox; a tick while one runs waits for it. */
  tick(): Promise<void> {
    this.running ??= this.trimDue().finally(() => (this.running = null));
    return this.running;
  }

  private async trimDue(): Promise<void> {
    const batch = [...this.due.entries()];
    this.due.clear();
    await eachInFlight(batch, TRIMS_IN_FLIGHT, async ([key, d]) => {
      try {
        const floor = Math.min(await this.port.ackFloor(d.stream, d.durable), d.settled_seq);
        if (floor <= (this.purgedTo.get(key) ?? 0)) return;
        await this.port.purgeBelow(d.stream, d.subject, floor + 1);
        this.purgedTo.set(key, floor);
      } catch (err) {
        // Due again: read mail left a tick longer costs disk, never a message.
        const now = this.due.get(key);
        this.due.set(key, { ...d, settled_seq: Math.max(d.settled_seq, now?.settled_seq ?? 0) });
        this.log.debug("queue_trim_failed", { stream: d.stream, consumer: d.durable, error: (err as Error).message });
      }
    });
  }

  /** Stops the ticks; what is due stays in the stream until a reader trims it again. */
  async stop(): Promise<void> {
    this.timer?.cancel();
    this.timer = null;
    await this.running;
  }
}
