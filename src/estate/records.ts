// State-log records: what a write IS once it is on the log. The writer builds the whole
// record (op id, time, body) before it is sent anywhere, so a retry through another data
// node appends the very same bytes; every value the appliers store comes from here or
// from the log position. Pure: schemas, limits, encode/decode.
import { z } from "zod";
import { WORK_PRIORITIES, WORK_STATUSES, WORK_TYPES, type Domain } from "./schema.ts";

/**
 * The record format this build writes and reads. Raised only when a record's meaning
 * changes; a node whose build reads an older format holds the first newer record it meets
 * (an undecodable record) and, past the grace, takes its copy out of service.
 */
export const RECORD_VERSION = 1;

/** A chat message's body: a chat line, not a document; pages hold long text. */
export const MAX_MESSAGE_BYTES = 32 * 1024;
/** A work item's or comment's body: a long spec fits; an attachment does not. */
export const MAX_WORK_BODY_BYTES = 256 * 1024;
/** A page's body: well under the 1 MiB message cap of the log streams, with room for the envelope. */
export const MAX_PAGE_BODY_BYTES = 512 * 1024;
/** Titles are read in lists and as page addresses; beyond this they are bodies. */
export const MAX_TITLE_CHARS = 300;
/** Labels are tags, not content. */
export const MAX_LABELS = 32;
export const MAX_LABEL_CHARS = 64;
/** Mentions a single message may wake: a message naming more seats than this is a broadcast. */
export const MAX_MENTIONS = 32;

function maxBytes(limit: number) {
  return (s: string) => Buffer.byteLength(s, "utf8") <= limit;
}

/** Who did it: a seat handle, a person, or `token:{id}` for an API caller. */
export const actor = z.string().min(1, "is empty").max(128, "is longer than 128 characters");
export const projectKey = z.string().regex(/^[A-Z][A-Z0-9]{1,9}$/, "project keys are 2–10 upper-case letters/digits, e.g. ENG");
export const workKey = z.string().regex(/^[A-Z][A-Z0-9]{1,9}-[1-9][0-9]{0,9}$/, "work keys look like ENG-12");
export const title = z.string().trim().min(1, "is empty").max(MAX_TITLE_CHARS, `is longer than ${MAX_TITLE_CHARS} characters`);
export const containerKey = z.string().min(1, "is empty").max(128).regex(/^[^/\s][^/]*$/, "container keys hold no '/' and start with no space");
export const pageTitle = title.regex(/^[^/]+$/, "page titles hold no '/'");
export const channelId = z.string().min(1, "is empty").max(200).regex(/^[a-z0-9][a-z0-9_.\-]*$/, "channel ids are lower-case letters, digits, _ . -");
export const labels = z
  .array(z.string().min(1).max(MAX_LABEL_CHARS))
  .max(MAX_LABELS, `at most ${MAX_LABELS} labels`)
  .transform((l) => [...new Set(l)].sort());
export const dueDate = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, "due dates are YYYY-MM-DD");
export const opId = z.string().regex(/^[A-Za-z0-9_\-]{8,100}$/, "operation ids are 8–100 letters, digits, _ and -");
export const handle = z.string().regex(/^[a-z0-9][a-z0-9_\-]{0,47}$/, "handles are lower-case letters, digits, _ and -");

export const workFields = z.strictObject({
  type: z.enum(WORK_TYPES),
  title,
  body: z.string().refine(maxBytes(MAX_WORK_BODY_BYTES), `is over ${MAX_WORK_BODY_BYTES} bytes`),
  status: z.enum(WORK_STATUSES),
  priority: z.enum(WORK_PRIORITIES),
  assignee: actor.nullable(),
  parent: workKey.nullable(),
  labels,
  due: dueDate.nullable(),
});

// ---- tracker ----------------------------------------------------------------------------

export const workCreate = workFields.extend({ op: z.literal("work.create"), project: projectKey, reporter: actor });
export const workUpdate = z.strictObject({
  op: z.literal("work.update"),
  key: workKey,
  actor,
  patch: workFields.partial().refine((p) => Object.keys(p).length > 0, "changes nothing"),
});
export const workComment = z.strictObject({
  op: z.literal("work.comment"),
  key: workKey,
  author: actor,
  body: z.string().min(1, "is empty").refine(maxBytes(MAX_WORK_BODY_BYTES), `is over ${MAX_WORK_BODY_BYTES} bytes`),
});
export const trackerSeed = z.strictObject({
  op: z.literal("tracker.seed"),
  projects: z.array(z.strictObject({ key: projectKey, name: z.string().min(1), unit_id: z.string().nullable() })).max(1000),
});

// ---- knowledge --------------------------------------------------------------------------

