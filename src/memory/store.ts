// A node's copy of its seats' memory (node.db). Every write builds the row, decodes it
// against its one schema (records.ts) and only then writes it, stamped with this node's
// change sequence so the next flush carries it. Rows carried in from the changelog go
// through importRecord, which applies the spec's conflict rules (Seat Ownership § "A
// seat's memory follows it"):
//   - an append-only row (diary note, episode) that is already here keeps the local copy;
//   - a small mutable row (counterparty, onboarding marker, conversation) takes the
//     carried copy — a seat is held by one node at a time, so the changelog's latest value
//     is its current owner's;
//   - a row that collides under a different id (two episodes for one work key, written on
//     two nodes) is skipped, never an error: hydration runs inside acquisition, and one
//     duplicated episode must not make a seat unplaceable fleet-wide;
//   - a note's or an episode's vector is taken by mergeVector (vector-merge.ts), and only
//     beside its row.
import type { Database } from "bun:sqlite";
import { and, asc, desc, eq } from "drizzle-orm";
import { drizzle, type BunSQLiteDatabase } from "drizzle-orm/bun-sqlite";
import type { Clock } from "../clock.ts";
import {
  conversationId,
  counterpartyId,
  diaryId,
  mustDecode,
  type ConversationRow,
  type CounterpartyRow,
  type DiaryRow,
  type EpisodeRow,
  type MemoryRecord,
  type MemoryTable,
  type OnboardingRow,
  type SkillRow,
  type SkillVersionRow,
  kindOfVectorTable,
  VECTOR_TABLE,
  type VectorKind,
  type VectorRow,
  type VectorTable,
} from "./records.ts";
import * as t from "./schema.ts";
import { base64ToBytes, encodeVector } from "./vector-codec.ts";
import { mergeVector } from "./vector-merge.ts";
import { vectorParams, vectorRecordOf, vectorStatements, type VectorStatements } from "./vector-rows.ts";

/**
 * Diary notes a seat keeps. Reflection writes a note or two per turn; a busy seat runs a
 * few hundred turns a day, so 2,000 notes is a week or more of what it learned, which is
 * what recall and search are for — older notes are what the knowledge base is for. Every
 * node applies the cap to the seats it holds, on its own retention tick (src/duty/retention.ts
 * startNodeRetention → MemorySync.capDiaries → dropOldestDiary) — not in the maintenance duty, which runs on one node
 * while each holder, a leaf included, writes its own seats' notes. Between ticks a seat
 * may briefly keep more.
 */
export const DIARY_CAP = 2_000;

/** skipped_no_row: a carried vector whose note or episode is not here (see importVector). */
export type ImportOutcome = "inserted" | "kept_local" | "took_carried" | "skipped_collision" | "skipped_no_row";

export interface PendingRecord {
  seq: number;
  record: MemoryRecord;
}

export interface SearchHit {
  kind: "diary" | "episode";
  id: string;
  text: string;
}

export interface SeatMemoryView {
  diary: DiaryRow[];
  episodes: EpisodeRow[];
  counterparties: CounterpartyRow[];
  onboarding: OnboardingRow[];
  conversations: ConversationRow[];
  skills: SkillRow[];
  counts: Record<MemoryTable, number>;
}

type DiaryDb = typeof t.diary.$inferSelect;
type EpisodeDb = typeof t.episodes.$inferSelect;
type CounterpartyDb = typeof t.counterparties.$inferSelect;
type OnboardingDb = typeof t.onboarding.$inferSelect;
type ConversationDb = typeof t.conversations.$inferSelect;
type SkillDb = typeof t.skills.$inferSelect;
type SkillVersionDb = typeof t.skillVersions.$inferSelect;

const diaryOf = ({ seq: _s, ...r }: DiaryDb): DiaryRow => ({ ...r, source: r.source as DiaryRow["source"] });
const episodeOf = ({ seq: _s, ...r }: EpisodeDb): EpisodeRow => ({
  ...r,
  trigger_ids: JSON.parse(r.trigger_ids) as string[],
  work_items: JSON.parse(r.work_items) as string[],
});
const counterpartyOf = ({ seq: _s, ...r }: CounterpartyDb): CounterpartyRow => r;
const onboardingOf = ({ seq: _s, ...r }: OnboardingDb): OnboardingRow => r;
const conversationOf = ({ seq: _s, ...r }: ConversationDb): ConversationRow => ({ ...r, last_trigger_ids: JSON.parse(r.last_trigger_ids) as string[] });
const skillOf = ({ seq: _s, ...r }: SkillDb): SkillRow => ({ ...r, terms: JSON.parse(r.terms) as string[], state: r.state as SkillRow["state"], origin: r.origin as SkillRow["origin"] });
const skillVersionOf = ({ seq: _s, ...r }: SkillVersionDb): SkillVersionRow => ({ ...r, evidence: JSON.parse(r.evidence) as string[] });

