// A coding run's record in the fleet's coordination store (crewlet_runs), keyed
// `{seat}.{run_id}` (spec: "Sandbox control is owner-routed" — the record lives in the
// coordination store so the seat's next holder finds it). ONE schema, decoded on every
// read. Every mutation is fenced: refused when the record's owner_epoch outranks the
// writer's (spec: Fencing), and written by compare-and-set, so a zombie's late write to a
// run it no longer owns bounces and two writers never both win one flip.
import { z } from "zod";
import type { Clock } from "../clock.ts";
import type { KvSlot } from "../coord/contract.ts";
import { FencedRecords, fenceRefuses, type Change, type RecordKind, type SeatWriter } from "../coord/fenced-records.ts";
import { decodeWith, encodeWith, type Decoded } from "./wire.ts";

/** Bytes of a run's task kept: a coding CLI's prompt; longer work belongs in a work item. */
export const TASK_MAX_BYTES = 16 * 1024;
/** Bytes of a question or an answer: a chat message's worth. */
export const QA_MAX_BYTES = 8 * 1024;
/** The diff a record keeps: a KV value is one message (1 MiB on the broker), and the tail,
 * the task and the rest must fit beside it. A longer diff is cut and says so. */
export const RECORD_DIFF_MAX_BYTES = 256 * 1024;
/** Output tail a record keeps (the box keeps up to limits.output_bytes; the record this much). */
export const RECORD_TAIL_MAX_BYTES = 64 * 1024;
/** Commits a record names. */
export const RECORD_COMMITS_MAX = 200;

const bytes = (max: number) => z.string().refine((s) => Buffer.byteLength(s, "utf8") <= max, `is over ${max} bytes`);

export const RUN_STATES = ["starting", "running", "parked", "done"] as const;
export type RunState = (typeof RUN_STATES)[number];

export const runResultSchema = z.strictObject({
  outcome: z.enum(["succeeded", "failed", "limit", "cancelled"]),
  exit_code: z.number().int().nullable(),
  reason: bytes(4096),
  output_tail: bytes(RECORD_TAIL_MAX_BYTES),
  output_bytes: z.number().int().min(0),
  diff: bytes(RECORD_DIFF_MAX_BYTES),
  commits: z.array(z.string().max(512)).max(RECORD_COMMITS_MAX),
  summary: bytes(4096),
});
export type RecordedResult = z.output<typeof runResultSchema>;

const handle = z.string().regex(/^[a-z0-9][a-z0-9_\-]{0,47}$/);
export const runIdSchema = z.string().regex(/^[a-z0-9][a-z0-9-]{7,63}$/, "run ids are lower-case letters, digits and -");

export const runRecordSchema = z.strictObject({
  v: z.literal(1),
  id: runIdSchema,
  seat: handle,
  engine: z.string().min(1).max(64),
  task: bytes(TASK_MAX_BYTES),
  /** Where the work came from, and where questions and the result are told. */
  conversation: z.string().min(1).max(512),
  /** Who asked the seat for the work (a person, a seat). */
  from: z.string().min(1).max(128),
  /** The incarnation holding the seat that last wrote this record, and its epoch: the fence. */
  owner: z.string().min(1).max(256),
  owner_epoch: z.number().int().min(1),
  /** The node whose box runs it, and the supervisor's pid there. */
  node: z.string().min(1).max(128),
  pid: z.number().int().min(1).nullable(),
  state: z.enum(RUN_STATES),
  question: z
    .strictObject({
      seq: z.number().int().min(1),
      text: bytes(QA_MAX_BYTES),
      posted: z.boolean(),
      asked_at: z.number().int().min(0),
      /** The conversation it was posted in, when not the run's own (work from no thread). */
      where: z.string().min(1).max(512).optional(),
    })
    .nullable(),
  /** The last answer given; the supervisor hands it to the box when its seq is the question's. */
  answer: z.strictObject({ seq: z.number().int().min(1), text: bytes(QA_MAX_BYTES), by: z.string().min(1).max(128), message_id: z.string().max(256).nullable() }).nullable(),
  /** A request to end the run (a person's cancel, a retirement); the supervisor acts on it. */
  cancel: z.strictObject({ reason: bytes(1024), by: z.string().min(1).max(128) }).nullable(),
  result: runResultSchema.nullable(),
  /** The seat was told of the result (its turn's trigger is published). */
  reported: z.boolean(),
  created_at: z.number().int().min(0),
  updated_at: z.number().int().min(0),
});
export type RunRecord = z.output<typeof runRecordSchema>;

