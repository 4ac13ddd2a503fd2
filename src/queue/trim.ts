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
/**
 * How long settled replayable mail (a probe) waits for its trim when nothing else was
 * settled: a trim per probe was 0.11 of 2,000 idle seats' 0.43 broker cores (bench/scale.ts).
 * Other mail settled meanwhile takes it along at the next tick.
 */
export const TRIM_REPLAYABLE_WITHIN_MS = 10 * 60_000;
/**
 * The header that marks a message as harmless to deliver again after it was settled: a
 * mailbox made again reruns it (read mail not yet trimmed), and its reader settles it with
 * nothing done, so its trim can wait TRIM_REPLAYABLE_WITHIN_MS.
 */
export const REPLAYABLE_HEADER = "Crewlet-Replayable";

/** The message's headers carry REPLAYABLE_HEADER (any case). */
export function isReplayable(headers: Record<string, string>): boolean {
  return Object.keys(headers).some((k) => k.toLowerCase() === REPLAYABLE_HEADER.toLowerCase());
}
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
  /** When the first settlement still untrimmed was made, and whether only replayable mail was settled since. */
  since_ms: number;
  replayable_only: boolean;
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
    private readonly replayable_within_ms = TRIM_REPLAYABLE_WITHIN_MS,
  ) {}

  /** Delivery `seq` of this mailbox was settled: trim it at the next tick, or (only replayable mail settled) once it has waited TRIM_REPLAYABLE_WITHIN_MS. */
  settled(stream: string, durable: string, subject: string, seq: number, replayable = false): void {
    const key = `${stream}.${durable}`;
    const before = this.due.get(key);
    this.due.set(key, {
      stream,
      durable,
      subject,
      settled_seq: Math.max(before?.settled_seq ?? 0, seq),
      since_ms: before?.since_ms ?? this.clock.now(),
      replayable_only: (before?.replayable_only ?? true) && replayable,
    });
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
    const now = this.clock.now();
    const batch = [...this.due.entries()].filter(([, d]) => !d.replayable_only || now - d.since_ms >= this.replayable_within_ms);
    for (const [key] of batch) this.due.delete(key);
    await eachInFlight(batch, TRIMS_IN_FLIGHT, async ([key, d]) => {
      try {
        const floor = Math.min(await this.port.ackFloor(d.stream, d.durable), d.settled_seq);
        if (floor <= (this.purgedTo.get(key) ?? 0)) return;
        await this.port.purgeBelow(d.stream, d.subject, floor + 1);
        this.purgedTo.set(key, floor);
      } catch (err) {
        // Due again: read mail left a tick longer costs disk, never a message.
        const later = this.due.get(key);
        this.due.set(key, { ...d, settled_seq: Math.max(d.settled_seq, later?.settled_seq ?? 0), replayable_only: d.replayable_only && (later?.replayable_only ?? true) });
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