export class MemoryStore {
  readonly db: BunSQLiteDatabase<Record<string, never>>;

  constructor(
    readonly sqlite: Database,
    private readonly clock: Clock,
  ) {
    sqlite.exec(t.MEMORY_DDL);
    t.upgradeMemoryVectors(sqlite);
    this.db = drizzle({ client: sqlite });
    this.sql = statements(sqlite);
    this.vsql = vectorStatements(sqlite);
  }

  /** The next change sequence (one counter per node, only ever increasing). */
  private nextSeq(): number {
    const row = this.sqlite
      .query<{ seq: number }, []>(
        "INSERT INTO memory_counter (k, seq) VALUES ('seq', 1) ON CONFLICT (k) DO UPDATE SET seq = seq + 1 RETURNING seq",
      )
      .get();
    return row!.seq;
  }

  // ---- writes (each decodes first) ---------------------------------------------------------
  // The hot paths (a turn's rows, a flush, a hydration's imports) run on cached raw
  // statements over the drizzle tables' columns: drizzle builds its SQL on every call, which
  // measured 0.3 ms an insert against 0.05 ms for a cached statement.

  private readonly sql: Statements;
  private readonly vsql: VectorStatements;

  private insertDiary(row: DiaryRow, seq: number): boolean {
    return this.sql.diaryInsert.run(bind({ ...row, seq })).changes === 1;
  }

  private insertEpisode(row: EpisodeRow, seq: number): boolean {
    return this.sql.episodeInsert.run(bind({ ...row, trigger_ids: JSON.stringify(row.trigger_ids), work_items: JSON.stringify(row.work_items), seq })).changes === 1;
  }

  private putConversation(row: ConversationRow, seq: number): void {
    this.sql.conversationPut.run(bind({ ...row, last_trigger_ids: JSON.stringify(row.last_trigger_ids), seq }));
  }

  /** A diary note. Byte-identical content for one seat is one row: false when it was there. */
  writeDiary(input: Omit<DiaryRow, "id" | "created_at"> & { created_at?: number }): { id: string; inserted: boolean } {
    const row = mustDecode({ table: "diary", row: { ...input, id: diaryId(input.handle, input.content), created_at: input.created_at ?? this.clock.now() } }).row as DiaryRow;
    return this.sqlite.transaction(() => ({ id: row.id, inserted: this.insertDiary(row, this.nextSeq()) }))();
  }

  /** An episode, keyed on the work: false when (handle, work_key) or the id was there. */
  writeEpisode(input: EpisodeRow): boolean {
    const row = mustDecode({ table: "episodes", row: { ...input, work_key: input.work_key === "" ? null : input.work_key } }).row as EpisodeRow;
    return this.sqlite.transaction(() => this.insertEpisode(row, this.nextSeq()))();
  }

  /**
   * One more interaction with a counterparty, counted once per unit of work: not when it
   * repeats the last counted work key, nor when the seat already has an episode for this
   * work key — a re-run of work whose completion was never recorded, here or carried from a
   * holder that died after its rows went out. A turn touches the counterparty before it
   * writes its own episode (TurnMemory.turnEnded). A null key (an unkeyed turn) always counts.
   */
  touchCounterparty(handle: string, counterparty: string, work_key: string | null, at = this.clock.now()): CounterpartyRow {
    return this.sqlite.transaction(() => {
      const id = counterpartyId(handle, counterparty);
      const cur = this.sql.counterpartyGet.get({ $handle: handle, $id: id });
      const repeat = work_key !== null && (cur?.last_work_key === work_key || this.sql.episodeByWork.get({ $handle: handle, $work_key: work_key }) !== null);
      return this.putCounterparty({
        id,
        handle,
        counterparty,
        interactions: (cur?.interactions ?? 0) + (repeat ? 0 : 1),
        last_work_key: work_key ?? cur?.last_work_key ?? null,
        last_seen: at,
        note: cur?.note ?? "",
        updated_at: at,
      });
    })();
  }

  /** The reflection's note on a counterparty (creates the profile when there is none). */
  setCounterpartyNote(handle: string, counterparty: string, note: string, at = this.clock.now()): CounterpartyRow {
    return this.sqlite.transaction(() => {
      const id = counterpartyId(handle, counterparty);
      const cur = this.sql.counterpartyGet.get({ $handle: handle, $id: id });
      const next: CounterpartyRow = cur ? { ...counterpartyOf(cur), note, updated_at: at } : { id, handle, counterparty, interactions: 0, last_work_key: null, last_seen: at, note, updated_at: at };
      return this.putCounterparty(next);
    })();
  }

