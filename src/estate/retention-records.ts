// The trim's shared records, in the crewlet_estate bucket (coord slot "estate"):
//   hold.{domain}   an operator's hold: the log is kept from `position` on, until released
//                   (who took it, when, why) — `crewlet estate hold/release`;
//   trim.{domain}   the retention duty's last conclusion for the domain (GET /estate shows it);
//   copies          every data node's copy the duty has heard from, with its last positions
//                   and when (a copy unheard from holds the log for UNHEARD_COPY_HOLD_MS).
// Every record is read with its schema (a peer's write is input from outside) and written
// by compare-and-set.
import { z } from "zod";
import { CasConflict, type KvSlot } from "../coord/contract.ts";
import { DOMAINS, type Domain } from "./schema.ts";

export const holdKey = (d: Domain) => `hold.${d}`;
export const trimKey = (d: Domain) => `trim.${d}`;
export const COPIES_KEY = "copies";

export const holdSchema = z.object({
  position: z.number().int().nonnegative(),
  by: z.string().max(200),
  at: z.number(),
  reason: z.string().max(500).nullable(),
});
export type HoldRecord = z.infer<typeof holdSchema>;

const termSchema = z.object({
  kind: z.enum(["copy", "unheard_copy", "hold", "wake_feed"]),
  key: z.string(),
  position: z.number(),
  node: z.string().optional(),
  since: z.number().optional(),
});

export const conclusionSchema = z.object({
  domain: z.enum(DOMAINS),
  at: z.number(),
  by_node: z.string(),
  outcome: z.enum(["trimmed", "nothing", "skipped", "failed"]),
  reason: z.string().max(1000),
  floor: z.number().nullable(),
  margin: z.number(),
  log: z.object({ first_seq: z.number(), last_seq: z.number() }).nullable(),
  terms: z.array(termSchema),
  holding: z.string().nullable(),
  holding_since: z.number().nullable(),
  released: z.array(z.string()),
  /** What the tick purged: records [from, to] (to = the new first position − 1). */
  purged: z.object({ from: z.number(), to: z.number() }).nullable(),
  /** The snapshot a copy below the log restores from (its position for this domain). */
  snapshot_position: z.number().nullable(),
});
export type Conclusion = z.infer<typeof conclusionSchema>;

export const copiesSchema = z.record(
  z.string(),
  z.object({
    applied: z.record(z.string(), z.number().int().nonnegative()),
    heard_at: z.number(),
  }),
);
export type CopiesRecord = z.infer<typeof copiesSchema>;

const enc = new TextEncoder();
const dec = new TextDecoder();

export function decode<T>(schema: z.ZodType<T>, bytes: Uint8Array): T | null {
  try {
    const r = schema.safeParse(JSON.parse(dec.decode(bytes)));
    return r.success ? r.data : null;
  } catch {
    return null;
  }
}

/** A record and its revision, null when absent; throws when present but unreadable. */
export async function readRecord<T>(slot: Pick<KvSlot, "get">, key: string, schema: z.ZodType<T>): Promise<{ value: T; revision: number } | null> {
  const e = await slot.get(key);
  if (!e || e.operation !== "put") return null;
  const value = decode(schema, e.value);
  if (value === null) throw new Error(`${key} in crewlet_estate cannot be read by this build`);
  return { value, revision: e.revision };
}

/** Create or replace by compare-and-set on the revision read (null = create). */
export async function writeRecord(slot: Pick<KvSlot, "create" | "update">, key: string, value: unknown, revision: number | null): Promise<number> {
  const bytes = enc.encode(JSON.stringify(value));
  return revision === null ? slot.create(key, bytes) : slot.update(key, bytes, revision);
}

export type HoldResult = { kind: "held"; hold: HoldRecord; already: boolean } | { kind: "released"; hold: HoldRecord | null };

/**
 * Takes the hold on `domain`: the log is kept from `position` on (the records from the log's
 * current start, for an operator's backup). A hold already in place stays as it is (the
 * earlier position keeps more) and is answered as already held.
 */
export async function takeHold(slot: KvSlot, domain: Domain, hold: HoldRecord): Promise<HoldResult> {
  const existing = await readRecord(slot, holdKey(domain), holdSchema);
  if (existing) return { kind: "held", hold: existing.value, already: true };
  try {
    await writeRecord(slot, holdKey(domain), hold, null);
    return { kind: "held", hold, already: false };
  } catch (err) {
    if (!(err instanceof CasConflict)) throw err;
    const now = await readRecord(slot, holdKey(domain), holdSchema);
    if (now) return { kind: "held", hold: now.value, already: true };
    throw err;
  }
}

export async function releaseHold(slot: KvSlot, domain: Domain): Promise<HoldResult> {
  const existing = await readRecord(slot, holdKey(domain), holdSchema).catch(() => null);
  await slot.delete(holdKey(domain));
  return { kind: "released", hold: existing?.value ?? null };
}

export interface RetentionView {
  hold: HoldRecord | null;
  conclusion: Conclusion | null;
  error?: string;
}

/** For GET /estate: each domain's hold and the duty's last conclusion. */
export async function retentionView(slot: Pick<KvSlot, "get">): Promise<Record<Domain, RetentionView>> {
  const out = {} as Record<Domain, RetentionView>;
  await Promise.all(
    DOMAINS.map(async (d) => {
      try {
        const [hold, conclusion] = await Promise.all([readRecord(slot, holdKey(d), holdSchema), readRecord(slot, trimKey(d), conclusionSchema)]);
        out[d] = { hold: hold?.value ?? null, conclusion: conclusion?.value ?? null };
      } catch (err) {
        out[d] = { hold: null, conclusion: null, error: (err as Error).message };
      }
    }),
  );
  return out;
}
