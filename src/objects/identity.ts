// Which store the company's files are in: recorded in the `objects` slot by the first node
// that boots (Scaling Out § What the fleet shares), so a node configured with another store
// refuses to boot, naming both — two stores would each hold half the files, and each
// node's collector would see the other half as nobody's. Pure judgement, thin I/O.
import { z } from "zod";
import { CasConflict, type KvSlot } from "../coord/contract.ts";

/** The slot key of the store record. */
export const STORE_KEY = "store";

export const storeRecordSchema = z.strictObject({
  v: z.literal(1),
  /** `nats:{bucket}`: the backend and where on it. */
  store: z.string().min(1).max(200),
  recorded_by: z.string().min(1).max(128),
  recorded_at: z.number().int().min(0),
});
export type StoreRecord = z.output<typeof storeRecordSchema>;

/** The store a node's `objects` settings name. Pure. */
export function storeIdentity(o: { type: "nats"; bucket: string }): string {
  return `${o.type}:${o.bucket}`;
}

export type StoreJudgement = { ok: true } | { ok: false; message: string };

/** Does the recorded store allow a node configured with `configured`? Pure. */
export function judgeStore(recorded: StoreRecord, configured: string): StoreJudgement {
  if (recorded.store === configured) return { ok: true };
  return {
    ok: false,
    message:
      `this fleet's files are in ${recorded.store} (recorded by ${recorded.recorded_by} at ${new Date(recorded.recorded_at).toISOString()}), ` +
      `but this node is configured with ${configured}: set objects to the fleet's store (objects.bucket: ${recorded.store.split(":").slice(1).join(":")})`,
  };
}

function decode(value: Uint8Array): StoreRecord | string {
  try {
    const parsed = storeRecordSchema.safeParse(JSON.parse(new TextDecoder().decode(value)));
    if (parsed.success) return parsed.data;
    const issue = parsed.error.issues[0];
    return `${issue?.path.join(".") || "record"}: ${issue?.message ?? "invalid"}`;
  } catch (err) {
    return `not JSON: ${(err as Error).message}`;
  }
}

/**
 * Records `configured` as the fleet's store when none is recorded (the first node), and
 * judges it against the record otherwise. A record this build cannot read refuses too:
 * unknown is never agreement.
 */
export async function recordStore(slot: KvSlot, configured: string, node: string, now_ms: number): Promise<{ record: StoreRecord; judgement: StoreJudgement }> {
  for (let attempt = 0; attempt < 2; attempt++) {
    const entry = await slot.get(STORE_KEY);
    if (entry) {
      const record = decode(entry.value);
      if (typeof record === "string") return { record: { v: 1, store: "unreadable", recorded_by: "unknown", recorded_at: 0 }, judgement: { ok: false, message: `the fleet's store record cannot be read by this build (${record})` } };
      return { record, judgement: judgeStore(record, configured) };
    }
    const record: StoreRecord = { v: 1, store: configured, recorded_by: node, recorded_at: now_ms };
    try {
      await slot.create(STORE_KEY, new TextEncoder().encode(JSON.stringify(record)));
      return { record, judgement: { ok: true } };
    } catch (err) {
      // Another first node recorded its store between our read and our write: judge that one.
      if (!(err instanceof CasConflict)) throw err;
    }
  }
  throw new Error("the objects slot's store record changed twice while this node recorded its own");
}