  private putCounterparty(input: CounterpartyRow): CounterpartyRow {
    const row = mustDecode({ table: "counterparties", row: input }).row as CounterpartyRow;
    this.sql.counterpartyPut.run(bind({ ...row, seq: this.nextSeq() }));
    return row;
  }

  /** An onboarding step done (a marker: once per seat; the fleet-wide claim is onboarding.ts's). */
  markOnboarding(handle: string, step: string, detail: string, at = this.clock.now()): OnboardingRow {
    const row = mustDecode({ table: "onboarding", row: { id: step, handle, done_at: at, detail } }).row as OnboardingRow;
    return this.sqlite.transaction(() => {
      this.sql.onboardingPut.run(bind({ ...row, seq: this.nextSeq() }));
      return row;
    })();
  }

  hasOnboarding(handle: string, step: string): boolean {
    return this.sql.onboardingGet.get({ $handle: handle, $id: step }) !== null;
  }

  /** The conversation ledger: one more turn of the seat's in this conversation. */
  touchConversation(handle: string, conversation: string, turn_id: string, trigger_ids: string[], at = this.clock.now()): ConversationRow {
    return this.sqlite.transaction(() => {
      const id = conversationId(handle, conversation);
      const cur = this.sql.conversationGet.get({ $handle: handle, $id: id });
      const row = mustDecode({
        table: "conversations",
        row: { id, handle, conversation, turns: (cur?.turns ?? 0) + 1, last_turn_id: turn_id, last_trigger_ids: trigger_ids, last_at: at },
      }).row as ConversationRow;
      this.putConversation(row, this.nextSeq());
      return row;
    })();
  }

  // ---- vectors (set by the holder after the row's insert; they travel like a new row) ------

  /**
   * Sets vectors on the seat's notes and episodes, each decoded as its record and stamped
   * with a fresh change sequence, so the next flush carries it (Seat Ownership: "Setting the
   * vector stamps the row with a fresh change sequence"). Replaces one of another model or width.
   */
  setVectors(handle: string, model: string, rows: readonly { kind: VectorKind; id: string; vector: Float32Array }[], at = this.clock.now()): void {
    const decoded = rows.map((r) => ({
      kind: r.kind,
      row: mustDecode({ table: VECTOR_TABLE[r.kind], row: { id: r.id, handle, model, dims: r.vector.length, embedded_at: at, vector: encodeVector(r.vector) } }).row as VectorRow,
    }));
    this.sqlite.transaction(() => {
      for (const d of decoded) this.vsql.put.run(vectorParams(d.kind, d.row, base64ToBytes(d.row.vector)!, this.nextSeq()));
    })();
  }

  /** A carried vector: kept only beside its row, and taken over the local one by mergeVector. */
  private importVector(table: VectorTable, row: VectorRow): ImportOutcome {
    const kind = kindOfVectorTable(table);
    const key = { $handle: row.handle, $id: row.id };
    const rowHere = kind === "diary" ? this.vsql.diaryHas.get(key) : this.vsql.episodeHas.get(key);
    if (rowHere === null) return "skipped_no_row";
    const local = this.vsql.stamp.get({ ...key, $kind: kind });
    if (mergeVector(local, row) === "keep_local") return "kept_local";
    // seq 0: carried in, so this node's next flush does not carry it again.
    this.vsql.put.run(vectorParams(kind, row, base64ToBytes(row.vector)!, 0));
    return local === null ? "inserted" : "took_carried";
  }

  // ---- skills (the learning duty's rows, written by the seat's holder) ----------------------

  /** A skill version: append-only, so one already here (same id) stands; false when it was. */
  writeSkillVersion(input: SkillVersionRow): boolean {
    const row = mustDecode({ table: "skill_versions", row: input }).row as SkillVersionRow;
    return this.sqlite.transaction(() => this.insertSkillVersion(row, this.nextSeq()))();
  }

  /** A skill's mutable row, replaced whole (the caller merged it: memory/skills.ts mergeSkill). */
  putSkill(input: SkillRow): SkillRow {
    const row = mustDecode({ table: "skills", row: input }).row as SkillRow;
    this.sqlite.transaction(() => this.writeSkillRow(row, this.nextSeq()))();
    return row;
  }

  private insertSkillVersion(row: SkillVersionRow, seq: number): boolean {
    return this.sql.skillVersionInsert.run(bind({ ...row, evidence: JSON.stringify(row.evidence), seq })).changes === 1;
  }

