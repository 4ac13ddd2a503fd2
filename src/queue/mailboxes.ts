// The boot walk: every node ensures every agent seat's mailboxes (seatMailboxes; not only its share),
// before anything else publishes, and again when the company changes. Mail published to a
// seat with no mailbox is dropped (interest retention), so this walk is what makes a seat's
// mail safe from the first message.
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import { eachInFlight } from "../in-flight.ts";
import type { Queue } from "./contract.ts";
import { parseMailbox, seatMailboxes, type MailboxName } from "./topics.ts";

/**
 * Mailbox creations in flight at once, per node. On an R3 stream a consumer create is a
 * proposal the meta leader orders, so the walk is bound by its throughput: with file-backed
 * consumer state ~45 creates/s on a loaded 2-core box with three members walking at once;
 * with memory state (mailboxes on a cluster, since 70af37f) 85–170 creates/s on two such
 * boxes (bench/walk.ts --seats 2000: 4,000 mailboxes in 23.7–47.3 s). What is in flight
 * waits in its queue, and a request still queued after the JetStream API timeout (5 s)
 * fails the walk: 128 a node (384 queued) timed out ~1,000 of 6,000 with file state. 48 a
 * node is ~144 queued, ~3 s at the slowest rate, inside the timeout; alone on R1 the walk
 * is CPU-bound and more buys nothing.
 */
export const MAILBOX_CREATE_CONCURRENCY = 48;

export interface MailboxWalkResult {
  count: number;
  elapsed_ms: number;
}

/**
 * A step every seat passes before the walk creates any seat's mailbox (the registry's,
 * duty/mailbox-registry.ts: the spec registers each seat before its subscriptions). It is
 * given the seats in the walk's own random order and never fails the walk: a step that
 * throws is logged and the mailboxes are created anyway. What it returns is logged on
 * seat_mailbox_created.
 */
export type BeforeCreate = (handles: readonly string[]) => Promise<Record<string, number | boolean>>;

/**
 * Ensures every handle's mailboxes (seatMailboxes), `concurrency` at a time, and logs
 * `seat_mailbox_created` once. Any failure fails the walk (a seat without a mailbox loses
 * mail), after every creation in flight has settled. `before` runs first, for every seat.
 */
export async function ensureSeatMailboxes(
  queue: Queue,
  handles: readonly string[],
  clock: Clock,
  log: Logger,
  concurrency = MAILBOX_CREATE_CONCURRENCY,
  before?: BeforeCreate,
): Promise<MailboxWalkResult> {
  const started_ms = clock.now();
  // Members booting together walk the same list: each starting at its own random point
  // means they mostly make different consumers (and registry records), and where one walk
  // reaches a peer's, a read finds it rather than a create proposing it again (on a cluster
  // even an identical create is a meta proposal: JetStreamQueue.ensureMailbox), where three
  // walks in one order proposed every consumer three times at once (seen: timeouts on R3).
  const seats = randomRotation([...new Set(handles)]);
  const all: MailboxName[] = seats.flatMap(seatMailboxes);
  let beforeFields: Record<string, number | boolean> = {};
  if (before) {
    try {
      beforeFields = await before(seats);
    } catch (err) {
      log.warn("seat_mailbox_unregistered", { seats: seats.length, error: err as Error });
    }
  }
  // One listing (a page per 256 consumers) spares a create per mailbox the broker already
  // has: a restart, a peer's boot or a revision adding one seat to 2,000 would otherwise send
  // thousands of creates answered "exists". A mailbox listed is one whose consumer is on the
  // seat's subject (listMailboxes judges by the filter), which is all ensureMailbox promises.
  // A listing that fails skips nothing: every mailbox is ensured one by one, as before. It is
  // taken after `before`: a registration that waited out a retirement in flight saw the
  // retirement's deletes land first, so the listing does not count what they removed.
  let have = new Set<string>();
  try {
    have = new Set((await queue.listMailboxes()).map((m) => `${m.handle}\u0000${m.kind}`));
  } catch (err) {
    log.warn("seat_mailbox_list_failed", { error: err as Error });
  }
  const todo = all.filter((box) => {
    const ref = parseMailbox(box.subject, box.group);
    return !ref || !have.has(`${ref.handle}\u0000${ref.kind}`);
  });
  const created = todo.length;
  const done = { n: 0 };
  // A walk of thousands of R3 consumers takes minutes (see MAILBOX_CREATE_CONCURRENCY): say
  // it is moving. Cancelled in the finally: a walk that throws leaves no timer behind.
  const progress = clock.setInterval(
    () => log.info("seat_mailbox_walk_progress", { done: done.n, of: created, elapsed_ms: clock.now() - started_ms }),
    WALK_PROGRESS_MS,
  );
  let failed: { box: MailboxName; error: string }[];
  try {
    failed = await createWithRetry(queue, todo, concurrency, log, done);
  } finally {
    progress.cancel();
  }
  const failures = failed.map((f) => `${f.box.group}: ${f.error}`);
  const elapsed_ms = clock.now() - started_ms;
  if (failures.length > 0) {
    log.error("seat_mailbox_create_failed", { failed: failures.length, of: todo.length, first: failures[0] });
    throw new Error(`creating seat mailboxes: ${failures.length} of ${todo.length} failed; first: ${failures[0]}`);
  }
  log.info("seat_mailbox_created", { count: all.length, seats: seats.length, created, present: all.length - created, ...beforeFields, elapsed_ms });
  return { count: all.length, elapsed_ms };
}

/** Between the walk's progress lines: a line every few seconds would flood a boot log. */
const WALK_PROGRESS_MS = 10_000;

/** The walk's one retry round runs at this fraction of its concurrency (see above). */
const WALK_RETRY_CONCURRENCY_DIVISOR = 4;

/** The list from a random point, wrapping round: the same items, each walker's own order. */
export function randomRotation<T>(items: readonly T[], random: () => number = Math.random): T[] {
  const from = Math.floor(random() * items.length);
  return [...items.slice(from), ...items.slice(0, from)];
}


/** Creates every box; what fails gets one more round (see below). Returns what failed twice. */
async function createWithRetry(queue: Queue, todo: readonly MailboxName[], concurrency: number, log: Logger, done: { n: number }) {
  const failed = await createEach(queue, todo, concurrency, done);
  if (failed.length === 0) return failed;
  // A create that timed out in a burst (the meta leader's queue past the API timeout) has
  // often been made meanwhile or finds a quieter queue: one more round for those only, at
  // a quarter of the concurrency, before the walk fails.
  log.warn("seat_mailbox_create_retrying", { failed: failed.length, of: todo.length, first: failed[0]!.error });
  const retry = Math.max(1, Math.floor(concurrency / WALK_RETRY_CONCURRENCY_DIVISOR));
  return createEach(queue, failed.map((f) => f.box), retry, done);
}

async function createEach(queue: Queue, boxes: readonly MailboxName[], concurrency: number, done: { n: number }): Promise<{ box: MailboxName; error: string }[]> {
  const failed: { box: MailboxName; error: string }[] = [];
  await eachInFlight(boxes, concurrency, async (box) => {
    try {
      await queue.ensureMailbox(box.subject, box.group);
      done.n++;
    } catch (err) {
      failed.push({ box, error: err instanceof Error ? err.message : String(err) });
    }
  });
  return failed;
}
