// The fleet's budget counters (Scaling Out § "What the fleet shares": `budgets`): one record
// per (scope, window) in crewlet_budgets, changed only by compare-and-set, so N nodes
// charging one cap see one figure. Decisions are budget.ts's (pure); this is the I/O.
//
// Why compare-and-set and not a counter stream (nats-server 2.12+ allow_msg_counter, a
// publish with header Nats-Incr whose ack carries the subject's total) — chosen by
// measurement and by what the outbox needs. bench/budgets.ts, nats-server 2.15.2, load ~4 on
// 2 cores, `bun bench/budgets.ts --rounds 100 --only-choice`:
//   R1 one charger:  CAS (read + update) p50 0.59 ms p99 23.8 ms · Nats-Incr p50 0.19 ms p99 0.65 ms
//   R1 6 chargers, one record: CAS 942 charges/s (109 conflicts retried) · Nats-Incr 17,607/s
//   R3 one charger:  CAS p50 1.69 ms p99 6.0 ms · Nats-Incr p50 0.86 ms p99 2.2 ms
//   R3 6 chargers, one record: CAS 369 charges/s, p99 126 ms (124 conflicts) · Nats-Incr 2,087/s
// (A second run, load ~7: R3 6 chargers CAS 274/s vs Nats-Incr 4,215/s; the engine's whole
// charge, outbox row and two capped records, 141 rounds/s on one org record with 6 turns.)
// Counters are 2–3× faster alone and 6–19× under contention, and no charge was lost either
// way. We keep CAS anyway:
// - Exactly once. A charge whose answer was lost is written again from the outbox (every 5 s,
//   and at the next start, however long the node was down); the record's per-outbox mark
//   makes that retry a no-op forever. A counter dedupes a retry only by Nats-Msg-Id inside
//   the stream's duplicate window — measured: the same id sent again after the window is
//   added a second time (total 5 → 10 → 15) — so a node back after an outage longer than
//   the window would charge twice. A counter's body is its total alone: there is no place
//   for a mark.
// - One record, one write: a charge adds four figures (input, output, money, rounds); as
//   counters that is four publishes, not atomic, so a crash between them leaves a record
//   half-charged (and the outbox cannot tell which half).
// - The cost does not matter at our rate: one CAS charge at R3 is ~2 ms against a model
//   round of seconds, and 369 charges/s on ONE org record is hundreds of turns each
//   making a round every second or so; a fleet's caps are spread over many records.
// The soft-alert mark (set by exactly one writer fleet-wide) rides in the same CAS write.
// Revisit if one record must take thousands of charges a second. The cost per round in full
// (outbox row + one read per capped scope before the call, read + CAS after) is the first
// part of the same bench.
import type { Database } from "bun:sqlite";
import { z } from "zod";
import type { Clock, Timer } from "../clock.ts";
import type { Budgets, BudgetWindow, Pricing } from "../config/budgets.ts";
import { CasConflict, type KvSlot } from "../coord/contract.ts";
import type { Logger } from "../log.ts";
import { capsFor, costMicros, crossesSoft, fractionUsed, overCap, scopeName, windowOf, ZERO, type AppliedCap, type Exhausted, type Scope, type Spent, type Usage } from "./budget.ts";
import { ChargeOutbox, type OwedRow } from "./outbox.ts";

/** CAS attempts per record per charge. Each conflict means another node's charge landed, so
 *  the bound is "more nodes charging this record at this instant than any fleet has". */
export const CHARGE_CAS_ATTEMPTS = 64;
/** How often what the outbox still owes is written again. A store back from an outage (an
 *  election, a restarted member) answers within seconds; the charges then land. */
export const CHARGE_RETRY_MS = 5_000;
/** Records one retry tick writes at most, so a long outage's backlog drains in steps. */
const RETRY_KEYS_PER_TICK = 64;

const recordSchema = z.object({
  input_tokens: z.number().int().min(0),
  output_tokens: z.number().int().min(0),
  cost_micros: z.number().int().min(0),
  charges: z.number().int().min(0),
  alerted: z.boolean(),
  /** Per charging outbox (outbox.ts), the highest row sequence this record holds. */
  marks: z.record(z.string(), z.number().int().min(0)).default({}),
});
type CounterRecord = Spent & { marks: Record<string, number> };