  private writeSkillRow(row: SkillRow, seq: number): void {
    this.sql.skillPut.run(bind({ ...row, terms: JSON.stringify(row.terms), seq }));
  }

  skill(handle: string, id: string): SkillRow | null {
    const r = this.sql.skillGet.get({ $handle: handle, $id: id });
    return r ? skillOf(r) : null;
  }

  /** Every skill of the seat, any state, by id (a seat keeps at most MAX_SKILLS_PER_SEAT live ones). */
  skills(handle: string): SkillRow[] {
    return this.db.select().from(t.skills).where(eq(t.skills.handle, handle)).orderBy(asc(t.skills.id)).all().map(skillOf);
  }

  /** The skills a prompt may carry (active or stale), with their current bodies: one query,
   *  at most MAX_SKILLS_PER_SEAT rows however many archived ones the seat keeps. */
  liveSkills(handle: string): { skill: SkillRow; body: string }[] {
    return this.sql.liveSkills.all({ $handle: handle }).map(({ body, ...r }) => ({ skill: skillOf(r), body }));
  }

  skillVersion(handle: string, id: string): SkillVersionRow | null {
    const r = this.db.select().from(t.skillVersions).where(and(eq(t.skillVersions.handle, handle), eq(t.skillVersions.id, id))).get();
    return r ? skillVersionOf(r) : null;
  }

  /** The prompt carried these skills: one more use each (a mutable row: a fresh seq). */
  markSkillsUsed(handle: string, ids: readonly string[], at = this.clock.now()): void {
    this.sqlite.transaction(() => {
      for (const id of ids) {
        const cur = this.skill(handle, id);
        if (cur) this.writeSkillRow({ ...cur, uses: cur.uses + 1, last_used_at: at, updated_at: at }, this.nextSeq());
      }
    })();
  }

  /**
   * Episode compaction (the learning duty's decision, applied by the holder): drops the
   * seat's episodes created before `cutoff`; returns how many went. Deletes are not
   * replicated: a later hydration may bring them back, and the next pass drops them again.
   */
  dropEpisodesBefore(handle: string, cutoff: number): number {
    return this.sqlite.query("DELETE FROM memory_episodes WHERE handle = ? AND created_at < ?").run(handle, cutoff).changes;
  }

  /**
   * Drops the skill's versions beyond the newest `keep`, never the one the skill carries now;
   * returns how many went. Not replicated (deletes never are): a hydration may bring them
   * back, and the next learning wake for the seat drops them again.
   */
  dropOldSkillVersions(handle: string, skill_id: string, current: string, keep: number): number {
    return this.sqlite
      .query(
        "DELETE FROM memory_skill_versions WHERE rowid IN (SELECT rowid FROM memory_skill_versions WHERE handle = ? AND skill_id = ? AND id != ? ORDER BY created_at DESC, id DESC LIMIT -1 OFFSET ?)",
      )
      .run(handle, skill_id, current, Math.max(0, keep - 1)).changes;
  }

  /** Every episode of the seat, oldest first, bounded (the learning duty's local read). */
  allEpisodes(handle: string, limit = MAX_READ_ROWS): EpisodeRow[] {
    return this.db.select().from(t.episodes).where(eq(t.episodes.handle, handle)).orderBy(asc(t.episodes.created_at), asc(t.episodes.id)).limit(Math.max(1, Math.floor(limit))).all().map(episodeOf);
  }

  // ---- the changelog's side ----------------------------------------------------------------

  /** The seat's rows written past the last flush, oldest first. */
  pending(handle: string): PendingRecord[] {
    const q = { $handle: handle, $after: this.publishedSeq(handle) };
    const out: PendingRecord[] = [];
    for (const r of this.sql.pendingDiary.all(q)) out.push({ seq: r.seq, record: { table: "diary", row: diaryOf(r) } });
    for (const r of this.sql.pendingEpisodes.all(q)) out.push({ seq: r.seq, record: { table: "episodes", row: episodeOf(r) } });
    for (const r of this.sql.pendingCounterparties.all(q)) out.push({ seq: r.seq, record: { table: "counterparties", row: counterpartyOf(r) } });
    for (const r of this.sql.pendingOnboarding.all(q)) out.push({ seq: r.seq, record: { table: "onboarding", row: onboardingOf(r) } });
    for (const r of this.sql.pendingConversations.all(q)) out.push({ seq: r.seq, record: { table: "conversations", row: conversationOf(r) } });
    for (const r of this.sql.pendingSkills.all(q)) out.push({ seq: r.seq, record: { table: "skills", row: skillOf(r) } });
    for (const r of this.sql.pendingSkillVersions.all(q)) out.push({ seq: r.seq, record: { table: "skill_versions", row: skillVersionOf(r) } });
    for (const r of this.vsql.pending.all(q)) out.push({ seq: r.seq, record: vectorRecordOf(r) });
    return out.sort((a, b) => a.seq - b.seq);
  }

