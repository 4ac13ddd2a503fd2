// A call parked for a person's yes, in crewlet_approvals keyed `{seat}.{id}` on the fenced
// records a coding run uses, so the seat's next holder finds it. ONE schema, decoded on
// every read. Its life: pending → decided → running (once) → done.
import { createHash } from "node:crypto";
import { z } from "zod";
import type { Clock } from "../clock.ts";
import type { KvSlot } from "../coord/contract.ts";
import { FencedRecords, type RecordKind, type SeatWriter } from "../coord/fenced-records.ts";
import { decodeWith, encodeWith, type Decoded } from "../sandbox/wire.ts";

/** The call's arguments as kept: a tool call's JSON, which a model keeps well under this. */
export const ARGS_MAX_BYTES = 16 * 1024;
/** What the person is shown of why the agent asked, and of a decision's reason. */
export const WORDS_MAX_BYTES = 4 * 1024;
/** The approved call's result kept on the record: what the model reads back of a tool call
 *  (MAX_TOOL_RESULT_CHARS is 16,000 characters; four bytes each at most). */
export const RESULT_MAX_BYTES = 64 * 1024;

const bytes = (max: number) => z.string().refine((s) => Buffer.byteLength(s, "utf8") <= max, `is over ${max} bytes`);
const handle = z.string().regex(/^[a-z0-9][a-z0-9_\-]{0,47}$/);

export const APPROVAL_STATES = ["pending", "decided", "running", "done"] as const;
export const VERDICTS = ["approved", "rejected", "expired"] as const;
export type Verdict = (typeof VERDICTS)[number];

export const approvalIdSchema = z.string().regex(/^ap-[a-f0-9]{20}$/, "approval ids are ap- and 20 hex digits");

export const approvalRecordSchema = z.strictObject({
  v: z.literal(1),
  id: approvalIdSchema,
  seat: handle,
  tool: z.string().min(1).max(64),
  args: z.record(z.string(), z.unknown()).refine((a) => Buffer.byteLength(JSON.stringify(a), "utf8") <= ARGS_MAX_BYTES, `is over ${ARGS_MAX_BYTES} bytes`),
  /** The agent's words before the call (what it was about to do and why). */
  summary: bytes(WORDS_MAX_BYTES),
  /** The rule that asked for a yes, by name. */
  rule: z.string().min(1).max(120),
  /** Where the work came from: the request is posted there and the decision told there. */
  conversation: z.string().min(1).max(512),
  from: z.string().min(1).max(128),
  turn_id: z.string().min(1).max(128),
  owner: z.string().min(1).max(256),
  owner_epoch: z.number().int().min(1),
  state: z.enum(APPROVAL_STATES),
  /** The request is in the thread (its op id is derived, so a repost is the same post). */
  posted: z.boolean(),
  decision: z
    .strictObject({ verdict: z.enum(VERDICTS), by: z.string().min(1).max(128), reason: bytes(WORDS_MAX_BYTES), at: z.number().int().min(0) })
    .nullable(),
  /** The decision's trigger is on the seat's inbox. */
  told: z.boolean(),
  result: z.strictObject({ content: bytes(RESULT_MAX_BYTES), is_error: z.boolean(), ran: z.enum(["yes", "no", "unknown"]) }).nullable(),
  requested_at: z.number().int().min(0),
  expires_at: z.number().int().min(0),
  updated_at: z.number().int().min(0),
});
export type ApprovalRecord = z.output<typeof approvalRecordSchema>;

export function encodeApproval(r: ApprovalRecord): Uint8Array {
  return encodeWith(approvalRecordSchema, r);
}

export function decodeApproval(data: Uint8Array): Decoded<ApprovalRecord> {
  return decodeWith(approvalRecordSchema, data, "approval");
}

/**
 * One request per (seat, the triggers the turn ran for, tool, arguments): a turn run again
 * after its node died asks for the same call under the same id and finds its request,
 * rather than asking the person twice. Pure.
 */
export function approvalId(seat: string, trigger_ids: readonly string[], tool: string, args: Record<string, unknown>): string {
  const h = createHash("sha256").update(JSON.stringify([seat, [...trigger_ids].sort(), tool, canonical(args)])).digest("hex");
  return `ap-${h.slice(0, 20)}`;
}

function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (v !== null && typeof v === "object") return Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical((v as Record<string, unknown>)[k])]));
  return v;
}

