// The rate valve (Scaling Out § "What the fleet shares": the `rate` slot). At most N
// notifications wake a seat one by one per minute; the rest are held in the slot and,
// once the minute is over, wake the seat once with a list of them. Nothing is dropped:
// what the list cannot show is counted in it.
//
// One record per (seat, minute) in crewlet_rate, changed only by compare-and-set, so every
// handler node in the fleet shares one count. The record remembers which deliveries it
// let through and which it holds, so a notification redelivered to another node is
// answered the same way rather than counted twice. Deciding is pure (admitTo); the store
// calls are in RateValve.
import { z } from "zod";
import { CasConflict, type KvSlot } from "../coord/contract.ts";
import { COALESCED_LIST_MAX } from "./render.ts";

/** The valve's window: the "per minute". */
export const VALVE_WINDOW_MS = 60_000;
/**
 * A window is flushed this long after it ends: a peer whose clock runs a little behind may
 * still be adding to it, and a summary two seconds later costs nobody anything.
 */
export const VALVE_FLUSH_MARGIN_MS = 2_000;
/** Compare-and-set attempts per decision; more conflicts than this is a store in trouble. */
export const VALVE_CAS_ATTEMPTS = 16;
/**
 * Held deliveries whose keys the record keeps (a redelivered one is recognised); past it,
 * holds are only counted. 500 keys of ~40 bytes is 20 KB, well inside a KV value.
 */
export const VALVE_HELD_KEYS_MAX = 500;

export const valveRecordSchema = z.object({
  /** Delivery keys that woke the seat one by one this window (≤ the limit). */
  admitted: z.array(z.string()),
  /** Held deliveries: their keys and one line each (lines only for the first COALESCED_LIST_MAX). */
  held: z.array(z.object({ key: z.string(), line: z.string().nullable() })),
  /** Held beyond VALVE_HELD_KEYS_MAX: counted, not named. */
  more: z.number().int().min(0),
  /** The limit that applied when the first hold happened (said in the summary). */
  limit: z.number().int().min(1),
  /** Set when a flush claimed the window: later arrivals go to the next one. */
  flush: z.object({ at: z.number(), published: z.boolean() }).nullable(),
});
export type ValveRecord = z.output<typeof valveRecordSchema>;

export function emptyRecord(limit: number): ValveRecord {
  return { admitted: [], held: [], more: 0, limit, flush: null };
}

export type ValveDecision =
  | { kind: "wake" }
  | { kind: "held"; first: boolean }
  /** The window is being flushed already; the caller tries the next one. */
  | { kind: "next_window" };

/** Pure: where one delivery goes in a window's record, and the record after. */
export function admitTo(rec: ValveRecord, key: string, line: string, limit: number): { decision: ValveDecision; next: ValveRecord | null } {
  if (rec.admitted.includes(key)) return { decision: { kind: "wake" }, next: null };
  if (rec.held.some((h) => h.key === key)) return { decision: { kind: "held", first: false }, next: null };
  if (rec.flush !== null) return { decision: { kind: "next_window" }, next: null };
  if (rec.admitted.length < limit) return { decision: { kind: "wake" }, next: { ...rec, admitted: [...rec.admitted, key] } };
  const first = rec.held.length === 0 && rec.more === 0;
  if (rec.held.length >= VALVE_HELD_KEYS_MAX) return { decision: { kind: "held", first }, next: { ...rec, more: rec.more + 1 } };
  const listed = rec.held.filter((h) => h.line !== null).length;
  return {
    decision: { kind: "held", first },
    next: { ...rec, limit: first ? limit : rec.limit, held: [...rec.held, { key, line: listed < COALESCED_LIST_MAX ? line : null }] },
  };
}

export function windowOf(now_ms: number): number {
  return Math.floor(now_ms / VALVE_WINDOW_MS);
}

export function valveKey(seat: string, window: number): string {
  return `v.${seat}.${window}`;
}

export function parseValveKey(key: string): { seat: string; window: number } | null {
  const m = /^v\.([a-z0-9][a-z0-9_\-]{0,47})\.(\d+)$/.exec(key);
  return m ? { seat: m[1]!, window: Number(m[2]) } : null;
}

const enc = (r: ValveRecord) => new TextEncoder().encode(JSON.stringify(r));