  publishedSeq(handle: string): number {
    return this.sql.publishedGet.get({ $handle: handle })?.seq ?? 0;
  }

  /** A flush carried the seat's rows up to `seq`; never moves backwards. */
  markPublished(handle: string, seq: number): void {
    this.sql.publishedPut.run({ $handle: handle, $seq: seq });
  }

  /** A row carried in from the changelog, under the conflict rules (see the header). */
  importRecord(value: unknown): ImportOutcome {
    return this.importDecoded(mustDecode(value));
  }

  /** importRecord for a record a replay already decoded (Replay.records are): no second parse. */
  importDecoded(rec: MemoryRecord): ImportOutcome {
    // A hydration imports inside its own one transaction; a savepoint per row would cost more
    // than the row.
    if (this.sqlite.inTransaction) return this.importIn(rec);
    return this.sqlite.transaction(() => this.importIn(rec))();
  }

  private importIn(rec: MemoryRecord): ImportOutcome {
    return ((): ImportOutcome => {
      const key = { $handle: rec.row.handle, $id: rec.row.id };
      switch (rec.table) {
        case "diary":
          return this.insertDiary(rec.row, 0) ? "inserted" : "kept_local";
        case "episodes":
          if (this.sql.episodeById.get(key)) return "kept_local";
          // Not there under this id: a miss now is the (handle, work_key) index, a collision.
          return this.insertEpisode(rec.row, 0) ? "inserted" : "skipped_collision";
        case "counterparties": {
          const had = this.sql.counterpartyGet.get(key) !== null;
          this.sql.counterpartyPut.run(bind({ ...rec.row, seq: 0 }));
          return had ? "took_carried" : "inserted";
        }
        case "onboarding": {
          const had = this.sql.onboardingGet.get(key) !== null;
          this.sql.onboardingPut.run(bind({ ...rec.row, seq: 0 }));
          return had ? "took_carried" : "inserted";
        }
        case "conversations": {
          const had = this.sql.conversationGet.get(key) !== null;
          this.putConversation(rec.row, 0);
          return had ? "took_carried" : "inserted";
        }
        case "skills": {
          const had = this.sql.skillGet.get(key) !== null;
          this.writeSkillRow(rec.row, 0);
          return had ? "took_carried" : "inserted";
        }
        case "skill_versions":
          return this.insertSkillVersion(rec.row, 0) ? "inserted" : "kept_local";
        case "diary_vectors":
        case "episode_vectors":
          return this.importVector(rec.table, rec.row);
      }
    })();
  }

  // ---- reads ---------------------------------------------------------------------------------

  recentDiary(handle: string, limit: number): DiaryRow[] {
    return this.db.select().from(t.diary).where(eq(t.diary.handle, handle)).orderBy(desc(t.diary.created_at), desc(t.diary.seq)).limit(clampLimit(limit)).all().map(diaryOf);
  }

  recentEpisodes(handle: string, limit: number): EpisodeRow[] {
    return this.db.select().from(t.episodes).where(eq(t.episodes.handle, handle)).orderBy(desc(t.episodes.created_at)).limit(clampLimit(limit)).all().map(episodeOf);
  }

  /**
   * The seat's episodes that touched one work item (a tracker key such as "ENG-1": the
   * episode's work_items, which lists the items its tools named and the one that woke it),
   * newest first — whichever conversation each came through. Not the work_key column: that
   * is the completion ledger's hash of the turn's event ids, one per unit of work.
   */
  episodesForWorkItem(handle: string, item: string, limit: number): EpisodeRow[] {
    return this.sql.episodesForItem.all({ $handle: handle, $item: item, $n: clampLimit(limit) }).map(episodeOf);
  }

  /** Episodes in one conversation, newest first. */
  episodesInConversation(handle: string, conversation: string, limit: number): EpisodeRow[] {
    return this.db
      .select()
      .from(t.episodes)
      .where(and(eq(t.episodes.handle, handle), eq(t.episodes.conversation, conversation)))
      .orderBy(desc(t.episodes.created_at))
      .limit(clampLimit(limit))
      .all()
      .map(episodeOf);
  }

  counterparty(handle: string, counterparty: string): CounterpartyRow | null {
    const r = this.db.select().from(t.counterparties).where(and(eq(t.counterparties.handle, handle), eq(t.counterparties.id, counterpartyId(handle, counterparty)))).get();
    return r ? counterpartyOf(r) : null;
  }

