// A seat's memory rows: ONE zod schema per row kind. The store decodes every row against
// its schema before it writes it (a turn's episode, a tool's note, a reflection's update,
// a row carried in from the changelog alike), the changelog carries exactly these shapes,
// and the agent tools' inputs are derived from them, so a limit lives in one place.
// Limits are in bytes (UTF-8), because bytes are what a prompt, a message and a row cost.
import { createHash } from "node:crypto";
import { z } from "zod";
import { HandleSchema } from "../queue/topics.ts";
import { base64ToBytes, floatsOf } from "./vector-codec.ts";

export function maxBytes(limit: number) {
  return (s: string) => Buffer.byteLength(s, "utf8") <= limit;
}
function text(limit: number) {
  return z.string().refine(maxBytes(limit), `is over ${limit} bytes`);
}

/** A diary note: a few sentences the agent wants to keep. 2 KiB holds a paragraph; a longer
 * "note" is a document and belongs in the knowledge base, where colleagues can read it. */
export const MAX_NOTE_BYTES = 2 * 1024;
/** An episode's summary is what recall shows; the whole turn is in the events stream. */
export const MAX_SUMMARY_BYTES = 4 * 1024;
/** A counterparty note is one line of "who this is to me", kept current by reflection. */
export const MAX_COUNTERPARTY_NOTE_BYTES = 1024;
/** Work items an episode names; a turn touching more is listed by its first ones. */
export const MAX_WORK_ITEMS = 32;
/** Trigger ids an episode keeps: one drain's partition is at most 16 (INBOX_DRAIN_MAX). */
export const MAX_TRIGGER_IDS = 64;
const MAX_ID_BYTES = 200;
/** A conversation key (`chat:{channel}:{root}`, `work:{key}`): the trigger schema's 512. */
const MAX_CONVERSATION_BYTES = 512;

/**
 * A row id is one subject token of `crewlet.memory.{handle}.{table}.{row}`: letters,
 * digits, '-' and '_' only (a uuid, a hex digest, a step name).
 */
export const RowIdSchema = z
  .string()
  .min(1, "is empty")
  .max(128, "is longer than 128 characters")
  .regex(/^[A-Za-z0-9_-]+$/, "may hold only letters, digits, '-' and '_'");

const handle = HandleSchema;
/** A counterparty: a seat handle, a person's name or an external id (e.g. slack:U123). */
const counterpartyRef = z.string().min(1, "is empty").refine(maxBytes(MAX_ID_BYTES), `is over ${MAX_ID_BYTES} bytes`);
const ms = z.number().int().nonnegative();
const nullableKey = z.string().refine(maxBytes(MAX_ID_BYTES), `is over ${MAX_ID_BYTES} bytes`).nullable();

export const DiaryRow = z.strictObject({
  id: RowIdSchema,
  handle,
  content: text(MAX_NOTE_BYTES).refine((s) => s.trim().length > 0, "is empty"),
  /** Who wrote it: the agent through memory_note, or the reflection pass. */
  source: z.enum(["note", "reflection"]),
  turn_id: z.string().max(MAX_ID_BYTES).nullable(),
  work_key: nullableKey,
  created_at: ms,
});
export type DiaryRow = z.infer<typeof DiaryRow>;

export const EpisodeRow = z.strictObject({
  id: RowIdSchema,
  handle,
  /** Null for an unkeyed turn: never deduped against another (spec: Keying a write on the work). */
  work_key: nullableKey,
  turn_id: z.string().min(1).max(MAX_ID_BYTES),
  trigger_ids: z.array(z.string().max(MAX_ID_BYTES)).max(MAX_TRIGGER_IDS),
  conversation: z.string().refine(maxBytes(MAX_CONVERSATION_BYTES), `is over ${MAX_CONVERSATION_BYTES} bytes`),
  /** Who woke the turn (the last trigger's sender). */
  counterparty: counterpartyRef.nullable(),
  outcome: z.string().min(1).max(32),
  summary: text(MAX_SUMMARY_BYTES),
  work_items: z.array(z.string().max(MAX_ID_BYTES)).max(MAX_WORK_ITEMS),
  created_at: ms,
});
export type EpisodeRow = z.infer<typeof EpisodeRow>;

export const CounterpartyRow = z.strictObject({
  id: RowIdSchema,
  handle,
  counterparty: counterpartyRef,
  /** Distinct pieces of work with them: a repeat of the last counted work key is not counted. */
  interactions: z.number().int().nonnegative(),
  last_work_key: nullableKey,
  last_seen: ms,
  note: text(MAX_COUNTERPARTY_NOTE_BYTES),
  updated_at: ms,
});
export type CounterpartyRow = z.infer<typeof CounterpartyRow>;