/**
 * The counters could not be read: a model call's spend is then unknown, and unknown spend is
 * not spend under the cap — as unknown ownership is not ownership (a seat whose lease cannot
 * be read is not run). The call is not made; the turn fails transiently and its message
 * comes back later (classify.ts), so a store outage delays work and never lets it run
 * uncapped. A fleet whose store is down cannot hold seats either, so this costs no extra
 * availability.
 */
export class BudgetUnknown extends Error {
  constructor(readonly seat: string, cause: string) {
    super(`the fleet's budget counters could not be read (${cause})`);
    this.name = "BudgetUnknown";
  }
}

export interface BudgetAlert {
  scope: Scope;
  window: BudgetWindow;
  fraction: number;
  spent: Spent;
  cap: AppliedCap["cap"];
  reset_at: number;
}

export interface BudgetCountersOptions {
  slot: KvSlot;
  clock: Clock;
  log: Logger;
  budgets: () => Budgets;
  timezone: () => string;
  /** The pricing of the provider a seat's calls are charged to. */
  pricing: (provider: string) => Pricing | undefined;
  /** The one write that crossed the soft-alert fraction calls this (once per window, fleet-wide). */
  onAlert?: (alert: BudgetAlert) => void;
  /** node.db: where charges wait until their record has them (outbox.ts). */
  db: Database;
}

/** The record key: `{scope}.{window}.{reset_at}` (scope `org` or `seat.{handle}`). */
export function counterKey(scope: Scope, window: BudgetWindow, reset_at: number): string {
  return `${scope.kind === "org" ? "org" : `seat.${scope.handle}`}.${window}.${reset_at}`;
}

/** The scope, window and window end a record key names (counterKey's inverse), or null. */
/**
 * The day records every round is charged to whatever the caps say: the seat's and the org's
 * (GET /budgets/history's 30 days exist for every scope, not only a day-capped one). They
 * are the very keys a day cap's counter uses, so a capped day is one record, not two; the
 * bucket keeps each 32 days (BUCKETS.budgets). Cost: with no day cap on the seat or the org,
 * one or two more records per round — each a read and a compare-and-set write on the flush
 * after the call (never before it: a tally is no cap, check() does not read it).
 */
export function dayTallyKeys(handle: string, now: number, timezone: string): string[] {
  const { reset_at } = windowOf("day", now, timezone);
  return [counterKey({ kind: "seat", handle }, "day", reset_at), counterKey({ kind: "org" }, "day", reset_at)];
}

export function parseCounterKey(key: string): { scope: Scope; window: BudgetWindow; reset_at: number } | null {
  const m = /^(?:org|seat\.([^.]+))\.(day|week|month)\.(\d+)$/.exec(key);
  if (!m) return null;
  return { scope: m[1] === undefined ? { kind: "org" } : { kind: "seat", handle: m[1] }, window: m[2] as BudgetWindow, reset_at: Number(m[3]) };
}