  /** FTS over the seat's own diary and episodes; the query's words are matched as terms. */
  search(handle: string, query: string, limit: number): SearchHit[] {
    return this.searchRanked(handle, query, limit).map(({ bm25: _r, ...hit }) => hit);
  }

  /** search() with each hit's bm25 (lower is better): the lexical half of a blended search. */
  searchRanked(handle: string, query: string, limit: number): (SearchHit & { bm25: number })[] {
    const terms = query.match(/[\p{L}\p{N}_]+/gu) ?? [];
    if (terms.length === 0) return [];
    // Each word quoted: the model's text is data, never FTS syntax (NEAR, *, columns).
    const match = terms.slice(0, 16).map((w) => `"${w}"`).join(" OR ");
    return this.sqlite
      .query<{ kind: "diary" | "episode"; id: string; body: string; bm25: number }, { $h: string; $m: string; $n: number }>(
        "SELECT kind, id, body, rank AS bm25 FROM memory_fts WHERE memory_fts MATCH $m AND handle = $h ORDER BY rank LIMIT $n",
      )
      .all({ $h: handle, $m: match, $n: clampLimit(limit) })
      .map((r) => ({ kind: r.kind, id: r.id, text: r.body, bm25: r.bm25 }));
  }

  /** The overview's two facts, on cached statements (it asks them of every seat at once). */
  newestNote(handle: string): string | null {
    return this.sqlite.query<{ content: string }, [string]>("SELECT content FROM memory_diary WHERE handle = ? ORDER BY created_at DESC, seq DESC LIMIT 1").get(handle)?.content ?? null;
  }

  newestEpisodeAt(handle: string): number | null {
    return this.sqlite.query<{ at: number | null }, [string]>("SELECT max(created_at) AS at FROM memory_episodes WHERE handle = ?").get(handle)?.at ?? null;
  }

  counts(handle: string): Record<MemoryTable, number> {
    const n = (table: string) => this.sqlite.query<{ n: number }, [string]>(`SELECT count(*) AS n FROM ${table} WHERE handle = ?`).get(handle)!.n;
    return {
      diary: n("memory_diary"),
      episodes: n("memory_episodes"),
      counterparties: n("memory_counterparties"),
      onboarding: n("memory_onboarding"),
      conversations: n("memory_conversations"),
      skills: n("memory_skills"),
      skill_versions: n("memory_skill_versions"),
      diary_vectors: this.sqlite.query<{ n: number }, [string]>("SELECT count(*) AS n FROM memory_vectors WHERE handle = ? AND kind = 'diary'").get(handle)!.n,
      episode_vectors: this.sqlite.query<{ n: number }, [string]>("SELECT count(*) AS n FROM memory_vectors WHERE handle = ? AND kind = 'episode'").get(handle)!.n,
    };
  }

  /** What a memory screen shows for a seat: the newest of each kind, and the counts. */
  view(handle: string, limit: number): SeatMemoryView {
    return {
      diary: this.recentDiary(handle, limit),
      episodes: this.recentEpisodes(handle, limit),
      counterparties: this.db.select().from(t.counterparties).where(eq(t.counterparties.handle, handle)).orderBy(desc(t.counterparties.last_seen)).limit(clampLimit(limit)).all().map(counterpartyOf),
      onboarding: this.db.select().from(t.onboarding).where(eq(t.onboarding.handle, handle)).orderBy(asc(t.onboarding.done_at)).all().map(onboardingOf),
      conversations: this.db.select().from(t.conversations).where(eq(t.conversations.handle, handle)).orderBy(desc(t.conversations.last_at)).limit(clampLimit(limit)).all().map(conversationOf),
      skills: this.skills(handle).slice(0, clampLimit(limit)),
      counts: this.counts(handle),
    };
  }

  /** Every row the seat has here, as records (tests, simulations, the conformance suite). */
  records(handle: string): MemoryRecord[] {
    const out: MemoryRecord[] = [];
    for (const r of this.db.select().from(t.diary).where(eq(t.diary.handle, handle)).all()) out.push({ table: "diary", row: diaryOf(r) });
    for (const r of this.db.select().from(t.episodes).where(eq(t.episodes.handle, handle)).all()) out.push({ table: "episodes", row: episodeOf(r) });
    for (const r of this.db.select().from(t.counterparties).where(eq(t.counterparties.handle, handle)).all()) out.push({ table: "counterparties", row: counterpartyOf(r) });
    for (const r of this.db.select().from(t.onboarding).where(eq(t.onboarding.handle, handle)).all()) out.push({ table: "onboarding", row: onboardingOf(r) });
    for (const r of this.db.select().from(t.conversations).where(eq(t.conversations.handle, handle)).all()) out.push({ table: "conversations", row: conversationOf(r) });
    for (const r of this.db.select().from(t.skills).where(eq(t.skills.handle, handle)).all()) out.push({ table: "skills", row: skillOf(r) });
    for (const r of this.db.select().from(t.skillVersions).where(eq(t.skillVersions.handle, handle)).all()) out.push({ table: "skill_versions", row: skillVersionOf(r) });
    for (const r of this.vsql.all.all({ $handle: handle })) out.push(vectorRecordOf(r));
    return out;
  }

