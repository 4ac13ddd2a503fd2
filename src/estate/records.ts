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
/** Titles are read in lists and as page addresses: 300 characters of any script (≤ 4 bytes each) fit; beyond this they are bodies. */
export const MAX_TITLE_BYTES = 1024;
/** Labels are tags, not content. */
export const MAX_LABELS = 32;
export const MAX_LABEL_BYTES = 64;
/** A handle, a person's name or `token:{id}`: an address, not prose. */
export const MAX_ACTOR_BYTES = 128;
/** Names of seeded projects, containers and channels (from the company file). */
export const MAX_NAME_BYTES = 256;
/** Container keys and channel ids are addresses (and URL path segments). */
export const MAX_CONTAINER_KEY_BYTES = 128;
export const MAX_CHANNEL_ID_BYTES = 200;
/** Mentions a single message may wake: a message naming more seats than this is a broadcast. */
export const MAX_MENTIONS = 32;
/** Members of one DM: past this it is a channel, and its id (the members joined) stops being an address. */
export const MAX_DM_MEMBERS = 16;
/** Why an operator skipped a record: a sentence or two for the next operator. */
export const MAX_REASON_BYTES = 1024;
/**
 * Largest encoded record (envelope included). The log streams' max_msg_size and the
 * broker's default max_payload are both 1 MiB; a record is refused over this before it is
 * published, never sent to be refused by the broker after the caller was told "maybe".
 */
export const MAX_RECORD_BYTES = 1024 * 1024;

/**
 * A text field bounded in UTF-8 bytes, the unit every limit here is in (a model, an HTTP
 * client and the broker all count differently in characters). Lone surrogates are refused:
 * they do not survive UTF-8 storage, so what was read back would not be what was written.
 */
export function textField(max_bytes: number, o: { min?: number } = {}) {
  let s = z.string();
  if (o.min !== undefined && o.min > 0) s = s.min(o.min, "is empty");
  return s
    .refine(isWellFormed, "holds an unpaired UTF-16 surrogate (not valid Unicode text)")
    .refine((v) => Buffer.byteLength(v, "utf8") <= max_bytes, overBytes(max_bytes));
}

function overBytes(max_bytes: number): string {
  return `is over ${max_bytes} bytes${max_bytes % 1024 === 0 ? ` (${max_bytes / 1024} KiB)` : ""} of UTF-8`;
}

/** An unpaired UTF-16 surrogate: a string holding one is not Unicode text. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
function isWellFormed(s: string): boolean {
  LONE_SURROGATE.lastIndex = 0;
  return !LONE_SURROGATE.test(s);
}

/** Who did it: a seat handle, a person, or `token:{id}` for an API caller. */
export const actor = textField(MAX_ACTOR_BYTES, { min: 1 });
export const projectKey = z.string().regex(/^[A-Z][A-Z0-9]{1,9}$/, "project keys are 2–10 upper-case letters/digits, e.g. ENG");
export const workKey = z.string().regex(/^[A-Z][A-Z0-9]{1,9}-[1-9][0-9]{0,9}$/, "work keys look like ENG-12");
export const title = z
  .string()
  .trim()
  .min(1, "is empty")
  .refine(isWellFormed, "holds an unpaired UTF-16 surrogate (not valid Unicode text)")
  .refine((v) => Buffer.byteLength(v, "utf8") <= MAX_TITLE_BYTES, overBytes(MAX_TITLE_BYTES));
export const containerKey = textField(MAX_CONTAINER_KEY_BYTES, { min: 1 }).regex(/^[^/\s][^/]*$/, "container keys hold no '/' and start with no space");
export const pageTitle = title.regex(/^[^/]+$/, "page titles hold no '/'");
export const channelId = z
  .string()
  .min(1, "is empty")
  .max(MAX_CHANNEL_ID_BYTES, `is over ${MAX_CHANNEL_ID_BYTES} bytes`)
  .regex(/^[a-z0-9][a-z0-9_.\-]*$/, "channel ids are lower-case letters, digits, _ . -");
export const labels = z
  .array(textField(MAX_LABEL_BYTES, { min: 1 }))
  .max(MAX_LABELS, `at most ${MAX_LABELS} labels`)
  .transform((l) => [...new Set(l)].sort());