export function decodeValve(value: Uint8Array): ValveRecord | null {
  try {
    const p = valveRecordSchema.safeParse(JSON.parse(new TextDecoder().decode(value)));
    return p.success ? p.data : null;
  } catch {
    return null;
  }
}

export class ValveConflict extends Error {
  constructor(key: string) {
    super(`rate valve: ${VALVE_CAS_ATTEMPTS} compare-and-set conflicts on ${key}`);
    this.name = "ValveConflict";
  }
}

/** The valve's store half: compare-and-set loops over the rate slot. */
export class RateValve {
  constructor(private readonly slot: KvSlot) {}

  /** Lets one delivery through or holds it, in the window `now_ms` falls in (or a later one). */
  async admit(seat: string, key: string, line: string, limit: number, now_ms: number): Promise<{ decision: Exclude<ValveDecision, { kind: "next_window" }>; window: number }> {
    let window = windowOf(now_ms);
    for (let attempt = 0; attempt < VALVE_CAS_ATTEMPTS; attempt++) {
      const k = valveKey(seat, window);
      const entry = await this.slot.get(k);
      const rec = (entry && entry.operation === "put" ? decodeValve(entry.value) : null) ?? emptyRecord(limit);
      const { decision, next } = admitTo(rec, key, line, limit);
      if (decision.kind === "next_window") {
        window += 1;
        continue;
      }
      if (next === null) return { decision, window };
      try {
        if (entry && entry.operation === "put") await this.slot.update(k, enc(next), entry.revision);
        else await this.slot.create(k, enc(next));
        return { decision, window };
      } catch (err) {
        if (!(err instanceof CasConflict)) throw err;
      }
    }
    throw new ValveConflict(valveKey(seat, window));
  }

  async read(seat: string, window: number): Promise<{ rec: ValveRecord; revision: number } | null> {
    const entry = await this.slot.get(valveKey(seat, window));
    if (!entry || entry.operation !== "put") return null;
    const rec = decodeValve(entry.value);
    return rec ? { rec, revision: entry.revision } : null;
  }

  /**
   * Claims a window's flush (later arrivals go to the next window) and returns what it
   * holds, or null when there is nothing to flush or a peer's flush is fresher than
   * `stale_ms` (it is still publishing). A flush claimed but never marked published is
   * taken over after `stale_ms`: its publish is idempotent (a fixed message id).
   */
  async claimFlush(seat: string, window: number, now_ms: number, stale_ms: number): Promise<ValveRecord | null> {
    for (let attempt = 0; attempt < VALVE_CAS_ATTEMPTS; attempt++) {
      const got = await this.read(seat, window);
      if (!got) return null;
      const { rec, revision } = got;
      if (rec.held.length === 0 && rec.more === 0) return null;
      if (rec.flush?.published) return null;
      if (rec.flush && now_ms - rec.flush.at < stale_ms) return null;
      const next = { ...rec, flush: { at: now_ms, published: false } };
      try {
        await this.slot.update(valveKey(seat, window), enc(next), revision);
        return next;
      } catch (err) {
        if (!(err instanceof CasConflict)) throw err;
      }
    }
    throw new ValveConflict(valveKey(seat, window));
  }

  async markPublished(seat: string, window: number): Promise<void> {
    for (let attempt = 0; attempt < VALVE_CAS_ATTEMPTS; attempt++) {
      const got = await this.read(seat, window);
      if (!got || got.rec.flush?.published) return;
      try {
        await this.slot.update(valveKey(seat, window), enc({ ...got.rec, flush: { at: got.rec.flush?.at ?? 0, published: true } }), got.revision);
        return;
      } catch (err) {
        if (!(err instanceof CasConflict)) throw err;
      }
    }
    throw new ValveConflict(valveKey(seat, window));
  }

  /** Every (seat, window) the slot holds a record for. */
  async windows(): Promise<{ seat: string; window: number }[]> {
    const out: { seat: string; window: number }[] = [];
    for (const k of await this.slot.keys()) {
      const p = parseValveKey(k);
      if (p) out.push(p);
    }
    return out;
  }

  /** Drops a finished window's record (only at the revision read, so nothing newer goes). */
  async retire(seat: string, window: number): Promise<void> {
    const got = await this.read(seat, window);
    if (!got) return;
    try {
      await this.slot.delete(valveKey(seat, window), got.revision);
    } catch (err) {
      if (!(err instanceof CasConflict)) throw err;
    }
  }
}