/** The state a person reads: pending, or the decision's verdict. Pure. */
export function verdictOf(r: ApprovalRecord): "pending" | Verdict {
  return r.decision?.verdict ?? "pending";
}

export class ApprovalFenced extends Error {
  constructor(readonly approval: string, readonly record_epoch: number, readonly writer_epoch: number) {
    super(`approval ${approval} is owned at epoch ${record_epoch}; a write at epoch ${writer_epoch} is refused`);
    this.name = "ApprovalFenced";
  }
}

export class ApprovalNotFound extends Error {
  constructor(readonly approval: string) {
    super(`no approval ${approval}`);
    this.name = "ApprovalNotFound";
  }
}

const APPROVAL_KIND: RecordKind<ApprovalRecord> = {
  encode: encodeApproval,
  decode: decodeApproval,
  fenced: (id, record_epoch, writer_epoch) => new ApprovalFenced(id, record_epoch, writer_epoch),
  notFound: (id) => new ApprovalNotFound(id),
  created_at: (r) => r.requested_at,
};

/** A decision as a person (or the expiry) gives it. */
export interface Decision {
  verdict: Verdict;
  by: string;
  reason: string;
}

export class ApprovalStore {
  readonly records: FencedRecords<ApprovalRecord>;

  constructor(slot: KvSlot, private readonly clock: Clock) {
    this.records = new FencedRecords(slot, clock, APPROVAL_KIND);
  }

  /** The request, or the one a previous attempt of the same turn already parked. */
  async park(r: ApprovalRecord): Promise<{ record: ApprovalRecord; created: boolean }> {
    try {
      await this.records.create(r);
      return { record: r, created: true };
    } catch (err) {
      const found = await this.records.get(r.seat, r.id);
      if (!found) throw err;
      return { record: found, created: false };
    }
  }

  /**
   * A decision, written beside the owner's fields and only on a pending request: the
   * first decision wins, so two people (or a person and the expiry) never both decide.
   * Returns the record and whether this call decided it.
   */
  async decide(seat: string, id: string, d: Decision): Promise<{ record: ApprovalRecord; decided: boolean }> {
    let decided = false;
    const record = await this.records.request(seat, id, (cur) => {
      if (cur.decision !== null) return null;
      decided = true;
      return { ...cur, state: "decided", decision: { ...d, at: this.clock.now() } };
    });
    return { record, decided };
  }

  /** The decision's trigger is published (idempotently), so the expiry's sweep stops retelling it. */
  markTold(seat: string, id: string): Promise<ApprovalRecord> {
    return this.records.request(seat, id, (cur) => (cur.told ? null : { ...cur, told: true }));
  }

  /** Marks a request as seen now (its updated_at), changing nothing else: the sweep's
   *  clock for telling a decision again. */
  touch(seat: string, id: string): Promise<ApprovalRecord> {
    return this.records.request(seat, id, (cur) => ({ ...cur }));
  }

  /**
   * Settles a request whose deciding turn is over without settling it (the sweep, which holds
   * no seat): only while it is still decided or running, so a holder's own settle wins.
   * `result` is judged on the record as found. Returns it, and whether this call closed it.
   */
  async close(seat: string, id: string, result: (r: ApprovalRecord) => ApprovalRecord["result"]): Promise<{ record: ApprovalRecord; closed: boolean }> {
    let closed = false;
    const record = await this.records.request(seat, id, (cur) => {
      if (cur.state !== "decided" && cur.state !== "running") return null;
      closed = true;
      return { ...cur, state: "done", result: result(cur) };
    });
    return { record, closed };
  }

  mutate(seat: string, id: string, writer: SeatWriter, change: (r: ApprovalRecord) => ApprovalRecord | null): Promise<ApprovalRecord> {
    return this.records.mutate(seat, id, writer, change);
  }

  find(id: string): Promise<ApprovalRecord | null> {
    return this.records.find(id);
  }

  get(seat: string, id: string): Promise<ApprovalRecord | null> {
    return this.records.get(seat, id);
  }

  async list(seat?: string): Promise<{ approvals: ApprovalRecord[]; invalid: { key: string; error: string }[] }> {
    const { records, invalid } = await this.records.list(seat);
    return { approvals: records, invalid };
  }

  /** Deletes a settled request (done) once it is history. */
  forget(seat: string, id: string): Promise<boolean> {
    return this.records.forget(seat, id, (r) => r.state === "done");
  }
}