export const dueDate = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, "due dates are YYYY-MM-DD").refine(isCalendarDate, "is not a calendar date");
export const opId = z.string().regex(/^[A-Za-z0-9_\-]{8,100}$/, "operation ids are 8–100 letters, digits, _ and -");
export const handle = z.string().regex(/^[a-z0-9][a-z0-9_\-]{0,47}$/, "handles are lower-case letters, digits, _ and -");
const seedName = textField(MAX_NAME_BYTES, { min: 1 });

function isCalendarDate(s: string): boolean {
  const d = new Date(`${s}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === s;
}

export const workFields = z.strictObject({
  type: z.enum(WORK_TYPES),
  title,
  body: textField(MAX_WORK_BODY_BYTES),
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
  body: textField(MAX_WORK_BODY_BYTES, { min: 1 }),
});
export const trackerSeed = z.strictObject({
  op: z.literal("tracker.seed"),
  projects: z.array(z.strictObject({ key: projectKey, name: seedName, unit_id: seedName.nullable() })).max(1000),
});

// ---- knowledge --------------------------------------------------------------------------

export const pagePut = z.strictObject({
  op: z.literal("page.put"),
  container: containerKey,
  title: pageTitle,
  body: textField(MAX_PAGE_BODY_BYTES),
  labels,
  author: actor,
  /** When set, the put applies only over this revision (0: only if the page is new). */
  base_revision: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).nullable(),
});
export const pagesSeed = z.strictObject({
  op: z.literal("pages.seed"),
  containers: z.array(z.strictObject({ key: containerKey, name: seedName, unit_id: seedName.nullable() })).max(1000),
});

// ---- chat -------------------------------------------------------------------------------

const messageBody = textField(MAX_MESSAGE_BYTES, { min: 1 });
const mentions = z.array(handle).max(MAX_MENTIONS);

export const chatPost = z.strictObject({
  op: z.literal("chat.post"),
  channel: channelId,
  author: actor,
  body: messageBody,
  thread_parent: opId.nullable(),
  mentions,
  /** Set when the post opens a DM: its participants, which the channel id is derived from. */
  dm: z.strictObject({ members: z.array(handle).min(2, "a DM has at least 2 members").max(MAX_DM_MEMBERS, `a DM has at most ${MAX_DM_MEMBERS} members`) }).nullable(),
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
    .array(z.strictObject({ id: channelId, kind: z.enum(["unit", "general"]), name: seedName, unit_id: seedName.nullable() }))
    .max(1000),
});

// ---- turn receipts (on the tracker log) -------------------------------------------------

/** A receipt's summary: the turn's final words as a list line reads them; the whole reply is
 *  in the thread and the transcript (2 KiB is a long paragraph in any script). */
export const MAX_RECEIPT_SUMMARY_BYTES = 2 * 1024;
/** A receipt's error: the words an operator acts on, not a stack (the transcript keeps 4 KiB). */
export const MAX_RECEIPT_ERROR_BYTES = 1024;
/** Distinct tools one receipt lists: a seat offers a few dozen; past this the transcript has the rest. */
export const MAX_RECEIPT_TOOLS = 32;
/** A tool's name on a receipt: MCP names are server__tool, well under this. */
export const MAX_TOOL_NAME_BYTES = 200;

const ms = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
/**
 * A word the engine chose (a trigger type, an outcome). Text, not an enum, on purpose: a
 * newer build that adds an outcome must not write a record an older copy cannot decode,
 * which would hold the whole tracker log on that copy.
 */
const engineWord = z.string().regex(/^[a-z][a-z0-9_]{0,63}$/, "is a lower-case word of letters, digits and _");

/**
 * What a finished turn did, once per turn (op id = the turn id, so a retried write is the
 * same write): written by the seat's holder after the turn, kept by every copy for
 * TURN_RECEIPT_HORIZON_MS (src/estate/turn-receipts.ts), read by GET /turns and the Today view.
 */
export const turnReceipt = z.strictObject({
  op: z.literal("turn.receipt"),
  seat: handle,
  turn_id: opId,
  /** The node that ran it (its transcript is there, read through the seat's holder). */
  node: textField(MAX_ACTOR_BYTES, { min: 1 }),
  /** The company's calendar day (its time zone) the turn ended on. */
  day: dueDate,
  started_at: ms,
  ended_at: ms,
  duration_ms: ms,
  trigger: z.strictObject({
    type: engineWord,
    from: actor,
    conversation: textField(512, { min: 1 }),
    /** Triggers the turn ran on (a drain's partition may hold several). */
    count: ms,
  }),
  /** The final words, cut to MAX_RECEIPT_SUMMARY_BYTES. */
  summary: textField(MAX_RECEIPT_SUMMARY_BYTES),
  /** Tools called, in order of first call, with how often and how often they failed. */
  tools: z.array(z.strictObject({ name: textField(MAX_TOOL_NAME_BYTES, { min: 1 }), calls: ms, errors: ms })).max(MAX_RECEIPT_TOOLS, `at most ${MAX_RECEIPT_TOOLS} tools`),
  input_tokens: ms,
  output_tokens: ms,
  /** Micro-units of the provider's currency; null when the model has no pricing. */
  cost_micros: ms.nullable(),
  outcome: engineWord,
  /** Why it failed, in words, when it did. */
  error: textField(MAX_RECEIPT_ERROR_BYTES).nullable(),
  /** Where to read more: the thread (channel + root message) and the work item. */
  links: z.strictObject({ channel: channelId.nullable(), thread_root: opId.nullable(), work_key: workKey.nullable() }),
});
export type TurnReceipt = z.output<typeof turnReceipt>;

// ---- files (attachments.ts applies them, on the log of the owner's domain) ----------------

/** A file's name as the uploader gave it: a name, not a path; 255 is every file system's limit. */
export const MAX_FILE_NAME_BYTES = 255;

/** An object's key in the store: `fl-` and 24 hex digits, minted by the uploading node. */
export const fileId = z.string().regex(/^fl-[a-f0-9]{24}$/, "file ids are fl- and 24 hex digits");
export const fileName = textField(MAX_FILE_NAME_BYTES, { min: 1 }).regex(/^[^/\\\u0000-\u001f\u007f]+$/, "file names hold no / \\ or control characters");
/** `type/subtype`, lower case, with an optional charset: what a download answers with. */
export const contentType = z
  .string()
  .max(127, "is over 127 bytes")
  .regex(/^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*(; ?charset=[a-z0-9_.:-]+)?$/, "content types are type/subtype (e.g. image/png), optionally ; charset=…");
const sha256 = z.string().regex(/^[a-f0-9]{64}$/, "is 64 hex digits");
const bytes = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

const fileFields = {
  op: z.literal("file.attach"),
  file: fileId,
  name: fileName,
  content_type: contentType,
  size: bytes,
  sha256,
  by: actor,
};

export const workFileAttach = z.strictObject({ ...fileFields, on: z.strictObject({ work: workKey }) });
export const messageFileAttach = z.strictObject({ ...fileFields, on: z.strictObject({ message: opId }) });
export const pageFileAttach = z.strictObject({ ...fileFields, on: z.strictObject({ container: containerKey, title: pageTitle }) });
export type FileAttach = z.output<typeof workFileAttach> | z.output<typeof messageFileAttach> | z.output<typeof pageFileAttach>;

// ---- every domain --------------------------------------------------------------------

/**
 * An operator's skip marker (`crewlet estate skip`): the record at `position` of this
 * domain's log is passed over by every copy that cannot apply it, identically — its op is
 * recorded as skipped at that position, and no row changes. The way back for a log that
 * nevertheless holds a record no copy can apply (a bug, a build skew); the record gate
 * makes one impossible to write through Crewlet itself.
 */
export const logSkip = z.strictObject({
  op: z.literal("log.skip"),
  position: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  reason: textField(MAX_REASON_BYTES, { min: 1 }),
  actor,
});
export type LogSkip = z.output<typeof logSkip>;

export const bodies = {
  tracker: z.discriminatedUnion("op", [workCreate, workUpdate, workComment, trackerSeed, turnReceipt, workFileAttach, logSkip]),
  pages: z.discriminatedUnion("op", [pagePut, pagesSeed, pageFileAttach, logSkip]),
  chat: z.discriminatedUnion("op", [chatPost, chatEdit, chatDelete, chatSeed, messageFileAttach, logSkip]),
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

/** The subject token of a record: `work_create` etc. (no dots inside a token). */
export function opToken(op: AnyBody["op"]): string {
  return op.replace(".", "_");
}

/**
 * The subject tokens a record is appended under (after `crewlet.{domain}.log.`): its op's
 * token, and for a skip marker the position it names too, so a stuck copy finds the
 * marker for its position with one last-by-subject lookup.
 */
export function recordSubjectTokens(body: AnyBody): string[] {
  return body.op === "log.skip" ? [opToken(body.op), String(body.position)] : [opToken(body.op)];
}

/** The op id of a skip marker: one per (domain, position), so the operator's retries are one marker. */
export function skipOpId(domain: Domain, position: number): string {
  return `skip-${domain}-${position}`;
}

export function encodeRecord(record: StateRecord): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(record));
}

export type Decoded<D extends Domain> = { ok: true; record: StateRecord<D> } | { ok: false; error: string; field?: string };

/**
 * Decodes one log message. `reads_version` is the newest format this build understands;
 * a newer record is undecodable here even when its JSON happens to parse. `field` names the
 * offending field of the body (`dm.members`, `due` …), or of the envelope when it is not
 * under the body.
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
    const path = issue?.path.map(String) ?? [];
    const field = path[0] === "body" && path.length > 1 ? path.slice(1).join(".") : path.join(".");
    const message = issue?.code === "unrecognized_keys" ? `unknown field${issue.keys.length > 1 ? "s" : ""} ${issue.keys.join(", ")}` : (issue?.message ?? "invalid");
    return { ok: false, error: `${path.join(".") || "record"}: ${message}`, ...(field ? { field } : {}) };
  }
  return { ok: true, record: parsed.data as StateRecord<D> };
}

export type RecordCheck =
  | { ok: true; record: StateRecord; data: Uint8Array }
  | { ok: false; code: "invalid_record" | "too_large"; message: string; field?: string };

/**
 * The one gate in front of every append: the record as it will travel, encoded, must be no
 * larger than `max_bytes` and must decode with the very decoder every copy's applier uses.
 * A record that passes is one every copy of this build can apply; one that fails is refused
 * here, before anything is published, with the field named. Pure.
 */
export function checkRecord(record: StateRecord, max_bytes: number = MAX_RECORD_BYTES): RecordCheck {
  const domain = (record as { domain?: unknown } | null)?.domain;
  if (domain !== "tracker" && domain !== "pages" && domain !== "chat") {
    return { ok: false, code: "invalid_record", message: "record.domain: expected tracker, pages or chat", field: "domain" };
  }
  let data: Uint8Array;
  try {
    data = encodeRecord(record);
  } catch (err) {
    return { ok: false, code: "invalid_record", message: `record cannot be encoded: ${(err as Error).message}` };
  }
  if (data.byteLength > max_bytes) {
    return { ok: false, code: "too_large", message: `the record is ${data.byteLength} bytes encoded, over the ${max_bytes}-byte limit of one log message` };
  }
  const decoded = decodeRecord(domain, data, RECORD_VERSION);
  if (!decoded.ok) return { ok: false, code: "invalid_record", message: decoded.error, ...(decoded.field ? { field: decoded.field } : {}) };
  return { ok: true, record: decoded.record, data };
}

/** What a text cut to a limit ends with, so a reader knows there was more. */
export const TRUNCATION_MARKER = "\n\n[… truncated: the rest did not fit the limit]";

/**
 * `text` cut to at most `max_bytes` of UTF-8, at a code-point boundary, ending with the
 * truncation marker when anything was cut. For text the engine writes on its own account
 * (a turn's reply), which must be bounded like any write but never refused silently.
 */
export function truncateToBytes(text: string, max_bytes: number, marker: string = TRUNCATION_MARKER): string {
  const wellFormed = text.replace(LONE_SURROGATE, "\uFFFD");
  if (Buffer.byteLength(wellFormed, "utf8") <= max_bytes) return wellFormed;
  const room = Math.max(0, max_bytes - Buffer.byteLength(marker, "utf8"));
  let used = 0;
  let out = "";
  for (const ch of wellFormed) {
    const n = Buffer.byteLength(ch, "utf8");
    if (used + n > room) break;
    used += n;
    out += ch;
  }
  return out + marker;
}

/** A fresh operation id: unique per write, reused for every retry of that write. */
export function newOpId(): string {
  return crypto.randomUUID();
}

/** Builds a record around a body; the caller keeps it for retries. */
export function makeRecord<D extends Domain>(domain: D, body: BodyOf<D>, at_ms: number, origin: string, op_id: string = newOpId()): StateRecord<D> {
  return { v: RECORD_VERSION, domain, op_id, at: at_ms, origin, body } as unknown as StateRecord<D>;
}
