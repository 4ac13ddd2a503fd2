// The deaf-seat watch wired to a seat host and the JetStream queue: what a node runs
// (src/node/node.ts) and what the real-process tests run, so both prove the same wiring.
// Each held seat's inbox is judged by the snapshot rules and by a probe (mailbox-watch.ts);
// the host hands every probe it takes off an inbox to `heard`.
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import type { MailboxSnapshot } from "../queue/contract.ts";
import { PULL_EXPIRES_MS } from "../queue/attachment.ts";
import { mailbox } from "../queue/topics.ts";
import { REPLAYABLE_HEADER } from "../queue/trim.ts";
import type { SeatHost } from "./host.ts";
import { MailboxWatch, PROBE_HEADER } from "./mailbox-watch.ts";

/** A probe's body: what a build that predates probes reads (and acks as an invalid trigger). */
const PROBE_BODY = new TextEncoder().encode("crewlet mailbox probe");

/** The queue calls the watch rides on (JetStreamQueue). */
export interface MailboxQueue {
  inspectMailbox(subject: string, group: string): Promise<MailboxSnapshot>;
  resetMailbox(subject: string, group: string): Promise<boolean>;
  rewindMailbox(subject: string, group: string): Promise<boolean>;
  publish(subject: string, data: Uint8Array, opts?: { headers?: Record<string, string> }): Promise<unknown>;
}

export interface HeldMailboxWatchOptions {
  queue: MailboxQueue;
  seats: Pick<SeatHost, "health" | "seatState" | "release" | "ringInbox">;
  /** A turn runs on the seat now (the engine's view; the attachment's is read as well). */
  busy?: (handle: string) => boolean;
  clock: Clock;
  log: Logger;
  /** Cadences; the shipped constants unless a test says otherwise. */
  every_ms?: number;
  probe_every_ms?: number;
  probe_heard_within_ms?: number;
}

export function watchHeldMailboxes(o: HeldMailboxWatchOptions): MailboxWatch {
  const inbox = (h: string) => mailbox(h, "inbox");
  /**
   * Established and taking mail now: attached, not held or quiesced, no turn running. Not
   * merely attached: a paused seat's inbox is held, so its mail waits by design, and judging
   * it idle made every pause with mail waiting a deaf seat (/ready 503, a reset, the seat
   * handed back, again each minute) — found by pausing @ceo across a binary swap.
   */
  const takingMail = (h: string) => {
    const s = o.seats.seatState(h);
    return s !== null && s.phase === "established" && s.taking_mail && !(o.busy?.(h) ?? false);
  };
  return new MailboxWatch({
    port: {
      inspect: (h) => o.queue.inspectMailbox(inbox(h).subject, inbox(h).group),
      reset: (h) => o.queue.resetMailbox(inbox(h).subject, inbox(h).group),
      rewind: (h) => o.queue.rewindMailbox(inbox(h).subject, inbox(h).group),
      ring: (h) => o.seats.ringInbox(h),
      probe: async (h, id) => void (await o.queue.publish(inbox(h).subject, PROBE_BODY, { headers: { [PROBE_HEADER]: id, [REPLAYABLE_HEADER]: "1" } })),
    },
    held: () => o.seats.health().held,
    // Idle, for the rules that judge mail waiting: taking mail, and not backing off — a
    // delivery the seat NAK'd with a delay (its provider failing) waits at the broker,
    // ack-pending, on the seat's own behalf. Judged "elsewhere", it was reset and run at
    // once, each check, defeating the backoff (and a delivery's count started over). Its
    // redelivery comes within a pull's expiry of the delay's end.
    idle: (h) => takingMail(h) && o.clock.now() >= (o.seats.seatState(h)?.backing_off_until_ms ?? 0) + PULL_EXPIRES_MS,
    notHolding: (h, seq) => {
      const s = o.seats.seatState(h);
      return s !== null && s.phase === "established" && s.inbox_live && !s.holding.has(seq) && o.clock.now() >= s.backing_off_until_ms + PULL_EXPIRES_MS;
    },
    readiness: (h) => {
      const s = o.seats.seatState(h);
      return s ? { ready: takingMail(h), settled_at_ms: s.settled_at_ms } : null;
    },
    handBack: (h) => o.seats.release(h, "mailbox_deaf"),
    clock: o.clock,
    log: o.log,
    every_ms: o.every_ms,
    probe_every_ms: o.probe_every_ms,
    probe_heard_within_ms: o.probe_heard_within_ms,
  });
}