  /**
   * Drops the seat's oldest diary notes beyond `cap`; returns how many went. Deletes are
   * not replicated (spec): a later hydration may bring dropped notes back, and the next
   * pass drops them again by the same rule. The one implementation of the cap: MemorySync.capDiaries
   * calls it for each seat this node holds, on the node's retention tick.
   */
  dropOldestDiary(handle: string, cap = DIARY_CAP): number {
    const res = this.sqlite
      .query(
        "DELETE FROM memory_diary WHERE rowid IN (SELECT rowid FROM memory_diary WHERE handle = ? ORDER BY created_at DESC, seq DESC, rowid DESC LIMIT -1 OFFSET ?)",
      )
      .run(handle, Math.max(0, cap));
    return res.changes;
  }

  /** Handles with any memory here. */
  handles(): string[] {
    return this.sqlite
      .query<{ handle: string }, []>(
        "SELECT handle FROM memory_diary UNION SELECT handle FROM memory_episodes UNION SELECT handle FROM memory_counterparties UNION SELECT handle FROM memory_onboarding UNION SELECT handle FROM memory_conversations UNION SELECT handle FROM memory_skills UNION SELECT handle FROM memory_skill_versions",
      )
      .all()
      .map((r) => r.handle);
  }
}

function statements(sqlite: Database) {
  return {
    diaryInsert: sqlite.query(
      "INSERT INTO memory_diary (handle, id, content, source, turn_id, work_key, created_at, seq) VALUES ($handle, $id, $content, $source, $turn_id, $work_key, $created_at, $seq) ON CONFLICT DO NOTHING",
    ),
    episodeInsert: sqlite.query(
      "INSERT INTO memory_episodes (handle, id, work_key, turn_id, trigger_ids, conversation, counterparty, outcome, summary, work_items, created_at, seq) VALUES ($handle, $id, $work_key, $turn_id, $trigger_ids, $conversation, $counterparty, $outcome, $summary, $work_items, $created_at, $seq) ON CONFLICT DO NOTHING",
    ),
    episodeById: sqlite.query<{ id: string }, { $handle: string; $id: string }>("SELECT id FROM memory_episodes WHERE handle = $handle AND id = $id"),
    episodeByWork: sqlite.query<{ id: string }, { $handle: string; $work_key: string }>("SELECT id FROM memory_episodes WHERE handle = $handle AND work_key = $work_key"),
    // work_items is a JSON array (at most MAX_WORK_ITEMS): json_each over the seat's rows.
    episodesForItem: sqlite.query<EpisodeDb, { $handle: string; $item: string; $n: number }>(
      "SELECT * FROM memory_episodes WHERE handle = $handle AND EXISTS (SELECT 1 FROM json_each(work_items) WHERE value = $item) ORDER BY created_at DESC, seq DESC LIMIT $n",
    ),
    counterpartyGet: sqlite.query<CounterpartyDb, { $handle: string; $id: string }>("SELECT * FROM memory_counterparties WHERE handle = $handle AND id = $id"),
    counterpartyPut: sqlite.query(
      `INSERT INTO memory_counterparties (handle, id, counterparty, interactions, last_work_key, last_seen, note, updated_at, seq)
       VALUES ($handle, $id, $counterparty, $interactions, $last_work_key, $last_seen, $note, $updated_at, $seq)
       ON CONFLICT (handle, id) DO UPDATE SET counterparty = excluded.counterparty, interactions = excluded.interactions, last_work_key = excluded.last_work_key,
         last_seen = excluded.last_seen, note = excluded.note, updated_at = excluded.updated_at, seq = excluded.seq`,
    ),
    onboardingGet: sqlite.query<{ id: string }, { $handle: string; $id: string }>("SELECT id FROM memory_onboarding WHERE handle = $handle AND id = $id"),
    onboardingPut: sqlite.query(
      "INSERT INTO memory_onboarding (handle, id, done_at, detail, seq) VALUES ($handle, $id, $done_at, $detail, $seq) ON CONFLICT (handle, id) DO UPDATE SET done_at = excluded.done_at, detail = excluded.detail, seq = excluded.seq",
    ),
    conversationGet: sqlite.query<ConversationDb, { $handle: string; $id: string }>("SELECT * FROM memory_conversations WHERE handle = $handle AND id = $id"),
    conversationPut: sqlite.query(
      `INSERT INTO memory_conversations (handle, id, conversation, turns, last_turn_id, last_trigger_ids, last_at, seq)
       VALUES ($handle, $id, $conversation, $turns, $last_turn_id, $last_trigger_ids, $last_at, $seq)
       ON CONFLICT (handle, id) DO UPDATE SET conversation = excluded.conversation, turns = excluded.turns, last_turn_id = excluded.last_turn_id,
         last_trigger_ids = excluded.last_trigger_ids, last_at = excluded.last_at, seq = excluded.seq`,
    ),
    pendingDiary: sqlite.query<DiaryDb, { $handle: string; $after: number }>("SELECT * FROM memory_diary WHERE handle = $handle AND seq > $after"),
    pendingEpisodes: sqlite.query<EpisodeDb, { $handle: string; $after: number }>("SELECT * FROM memory_episodes WHERE handle = $handle AND seq > $after"),
    pendingCounterparties: sqlite.query<CounterpartyDb, { $handle: string; $after: number }>("SELECT * FROM memory_counterparties WHERE handle = $handle AND seq > $after"),
    pendingOnboarding: sqlite.query<OnboardingDb, { $handle: string; $after: number }>("SELECT * FROM memory_onboarding WHERE handle = $handle AND seq > $after"),
    pendingConversations: sqlite.query<ConversationDb, { $handle: string; $after: number }>("SELECT * FROM memory_conversations WHERE handle = $handle AND seq > $after"),
    skillGet: sqlite.query<SkillDb, { $handle: string; $id: string }>("SELECT * FROM memory_skills WHERE handle = $handle AND id = $id"),
    skillPut: sqlite.query(
      `INSERT INTO memory_skills (handle, id, terms, name, state, origin, promoted_from, version, uses, last_used_at, state_at, updated_at, seq)
       VALUES ($handle, $id, $terms, $name, $state, $origin, $promoted_from, $version, $uses, $last_used_at, $state_at, $updated_at, $seq)
       ON CONFLICT (handle, id) DO UPDATE SET terms = excluded.terms, name = excluded.name, state = excluded.state, origin = excluded.origin,
         promoted_from = excluded.promoted_from, version = excluded.version, uses = excluded.uses, last_used_at = excluded.last_used_at,
         state_at = excluded.state_at, updated_at = excluded.updated_at, seq = excluded.seq`,
    ),
    skillVersionInsert: sqlite.query(
      "INSERT INTO memory_skill_versions (handle, id, skill_id, body, evidence, created_at, seq) VALUES ($handle, $id, $skill_id, $body, $evidence, $created_at, $seq) ON CONFLICT DO NOTHING",
    ),
    liveSkills: sqlite.query<SkillDb & { body: string }, { $handle: string }>(
      "SELECT s.*, v.body AS body FROM memory_skills s JOIN memory_skill_versions v ON v.handle = s.handle AND v.id = s.version WHERE s.handle = $handle AND s.state != 'archived' ORDER BY s.id",
    ),
    pendingSkills: sqlite.query<SkillDb, { $handle: string; $after: number }>("SELECT * FROM memory_skills WHERE handle = $handle AND seq > $after"),
    pendingSkillVersions: sqlite.query<SkillVersionDb, { $handle: string; $after: number }>("SELECT * FROM memory_skill_versions WHERE handle = $handle AND seq > $after"),
    publishedGet: sqlite.query<{ seq: number }, { $handle: string }>("SELECT seq FROM memory_published WHERE handle = $handle"),
    publishedPut: sqlite.query("INSERT INTO memory_published (handle, seq) VALUES ($handle, $seq) ON CONFLICT (handle) DO UPDATE SET seq = max(seq, excluded.seq)"),
    };
}
type Statements = ReturnType<typeof statements>;

/** Named parameters for a cached statement: `{a: 1}` → `{$a: 1}`. */
function bind(o: Record<string, unknown>): Record<string, string | number | null> {
  const out: Record<string, string | number | null> = {};
  for (const [k, v] of Object.entries(o)) out[`$${k}`] = v as string | number | null;
  return out;
}

/** Any one read returns at most this many rows: a screen pages, a prompt takes a few. */
export const MAX_READ_ROWS = 500;
function clampLimit(n: number): number {
  return Math.max(1, Math.min(Math.floor(n), MAX_READ_ROWS));
}