function decode(value: Uint8Array): CounterRecord {
  const parsed = recordSchema.safeParse(JSON.parse(new TextDecoder().decode(value)));
  if (!parsed.success) throw new Error(`budget counter: ${parsed.error.issues[0]?.path.join(".")}: ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}
const encode = (s: CounterRecord) => new TextEncoder().encode(JSON.stringify(s));

/** A record with the rows it does not hold yet added (pure). */
export function withOwed(r: CounterRecord, outbox: string, rows: readonly OwedRow[]): { next: CounterRecord; applied: OwedRow[] } {
  const mark = r.marks[outbox] ?? 0;
  const applied = rows.filter((x) => x.seq > mark);
  if (applied.length === 0) return { next: r, applied };
  const next: CounterRecord = { ...r, marks: { ...r.marks, [outbox]: Math.max(mark, ...applied.map((x) => x.seq)) } };
  for (const x of applied) {
    next.input_tokens += x.input_tokens;
    next.output_tokens += x.output_tokens;
    next.cost_micros += x.cost_micros;
    next.charges += 1;
  }
  return { next, applied };
}

export interface ScopeStatus {
  scope: string;
  window: BudgetWindow;
  cap: AppliedCap["cap"];
  spent: { tokens: number; input_tokens: number; output_tokens: number; money: number; charges: number };
  fraction: number;
  exhausted: boolean;
  reset_at: string;
}

export class BudgetCounters {
  private readonly outbox: ChargeOutbox;
  /** One write per record at a time on this node: rows apply in sequence order (outbox.ts). */
  private readonly flushing = new Map<string, Promise<void>>();
  private retry: Timer | null = null;

  constructor(private readonly o: BudgetCountersOptions) {
    this.outbox = new ChargeOutbox(o.db);
  }

  /** Writes what a previous run of this node still owed, and keeps retrying what fails. */
  start(): void {
    if (this.retry) return;
    this.retry = this.o.clock.setInterval(() => void this.flushOwed(), CHARGE_RETRY_MS);
    void this.flushOwed();
  }

  stop(): void {
    this.retry?.cancel();
    this.retry = null;
  }

  private applied(handle: string, now: number): (AppliedCap & { reset_at: number; key: string })[] {
    const tz = this.o.timezone();
    return capsFor(this.o.budgets(), handle).map((c) => {
      const { reset_at } = windowOf(c.window, now, tz);
      return { ...c, reset_at, key: counterKey(c.scope, c.window, reset_at) };
    });
  }

  private async read(key: string): Promise<{ record: CounterRecord; revision: number | null }> {
    const e = await this.o.slot.get(key);
    if (!e || e.operation !== "put") return { record: { ...ZERO, marks: {} }, revision: null };
    return { record: decode(e.value), revision: e.revision };
  }

  /**
   * Before a model call: the first cap the seat is at or over (counting what this node
   * still owes the record), or null (the call may start). Throws BudgetUnknown when the
   * counters cannot be read: see there why unknown refuses the call.
   */
  async check(handle: string): Promise<Exhausted | null> {
    const caps = this.applied(handle, this.o.clock.now());
    if (caps.length === 0) return null;
    let reads: { record: CounterRecord }[];
    try {
      reads = await Promise.all(caps.map((c) => this.read(c.key)));
    } catch (err) {
      this.o.log.warn("budget_check_failed", { seat: handle, error: (err as Error).message });
      throw new BudgetUnknown(handle, (err as Error).message);
    }
    for (const [i, c] of caps.entries()) {
      const spent = withOwed(reads[i]!.record, this.outbox.id, this.outbox.owed(c.key)).next;
      const limit = overCap(spent, c.cap);
      if (limit) return { scope: c.scope, window: c.window, limit, cap: c.cap, spent, reset_at: c.reset_at };
    }
    return null;
  }

  /**
   * After a model round: its usage owed to every capped (scope, window) of the seat, kept in
   * node.db first, then written to each record. A write that fails stays owed and is retried
   * (CHARGE_RETRY_MS, and at the next start); the record's marks make every row count once.
   */
  async charge(handle: string, provider: string, usage: Usage): Promise<void> {
    if (usage.input_tokens === 0 && usage.output_tokens === 0) return;
    const now = this.o.clock.now();
    const pricing = this.o.pricing(provider);
    const cost = costMicros(usage, pricing);
    // The metrics' spend by seat (src/metrics/node-metrics.ts) counts this line.
    this.o.log.debug("spend_charged", { seat: handle, provider, input_tokens: usage.input_tokens, output_tokens: usage.output_tokens, cost_micros: pricing ? cost : null });
    const keys = [...new Set([...this.applied(handle, now).map((c) => c.key), ...dayTallyKeys(handle, now, this.o.timezone())])];
    const dropped = this.outbox.add(keys, usage, cost, now);
    for (const d of dropped) this.o.log.error("budget_charge_dropped", { key: d.key, seq: d.seq, input_tokens: d.input_tokens, output_tokens: d.output_tokens, cost_micros: d.cost_micros });
    await Promise.all(keys.map((k) => this.flush(k)));
  }

  /** Writes what is owed to one record; never throws (what fails stays owed, logged). */
  private flush(key: string): Promise<void> {
    const prev = this.flushing.get(key) ?? Promise.resolve();
    const next = prev.then(() => this.flushOnce(key));
    this.flushing.set(key, next);
    void next.finally(() => {
      if (this.flushing.get(key) === next) this.flushing.delete(key);
    });
    return next;
  }

  private async flushOnce(key: string): Promise<void> {
    const rows = this.outbox.owed(key);
    if (rows.length === 0) return;
    const named = parseCounterKey(key);
    const cap = named ? capsFor(this.o.budgets(), named.scope.kind === "seat" ? named.scope.handle : "").find((c) => scopeName(c.scope) === scopeName(named.scope) && c.window === named.window)?.cap : undefined;
    try {
      for (let attempt = 1; attempt <= CHARGE_CAS_ATTEMPTS; attempt++) {
        const { record, revision } = await this.read(key);
        let { next, applied } = withOwed(record, this.outbox.id, rows);
        if (applied.length === 0) {
          // Written before (an answer lost after the write landed): settled, not charged again.
          this.outbox.settle(key, rows[rows.length - 1]!.seq);
          return;
        }
        const alert = cap !== undefined && crossesSoft(next, cap, this.o.budgets().soft_alert);
        if (alert) next = { ...next, alerted: true };
        try {
          if (revision === null) await this.o.slot.create(key, encode(next));
          else await this.o.slot.update(key, encode(next), revision);
        } catch (err) {
          if (err instanceof CasConflict) continue;
          throw err;
        }
        this.outbox.settle(key, rows[rows.length - 1]!.seq);
        if (alert && named && cap) this.o.onAlert?.({ scope: named.scope, window: named.window, fraction: fractionUsed(next, cap), spent: next, cap, reset_at: named.reset_at });
        return;
      }
      throw new Error(`${CHARGE_CAS_ATTEMPTS} compare-and-set conflicts in a row`);
    } catch (err) {
      this.o.log.warn("budget_charge_deferred", { key, rows: rows.length, error: (err as Error).message });
    }
  }

  private async flushOwed(): Promise<void> {
    for (const key of this.outbox.keys(RETRY_KEYS_PER_TICK)) await this.flush(key);
  }

  /** Charge rows this node still owes the store (0 when every charge landed). */
  pendingCount(): number {
    return this.outbox.size();
  }

  /**
   * GET /budgets/history: one scope's day counters, newest first, for the last `days` days
   * (crewlet_budgets keeps a record 32 days: BUCKETS.budgets). Every round is charged to its
   * seat's and the org's day records (dayTallyKeys), capped or not, so `counted` is always
   * true now; it stays in the answer for clients that read it.
   */
  async history(scope: Scope, days: number): Promise<{ counted: boolean; days: { reset_at: number; input_tokens: number; output_tokens: number; cost_micros: number }[] }> {
    const now = this.o.clock.now();
    const tz = this.o.timezone();
    const counted = true;
    // One window per calendar day back. A day is 23 to 25 h (DST), so 26 h before a window's
    // reset always falls in the window before it: its reset is this window's start.
    const resets: number[] = [];
    let at = now;
    for (let i = 0; i < days; i++) {
      const { reset_at } = windowOf("day", at, tz);
      resets.push(reset_at);
      at = reset_at - 26 * 3_600_000;
    }
    const reads = await Promise.all(resets.map((r) => this.read(counterKey(scope, "day", r))));
    return { counted, days: resets.map((reset_at, i) => ({ reset_at, input_tokens: reads[i]!.record.input_tokens, output_tokens: reads[i]!.record.output_tokens, cost_micros: reads[i]!.record.cost_micros })) };
  }

  /** GET /budgets: every configured cap with its current window's figure. */
  async status(handles: readonly string[]): Promise<ScopeStatus[]> {
    const now = this.o.clock.now();
    const seen = new Set<string>();
    const caps: (AppliedCap & { reset_at: number; key: string })[] = [];
    for (const h of handles.length > 0 ? handles : [""]) {
      for (const c of this.applied(h, now)) {
        if (h === "" && c.scope.kind === "seat") continue;
        if (seen.has(c.key)) continue;
        seen.add(c.key);
        caps.push(c);
      }
    }
    const reads = await Promise.all(caps.map((c) => this.read(c.key)));
    return caps.map((c, i) => {
      const s = reads[i]!.record;
      return {
        scope: scopeName(c.scope),
        window: c.window,
        cap: c.cap,
        spent: { tokens: s.input_tokens + s.output_tokens, input_tokens: s.input_tokens, output_tokens: s.output_tokens, money: s.cost_micros / 1_000_000, charges: s.charges },
        fraction: Math.round(fractionUsed(s, c.cap) * 10_000) / 10_000,
        exhausted: overCap(s, c.cap) !== null,
        reset_at: new Date(c.reset_at).toISOString(),
      };
    });
  }
}
