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
import { eachInFlight } from "../in-flight.ts";
import { ensureSeatMailboxes, MAILBOX_CREATE_CONCURRENCY, type MailboxWalkResult } from "../queue/mailboxes.ts";

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
export async function registerSeat(
  registry: KvSlot,
  handle: string,
  clock: Clock,
  log: Logger,
  opts: {
    signal?: AbortSignal;
    /** What a listing of the registry just read for the seat (null: no record), so the first
     *  attempt makes no read of its own; every later attempt reads afresh. */
    seen?: KvEntry | null;
  } = {},
): Promise<RegisterOutcome> {
  const signal = opts.signal;
  let seen = opts.seen;
  let waitedFor: string | null = null;
  for (let attempt = 0; attempt < REGISTER_ATTEMPTS; ) {
    try {
      const e = seen !== undefined ? seen : await registry.get(handle);
      seen = undefined;
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
 * Registrations in flight at once, per node. Each is a KV write (a read first only for a
 * record that needs one) on the mailboxes bucket, whose one stream leader orders every
 * member's writes: three members booting at once put ~100 in its queue, a fraction of a
 * second at the R3 compare-and-set rate bench/budgets.ts measured (~2 ms a write, loaded
 * 2-core box), far inside the 5 s store call budget; more buys nothing, the leader
 * serialises them. A registration waiting out a retirement holds its slot while it waits.
 */
export const REGISTRATION_CONCURRENCY = 32;

/** One seat the registry step has to visit, and what the listing read for it (see registerSeat's `seen`). */
export interface RegistrationVisit {
  handle: string;
  /** null: not in the listing (a create, no read); undefined: no listing (a read first). */
  seen: KvEntry | null | undefined;
}

/**
 * Which seats the registry step visits, from one listing of the registry (null when the
 * listing failed: every seat, each read first, as a walk without a listing did). A seat
 * whose record is settled — readable, no absence stamped, no retirement in flight — is
 * skipped: registering it would write nothing. Not a keys-only listing: a record marking a
 * retirement in flight must be waited out before the seat's mailbox is created, and a
 * stamped absence is cleared by the registration, so the values decide.
 */
export function registrationPlan(handles: readonly string[], listed: ReadonlyMap<string, KvEntry> | null): RegistrationVisit[] {
  const out: RegistrationVisit[] = [];
  for (const handle of new Set(handles)) {
    if (listed === null) {
      out.push({ handle, seen: undefined });
      continue;
    }
    const e = listed.get(handle);
    if (!e) {
      out.push({ handle, seen: null });
      continue;
    }
    const rec = decodeMailboxRecord(e);
    if (rec && rec.absent_since === null && rec.retiring === null) continue;
    out.push({ handle, seen: e });
  }
  return out;
}

/**
 * The registry step of the walk: one listing of crewlet_mailboxes, then registerSeat for
 * each seat the plan visits, `concurrency` at a time. Never throws (registerSeat logs
 * seat_mailbox_unregistered for a seat it could not register). Returns what the walk logs.
 */
export async function registerSeats(
  registry: KvSlot,
  handles: readonly string[],
  clock: Clock,
  log: Logger,
  concurrency = REGISTRATION_CONCURRENCY,
): Promise<{ registry_listed: boolean; registry_visited: number; registered: number; taken_over: number; unregistered: number; registry_ms: number }> {
  const started_ms = clock.now();
  let listed: Map<string, KvEntry> | null = null;
  try {
    listed = new Map((await registry.entries()).map((e) => [e.key, e]));
  } catch (err) {
    // Only dearer: every seat is read and registered one by one.
    log.warn("seat_mailbox_registry_list_failed", { error: err as Error });
  }
  const plan = registrationPlan(handles, listed);
  const outcomes = { registered: 0, taken_over: 0, unregistered: 0 };
  await eachInFlight(plan, concurrency, async (v) => {
    const out = await registerSeat(registry, v.handle, clock, log, { seen: v.seen });
    if (out === "registered") outcomes.registered++;
    else if (out === "taken_over") outcomes.taken_over++;
    else if (out === "failed") outcomes.unregistered++;
  });
  return { registry_listed: listed !== null, registry_visited: plan.length, ...outcomes, registry_ms: clock.now() - started_ms };
}

/**
 * The node's walk, at boot and on every company change (src/node/node.ts): the registry
 * step for every seat, then the mailbox walk (ensureSeatMailboxes: one broker listing,
 * creates only for what it lacks, from a random point, MAILBOX_CREATE_CONCURRENCY in
 * flight, one retry round). Every seat is registered (or its registration has failed,
 * logged) before any seat's mailbox is created. A failed creation fails the walk (a seat
 * without a mailbox loses mail); a failed registration does not.
 */
export async function ensureRegisteredMailboxes(
  queue: Queue,
  registry: KvSlot,
  handles: readonly string[],
  clock: Clock,
  log: Logger,
  concurrency = MAILBOX_CREATE_CONCURRENCY,
): Promise<MailboxWalkResult> {
  return ensureSeatMailboxes(queue, handles, clock, log, concurrency, (seats) => registerSeats(registry, seats, clock, log));
}