export const OnboardingRow = z.strictObject({
  /** The step's name, e.g. `unit-knowledge`. */
  id: RowIdSchema,
  handle,
  done_at: ms,
  /** What the step found, in a line (shown in the memory view). */
  detail: text(MAX_NOTE_BYTES),
});
export type OnboardingRow = z.infer<typeof OnboardingRow>;

/** The conversation ledger: where the seat stands in each conversation it took part in. */
export const ConversationRow = z.strictObject({
  id: RowIdSchema,
  handle,
  conversation: z.string().min(1).refine(maxBytes(MAX_CONVERSATION_BYTES), `is over ${MAX_CONVERSATION_BYTES} bytes`),
  turns: z.number().int().nonnegative(),
  last_turn_id: z.string().max(MAX_ID_BYTES),
  /** The trigger ids the last turn answered, oldest first. */
  last_trigger_ids: z.array(z.string().max(MAX_ID_BYTES)).max(MAX_TRIGGER_IDS),
  last_at: ms,
});
export type ConversationRow = z.infer<typeof ConversationRow>;

/** A skill's body: what worked, in a few lines; the prompt carries it whole, so it is short. */
export const MAX_SKILL_BODY_BYTES = 2 * 1024;
/** Terms a skill is triggered by (the cluster's key): a handful of words, matched as terms. */
export const MAX_SKILL_TERMS = 8;
/** Episodes a skill version names as its evidence (the newest of its cluster). */
export const MAX_SKILL_EVIDENCE = 16;
const skillTerm = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[\p{L}\p{N}_]+$/u, "may hold only letters, digits and '_'")
  .refine((w) => w === w.toLowerCase(), "is not lower-case");

export const SKILL_STATES = ["active", "stale", "archived"] as const;
export type SkillState = (typeof SKILL_STATES)[number];

/**
 * A synthesized skill: the mutable half (spec: "a skill's state and use count" — the
 * carried copy wins). Its id is derived from (handle, terms), so the learning duty's
 * successor re-deriving the same cluster writes the same row, never a second one.
 */
export const SkillRow = z.strictObject({
  id: RowIdSchema,
  handle,
  /** The cluster key: sorted, distinct normalised terms (memory/skills.ts normaliseTerms). */
  terms: z.array(skillTerm).min(1).max(MAX_SKILL_TERMS),
  name: z.string().min(1).refine(maxBytes(200), "is over 200 bytes"),
  state: z.enum(SKILL_STATES),
  /** Where it came from: clustered out of this seat's episodes, or promoted from a peer's. */
  origin: z.enum(["clustered", "promoted"]),
  /** The seat a promoted skill came from; null for a clustered one. */
  promoted_from: HandleSchema.nullable(),
  /** The skill_versions row the prompt carries now. */
  version: RowIdSchema,
  /** Turns whose prompt carried it; counted by the holder when it builds the prompt. */
  uses: z.number().int().nonnegative(),
  last_used_at: ms.nullable(),
  /** When the lifecycle last moved it (or it was made): the clock its next move is timed on. */
  state_at: ms,
  updated_at: ms,
});
export type SkillRow = z.infer<typeof SkillRow>;

/** One version of a skill's body: append-only, immutable once written (the local copy stands). */
export const SkillVersionRow = z.strictObject({
  /** Derived from (skill id, body): the same body is the same version on any node. */
  id: RowIdSchema,
  handle,
  skill_id: RowIdSchema,
  body: text(MAX_SKILL_BODY_BYTES).refine((s) => s.trim().length > 0, "is empty"),
  /** Episode ids (or, promoted, the source version's id) the body was drawn from. */
  evidence: z.array(RowIdSchema).max(MAX_SKILL_EVIDENCE),
  created_at: ms,
});
export type SkillVersionRow = z.infer<typeof SkillVersionRow>;

/**
 * Widest vector carried. Common embedding models give 384 to 3,072 dimensions (a few 4,096);
 * 8,192 leaves room and is 43 KiB on the wire, far inside the stream's 1 MiB message.
 */
export const MAX_VECTOR_DIMS = 8_192;
/** The embeddings config's own bound on a model name (config/embeddings.ts). */
const MAX_MODEL_BYTES = 200;

/** A note's or an episode's vector, its own record so the rows stay immutable. Its table names
 * the row's kind, so its subject is the row's own id; decoding checks `dims` finite floats. */
export const VectorRow = z
  .strictObject({
    id: RowIdSchema,
    handle,
    model: z.string().min(1, "is empty").refine(maxBytes(MAX_MODEL_BYTES), `is over ${MAX_MODEL_BYTES} bytes`),
    dims: z.number().int().min(1).max(MAX_VECTOR_DIMS),
    embedded_at: ms,
    vector: z.string().min(1, "is empty"),
  })
  .refine((r) => {
    const bytes = base64ToBytes(r.vector);
    return bytes !== null && floatsOf(bytes, r.dims) !== null;
  }, { path: ["vector"], message: "is not dims finite float32 values (little-endian, base64)" });
