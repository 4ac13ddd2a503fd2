// The fleet's budget counters (Scaling Out § "What the fleet shares": `budgets`): one record
// per (scope, window) in crewlet_budgets, changed only by compare-and-set, so N nodes
// charging one cap see one figure. Decisions are budget.ts's (pure); this is the I/O.
//
// Why compare-and-set and not a counter stream (nats-server 2.12+ allow_msg_counter): a
// counter adds one integer per subject, and a charge adds four figures to each record (input,
// output, money, rounds) plus the once-per-window soft-alert mark, which must be set by
// exactly one writer fleet-wide — a CAS record does all of it in one write per scope. The
// cost per round (bench/budgets.ts) is one read per capped scope before the call and one
// read + one CAS write per capped scope after it, which measured well under a model round.
import { z } from "zod";
import type { Clock } from "../clock.ts";
import type { Budgets, BudgetWindow, Pricing } from "../config/budgets.ts";
import { CasConflict, type KvSlot } from "../coord/contract.ts";
import type { Logger } from "../log.ts";
import { add, capsFor, costMicros, crossesSoft, fractionUsed, overCap, scopeName, windowOf, ZERO, type AppliedCap, type Exhausted, type Scope, type Spent, type Usage } from "./budget.ts";

/** CAS attempts per record per charge. Each conflict means another node's charge landed, so
 *  the bound is "more nodes charging this record at this instant than any fleet has". */
export const CHARGE_CAS_ATTEMPTS = 64;
/** Charges that could not be written (store away) are kept here and added to the next
 *  charge of the same record; past this many records the oldest debt is logged and dropped. */
export const PENDING_RECORDS_MAX = 256;

const spentSchema = z.object({
  input_tokens: z.number().int().min(0),
  output_tokens: z.number().int().min(0),
  cost_micros: z.number().int().min(0),
  charges: z.number().int().min(0),
  alerted: z.boolean(),
});

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
}

/** The record key: `{scope}.{window}.{reset_at}` (scope `org` or `seat.{handle}`). */
export function counterKey(scope: Scope, window: BudgetWindow, reset_at: number): string {
  return `${scope.kind === "org" ? "org" : `seat.${scope.handle}`}.${window}.${reset_at}`;
}

function decode(value: Uint8Array): Spent {
  const parsed = spentSchema.safeParse(JSON.parse(new TextDecoder().decode(value)));
  if (!parsed.success) throw new Error(`budget counter: ${parsed.error.issues[0]?.path.join(".")}: ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}
const encode = (s: Spent) => new TextEncoder().encode(JSON.stringify(s));

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
  private readonly pending = new Map<string, { usage: Usage; cost: number; rounds: number }>();

  constructor(private readonly o: BudgetCountersOptions) {}

  private applied(handle: string, now: number): (AppliedCap & { reset_at: number; key: string })[] {
    const tz = this.o.timezone();
    return capsFor(this.o.budgets(), handle).map((c) => {
      const { reset_at } = windowOf(c.window, now, tz);
      return { ...c, reset_at, key: counterKey(c.scope, c.window, reset_at) };
    });
  }

  private async read(key: string): Promise<{ spent: Spent; revision: number | null }> {
    const e = await this.o.slot.get(key);
    if (!e || e.operation !== "put") return { spent: ZERO, revision: null };
    return { spent: decode(e.value), revision: e.revision };
  }

  /**
   * Before a model call: the first cap the seat is at or over, or null (the call may start).
   * A store that cannot answer lets the call start (logged): spend control must not stop a
   * fleet whose coordination blipped, and the charge after the round still lands.
   */
  async check(handle: string): Promise<Exhausted | null> {
    const caps = this.applied(handle, this.o.clock.now());
    if (caps.length === 0) return null;
    let reads: { spent: Spent }[];
    try {
      reads = await Promise.all(caps.map((c) => this.read(c.key)));
    } catch (err) {
      this.o.log.warn("budget_check_failed", { seat: handle, error: (err as Error).message });
      return null;
    }
    for (const [i, c] of caps.entries()) {
      const limit = overCap(reads[i]!.spent, c.cap);
      if (limit) return { scope: c.scope, window: c.window, limit, cap: c.cap, spent: reads[i]!.spent, reset_at: c.reset_at };
    }
    return null;
  }

  /**
   * After a model round: its usage added to every capped (scope, window) of the seat. Never
   * loses a charge while the process lives: a record it could not write keeps the debt and
   * adds it with the next charge of that record.
   */
  async charge(handle: string, provider: string, usage: Usage): Promise<void> {
    if (usage.input_tokens === 0 && usage.output_tokens === 0) return;
    const caps = this.applied(handle, this.o.clock.now());
    if (caps.length === 0) return;
    const cost = costMicros(usage, this.o.pricing(provider));
    await Promise.all(caps.map((c) => this.chargeOne(c, usage, cost)));
  }

  private async chargeOne(c: AppliedCap & { reset_at: number; key: string }, usage: Usage, cost: number): Promise<void> {
    const owed = this.pending.get(c.key);
    const u = owed ? { input_tokens: usage.input_tokens + owed.usage.input_tokens, output_tokens: usage.output_tokens + owed.usage.output_tokens } : usage;
    const total = cost + (owed?.cost ?? 0);
    const rounds = 1 + (owed?.rounds ?? 0);
    this.pending.delete(c.key);
    try {
      for (let attempt = 1; attempt <= CHARGE_CAS_ATTEMPTS; attempt++) {
        const { spent, revision } = await this.read(c.key);
        let next = add(spent, u, total);
        next = { ...next, charges: spent.charges + rounds };
        const alert = crossesSoft(next, c.cap, this.o.budgets().soft_alert);
        if (alert) next = { ...next, alerted: true };
        try {
          if (revision === null) await this.o.slot.create(c.key, encode(next));
          else await this.o.slot.update(c.key, encode(next), revision);
        } catch (err) {
          if (err instanceof CasConflict) continue;
          throw err;
        }
        if (alert) this.o.onAlert?.({ scope: c.scope, window: c.window, fraction: fractionUsed(next, c.cap), spent: next, cap: c.cap, reset_at: c.reset_at });
        return;
      }
      throw new Error(`${CHARGE_CAS_ATTEMPTS} compare-and-set conflicts in a row`);
    } catch (err) {
      if (this.pending.size >= PENDING_RECORDS_MAX) {
        const [oldest] = this.pending.keys();
        this.o.log.error("budget_charge_dropped", { key: oldest, pending: this.pending.get(oldest!) });
        this.pending.delete(oldest!);
      }
      this.pending.set(c.key, { usage: u, cost: total, rounds });
      this.o.log.warn("budget_charge_deferred", { key: c.key, scope: scopeName(c.scope), window: c.window, error: (err as Error).message });
    }
  }

  /** Charges this process still owes the store (0 when every charge landed). */
  pendingCount(): number {
    return this.pending.size;
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
      const s = reads[i]!.spent;
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
