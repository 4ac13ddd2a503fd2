// The mailbox registry (spec: Seat Ownership § The removed seat, "How the fleet knows a
// mailbox exists"): every node records each seat in crewlet_mailboxes before it creates
// the seat's subscriptions, so a removed handle — gone from the org — is still known to the
// maintenance sweep that retires its mailbox. The record carries what the retirement runs
// on: when the seat was first seen missing, whether a retirement is in flight, and the
// revision every write is conditional on.
import { z } from "zod";
import type { Clock } from "../clock.ts";
import { CasConflict, type KvEntry, type KvSlot } from "../coord/contract.ts";
import type { Logger } from "../log.ts";
import type { Queue } from "../queue/contract.ts";
import { MAILBOX_CREATE_CONCURRENCY, type MailboxWalkResult } from "../queue/mailboxes.ts";
import { seatMailboxes } from "../queue/topics.ts";

/** A retirement's budget: its deletes are a few broker calls (milliseconds on a healthy
 * broker); 30 s rides out a leader election several times over (spec: "its 30-second budget"). */
export const RETIREMENT_BUDGET_MS = 30_000;
/** A node adding a seat back waits this long for a retirement in flight before it takes
 * the record over (spec: twice the budget). */
export const RETIREMENT_TAKEOVER_MS = 2 * RETIREMENT_BUDGET_MS;
/** How often a node waiting on a retirement reads the record again. */
const RETIREMENT_WAIT_POLL_MS = 1_000;
/** Reads and writes one registration makes before it gives up (each conflict is a peer's
 * write landing between our read and our write; a handful settles any real race). */
const REGISTER_ATTEMPTS = 5;

export const mailboxRecordSchema = z.object({
  handle: z.string(),
  registered_at: z.number(),
  /** Clock ms when a sweep first saw the seat missing from the active revision. */
  absent_since: z.number().nullable(),
  /** A retirement in flight: who marked it and when. */
  retiring: z.object({ owner: z.string(), since: z.number() }).nullable(),
});
export type MailboxRecord = z.infer<typeof mailboxRecordSchema>;

const enc = new TextEncoder();
const dec = new TextDecoder();
export function encodeRecord(r: MailboxRecord): Uint8Array {
  return enc.encode(JSON.stringify(r));
}
export function decodeMailboxRecord(e: KvEntry): MailboxRecord | null {
  try {
    const p = mailboxRecordSchema.safeParse(JSON.parse(dec.decode(e.value)));
    return p.success ? p.data : null;
  } catch {
    return null;
  }
}

export type RegisterOutcome = "registered" | "present" | "taken_over" | "failed";

/**
 * Registers one seat, waiting out a retirement in flight (its deletes must not land on the
 * mailbox this node is about to create) and taking the record over once the retirement has
 * held it for RETIREMENT_TAKEOVER_MS. Never throws: a registration that fails is logged
 * (seat_mailbox_unregistered) and the caller creates the mailbox anyway, because a seat in
 * the company losing mail is worse than a mailbox the next sweep registers.
 */
export async function registerSeat(registry: KvSlot, handle: string, clock: Clock, log: Logger, signal?: AbortSignal): Promise<RegisterOutcome> {
  let waitedFor: string | null = null;
  for (let attempt = 0; attempt < REGISTER_ATTEMPTS; ) {
    try {
      const e = await registry.get(handle);
      const now = clock.now();
      if (!e) {
        await registry.create(handle, encodeRecord({ handle, registered_at: now, absent_since: null, retiring: null }));
        return "registered";
      }
      const rec = decodeMailboxRecord(e);
      if (!rec) {
        // Unreadable: written by something else. Replaced, so the sweep can judge it again.
        await registry.update(handle, encodeRecord({ handle, registered_at: now, absent_since: null, retiring: null }), e.revision);
        return "registered";
      }
      if (rec.retiring === null) {
        // The node applying a revision that has the seat has seen it back: the absence
        // clock stops here, so a seat removed again later starts a new grace even if no
        // sweep ran while it was back. (A node applying an older revision may clear a
        // stamp too early to matter: that only restarts the grace, never shortens it.)
        if (rec.absent_since === null) return "present";
        await registry.update(handle, encodeRecord({ ...rec, absent_since: null }), e.revision);
        log.info("seat_mailbox_returned", { seat: handle, absent_since: new Date(rec.absent_since).toISOString(), by: "registration" });
        return "present";
      }
      if (now - rec.retiring.since >= RETIREMENT_TAKEOVER_MS) {
        await registry.update(handle, encodeRecord({ handle, registered_at: now, absent_since: null, retiring: null }), e.revision);
        log.warn("seat_mailbox_retirement_taken_over", { seat: handle, retiring_owner: rec.retiring.owner, marked_ms_ago: now - rec.retiring.since });
        return "taken_over";
      }
      if (waitedFor !== rec.retiring.owner) {
        waitedFor = rec.retiring.owner;
        log.info("seat_mailbox_waiting_on_retirement", { seat: handle, retiring_owner: rec.retiring.owner });
      }
      // Waiting is not an attempt: it is bounded by the mark's age instead.
      await clock.sleep(RETIREMENT_WAIT_POLL_MS, signal);
      continue;
    } catch (err) {
      if (signal?.aborted) return "failed";
      attempt++;
      if (err instanceof CasConflict) continue;
      log.warn("seat_mailbox_unregistered", { seat: handle, error: err as Error });
      return "failed";
    }
  }
  log.warn("seat_mailbox_unregistered", { seat: handle, error: `registration lost ${REGISTER_ATTEMPTS} races in a row` });
  return "failed";
}

/**
 * The boot (and apply) walk with the registry: each seat is registered, then its three
 * mailboxes are created, `concurrency` seats at a time. A failed creation fails the walk
 * (a seat without a mailbox loses mail); a failed registration does not.
 */
export async function ensureRegisteredMailboxes(
  queue: Queue,
  registry: KvSlot,
  handles: readonly string[],
  clock: Clock,
  log: Logger,
  concurrency = MAILBOX_CREATE_CONCURRENCY,
): Promise<MailboxWalkResult> {
  const started_ms = clock.now();
  const todo = [...new Set(handles)];
  let next = 0;
  const failures: string[] = [];
  let unregistered = 0;
  const worker = async () => {
    while (next < todo.length) {
      const handle = todo[next++]!;
      if ((await registerSeat(registry, handle, clock, log)) === "failed") unregistered++;
      for (const box of seatMailboxes(handle)) {
        try {
          await queue.ensureMailbox(box.subject, box.group);
        } catch (err) {
          failures.push(`${box.group}: ${err instanceof Error ? err.message : String(err)}`);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, todo.length)) }, worker));
  const elapsed_ms = clock.now() - started_ms;
  const count = todo.length * 3;
  if (failures.length > 0) {
    log.error("seat_mailbox_create_failed", { failed: failures.length, of: count, first: failures[0] });
    throw new Error(`creating seat mailboxes: ${failures.length} of ${count} failed; first: ${failures[0]}`);
  }
  log.info("seat_mailbox_created", { count, seats: todo.length, unregistered, elapsed_ms });
  return { count, elapsed_ms };
}