export type VectorRow = z.infer<typeof VectorRow>;

export type VectorKind = "diary" | "episode";
/** A vector's table by the kind of row it belongs to (and back). */
export const VECTOR_TABLE = { diary: "diary_vectors", episode: "episode_vectors" } as const;
export type VectorTable = (typeof VECTOR_TABLE)[VectorKind];
export const kindOfVectorTable = (t: VectorTable): VectorKind => (t === "diary_vectors" ? "diary" : "episode");
export const isVectorTable = (t: string): t is VectorTable => t === VECTOR_TABLE.diary || t === VECTOR_TABLE.episode;

/** Table names as they appear in the changelog subject. */
export const MEMORY_TABLES = ["diary", "episodes", "counterparties", "onboarding", "conversations", "skills", "skill_versions", "diary_vectors", "episode_vectors"] as const;
export type MemoryTable = (typeof MEMORY_TABLES)[number];

/** Append-only rows keep the local copy on a collision; small mutable rows take the carried one;
 * a vector is neither (vector-merge.ts decides). */
export const APPEND_ONLY: ReadonlySet<MemoryTable> = new Set(["diary", "episodes", "skill_versions"]);

export const MemoryRecord = z.discriminatedUnion("table", [
  z.strictObject({ table: z.literal("diary"), row: DiaryRow }),
  z.strictObject({ table: z.literal("episodes"), row: EpisodeRow }),
  z.strictObject({ table: z.literal("counterparties"), row: CounterpartyRow }),
  z.strictObject({ table: z.literal("onboarding"), row: OnboardingRow }),
  z.strictObject({ table: z.literal("conversations"), row: ConversationRow }),
  z.strictObject({ table: z.literal("skills"), row: SkillRow }),
  z.strictObject({ table: z.literal("skill_versions"), row: SkillVersionRow }),
  z.strictObject({ table: z.literal("diary_vectors"), row: VectorRow }),
  z.strictObject({ table: z.literal("episode_vectors"), row: VectorRow }),
]);
export type MemoryRecord = z.infer<typeof MemoryRecord>;

export type DecodeResult = { ok: true; record: MemoryRecord } | { ok: false; error: string };

/** Decodes a record; the error names the field (`row.content: is over 2048 bytes`). */
export function decodeRecord(value: unknown): DecodeResult {
  const parsed = MemoryRecord.safeParse(value);
  if (parsed.success) return { ok: true, record: parsed.data };
  const issue = parsed.error.issues[0];
  return { ok: false, error: `${issue?.path.join(".") || "(record)"}: ${issue?.message ?? "invalid"}` };
}

/** Decodes a record or throws naming the field: the store's guard on every write. */
export function mustDecode(value: unknown): MemoryRecord {
  const d = decodeRecord(value);
  if (!d.ok) throw new MemoryRowInvalid(d.error);
  return d.record;
}

export class MemoryRowInvalid extends Error {
  constructor(message: string) {
    super(`memory row invalid: ${message}`);
    this.name = "MemoryRowInvalid";
  }
}

export function encodeRecord(r: MemoryRecord): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(r));
}

export function parseRecordBytes(data: Uint8Array): DecodeResult {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(data));
  } catch (err) {
    return { ok: false, error: `not JSON: ${(err as Error).message}` };
  }
  return decodeRecord(value);
}

function digest(...parts: string[]): string {
  return createHash("sha256").update(parts.join("\u0000")).digest("hex").slice(0, 32);
}

/** A note's id is its content's digest: byte-identical content for one seat is one row. */
export const diaryId = (handle: string, content: string): string => `d${digest(handle, content)}`;
export const counterpartyId = (handle: string, counterparty: string): string => `c${digest(handle, counterparty)}`;
export const conversationId = (handle: string, conversation: string): string => `v${digest(handle, conversation)}`;
/** A skill's id is its cluster key's digest: the same terms for one seat are one skill. */
export const skillId = (handle: string, terms: readonly string[]): string => `s${digest(handle, ...terms)}`;
/** A version's id is its body's digest under the skill: the same body is one version. */
export const skillVersionId = (skill_id: string, body: string): string => `k${digest(skill_id, body)}`;

// ---- tool inputs, derived from the row schemas -------------------------------------------

/** memory_note: the diary row's content, nothing else the agent could get wrong. */
export const MemoryNoteInput = z.strictObject({ content: DiaryRow.shape.content });
/** memory_search: a query over the seat's own diary and episodes. Bounded like a note. */
export const MEMORY_SEARCH_MAX_RESULTS = 20;
export const MemorySearchInput = z.strictObject({
  query: z.string().min(1, "is empty").refine(maxBytes(256), "is over 256 bytes"),
  limit: z.number().int().min(1).max(MEMORY_SEARCH_MAX_RESULTS).optional(),
});