export function runKey(seat: string, id: string): string {
  return `${seat}.${id}`;
}

export function encodeRun(r: RunRecord): Uint8Array {
  return encodeWith(runRecordSchema, r);
}

export function decodeRun(data: Uint8Array): Decoded<RunRecord> {
  return decodeWith(runRecordSchema, data, "run");
}

/** Who is writing: the seat's holder, under the grant it holds. */
export type RunWriter = SeatWriter;
export { fenceRefuses };

/** A run the seat still has: not yet done, or done and its seat not yet told. */
export function isLive(r: RunRecord): boolean {
  return r.state !== "done" || !r.reported;
}

export class RunFenced extends Error {
  constructor(readonly run: string, readonly record_epoch: number, readonly writer_epoch: number) {
    super(`run ${run} is owned at epoch ${record_epoch}; a write at epoch ${writer_epoch} is refused`);
    this.name = "RunFenced";
  }
}

export class RunNotFound extends Error {
  constructor(readonly run: string) {
    super(`no run ${run}`);
    this.name = "RunNotFound";
  }
}

/** A change to a record: null leaves it as it is (the write is not needed). */
export type RunChange = Change<RunRecord>;

const RUN_KIND: RecordKind<RunRecord> = {
  encode: encodeRun,
  decode: decodeRun,
  fenced: (id, record_epoch, writer_epoch) => new RunFenced(id, record_epoch, writer_epoch),
  notFound: (id) => new RunNotFound(id),
  created_at: (r) => r.created_at,
};

/** The fleet's run records: the fenced-records store (src/coord/fenced-records.ts) with
 *  the run's own rules for a cancel and for forgetting. */
export class RunStore {
  private readonly records: FencedRecords<RunRecord>;

  constructor(slot: KvSlot, clock: Clock) {
    this.records = new FencedRecords(slot, clock, RUN_KIND);
  }

  create(r: RunRecord): Promise<void> {
    return this.records.create(r);
  }

  get(seat: string, id: string): Promise<RunRecord | null> {
    return this.records.get(seat, id);
  }

  /** Every run of one seat (or of every seat), oldest first; an undecodable record is
   *  reported, not skipped silently. */
  async list(seat?: string): Promise<{ runs: RunRecord[]; invalid: { key: string; error: string }[] }> {
    const { records, invalid } = await this.records.list(seat);
    return { runs: records, invalid };
  }

  /** Applies `change` under the fence, as writer (FencedRecords.mutate); RunFenced when the
   *  record's epoch outranks the writer's. */
  mutate(seat: string, id: string, writer: RunWriter, change: RunChange): Promise<RunRecord> {
    return this.records.mutate(seat, id, writer, change);
  }

  /**
   * A person's request to end a run, written beside the owner's fields, and only on a run
   * not yet done. The run's supervisor acts on it; its result reaches the seat like any
   * other. Null: already done.
   */
  async requestCancel(seat: string, id: string, by: string, reason: string): Promise<RunRecord | null> {
    const after = await this.records.request(seat, id, (cur) => (cur.state === "done" || cur.cancel ? null : { ...cur, cancel: { reason, by } }));
    return after.state === "done" ? null : after;
  }

  /** A run by id alone (the API's and the CLI's name for it). */
  find(id: string): Promise<RunRecord | null> {
    return this.records.find(id);
  }

  /** Deletes a run's record once it is history: done and told, so no holder will write it
   *  again (the fence has nothing left to guard). False when it is not (any more) that. */
  forget(seat: string, id: string): Promise<boolean> {
    return this.records.forget(seat, id, (r) => r.state === "done" && r.reported);
  }

  /** Deletes a run's record under the fence (a retirement, the waiter's sweep of old runs). */
  remove(seat: string, id: string, writer: RunWriter): Promise<void> {
    return this.records.remove(seat, id, writer);
  }
}