export const pagePut = z.strictObject({
  op: z.literal("page.put"),
  container: containerKey,
  title: pageTitle,
  body: z.string().refine(maxBytes(MAX_PAGE_BODY_BYTES), `is over ${MAX_PAGE_BODY_BYTES} bytes`),
  labels,
  author: actor,
  /** When set, the put applies only over this revision (0: only if the page is new). */
  base_revision: z.number().int().min(0).nullable(),
});
export const pagesSeed = z.strictObject({
  op: z.literal("pages.seed"),
  containers: z.array(z.strictObject({ key: containerKey, name: z.string().min(1), unit_id: z.string().nullable() })).max(1000),
});

// ---- chat -------------------------------------------------------------------------------

const messageBody = z
  .string()
  .min(1, "is empty")
  .refine(maxBytes(MAX_MESSAGE_BYTES), `is over ${MAX_MESSAGE_BYTES} bytes (32 KiB)`);
const mentions = z.array(handle).max(MAX_MENTIONS);

export const chatPost = z.strictObject({
  op: z.literal("chat.post"),
  channel: channelId,
  author: actor,
  body: messageBody,
  thread_parent: opId.nullable(),
  mentions,
  /** Set when the post opens a DM: its participants, which the channel id is derived from. */
  dm: z.strictObject({ members: z.array(handle).min(2).max(16) }).nullable(),
});
export const chatEdit = z.strictObject({
  op: z.literal("chat.edit"),
  message_id: opId,
  editor: actor,
  body: messageBody,
  mentions,
});
export const chatDelete = z.strictObject({ op: z.literal("chat.delete"), message_id: opId, actor });
export const chatSeed = z.strictObject({
  op: z.literal("chat.seed"),
  channels: z
    .array(z.strictObject({ id: channelId, kind: z.enum(["unit", "general"]), name: z.string().min(1), unit_id: z.string().nullable() }))
    .max(1000),
});

export const bodies = {
  tracker: z.discriminatedUnion("op", [workCreate, workUpdate, workComment, trackerSeed]),
  pages: z.discriminatedUnion("op", [pagePut, pagesSeed]),
  chat: z.discriminatedUnion("op", [chatPost, chatEdit, chatDelete, chatSeed]),
} as const;

export type TrackerBody = z.output<typeof bodies.tracker>;
export type PagesBody = z.output<typeof bodies.pages>;
export type ChatBody = z.output<typeof bodies.chat>;
export type BodyOf<D extends Domain> = z.output<(typeof bodies)[D]>;
export type AnyBody = TrackerBody | PagesBody | ChatBody;

function envelope<D extends Domain>(domain: D) {
  return z.strictObject({
    v: z.number().int().min(1),
    domain: z.literal(domain),
    op_id: opId,
    /** Writer's clock, ms: every node stores this time, never its own. */
    at: z.number().int().nonnegative(),
    /** The node that built the record, for the operator reading the log. */
    origin: z.string().min(1).max(128),
    body: bodies[domain],
  });
}

export const recordSchemas = {
  tracker: envelope("tracker"),
  pages: envelope("pages"),
  chat: envelope("chat"),
} as const;

export type StateRecord<D extends Domain = Domain> = D extends Domain ? z.output<(typeof recordSchemas)[D]> : never;

/** The domain each op belongs to (the op name's first part). */
export function domainOfOp(op: AnyBody["op"]): Domain {
  if (op.startsWith("work.") || op.startsWith("tracker.")) return "tracker";
  if (op.startsWith("page.") || op.startsWith("pages.")) return "pages";
  return "chat";
}

/** The subject token of a record: `work_create` etc. (no dots inside a token). */
export function opToken(op: AnyBody["op"]): string {
  return op.replace(".", "_");
}

export function encodeRecord(record: StateRecord): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(record));
}

export type Decoded<D extends Domain> = { ok: true; record: StateRecord<D> } | { ok: false; error: string };

/**
 * Decodes one log message. `reads_version` is the newest format this build understands;
 * a newer record is undecodable here even when its JSON happens to parse.
 */
export function decodeRecord<D extends Domain>(domain: D, data: Uint8Array, reads_version: number = RECORD_VERSION): Decoded<D> {
  let raw: unknown;
  try {
    raw = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(data));
  } catch (err) {
    return { ok: false, error: `not JSON: ${(err as Error).message}` };
  }
  const v = (raw as { v?: unknown } | null)?.v;
  if (typeof v !== "number" || v > reads_version) {
    return { ok: false, error: `record format ${String(v)} is newer than this build reads (${reads_version})` };
  }
  const parsed = recordSchemas[domain].safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, error: `${issue?.path.join(".") || "record"}: ${issue?.message ?? "invalid"}` };
  }
  return { ok: true, record: parsed.data as StateRecord<D> };
}

/** A fresh operation id: unique per write, reused for every retry of that write. */
export function newOpId(): string {
  return crypto.randomUUID();
}

/** Builds a record around a body; the caller keeps it for retries. */
export function makeRecord<D extends Domain>(domain: D, body: BodyOf<D>, at_ms: number, origin: string, op_id: string = newOpId()): StateRecord<D> {
  return { v: RECORD_VERSION, domain, op_id, at: at_ms, origin, body } as unknown as StateRecord<D>;
}
