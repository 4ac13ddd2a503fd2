// ONE conformance suite for the memory changelog: what a seat's holder writes and flushes is
// exactly what the next holder hydrates, under the spec's conflict rules. Run against every
// backend by a *.test.ts per backend (JetStream R1 and R3, the in-memory twin). Real SQLite
// files for both stores: a node's copy is a node.db.
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeClock, systemClock } from "../../src/clock.ts";
import { memoryLogger, silentLogger, type Logger } from "../../src/log.ts";
import type { Changelog } from "../../src/memory/changelog.ts";
import { memorySubject } from "../../src/memory/changelog.ts";
import { diaryId, encodeRecord, skillId, skillVersionId, type EpisodeRow, type MemoryRecord, type SkillRow, type SkillVersionRow } from "../../src/memory/records.ts";
import { encodeVector } from "../../src/memory/vector-codec.ts";
import { MemoryStore } from "../../src/memory/store.ts";
import { MemorySync } from "../../src/memory/sync.ts";

export interface ChangelogHarness {
  /** Two handles on one changelog: two nodes of one fleet. */
  a: Changelog;
  b: Changelog;
  /** Puts raw bytes on a subject (a foreign or corrupt row). */
  putRaw(subject: string, data: Uint8Array): Promise<void>;
  teardown(): Promise<void>;
}

function sorted(rs: MemoryRecord[]): string[] {
  return rs.map((r) => JSON.stringify(r)).sort();
}

function episode(handle: string, id: string, work_key: string | null, summary = `did ${id}`): EpisodeRow {
  return { id, handle, work_key, turn_id: id, trigger_ids: [`ev-${id}`], conversation: "conv-1", counterparty: "founder", outcome: "completed", summary, work_items: ["ENG-1"], created_at: 1_000 };
}

const vec = (...xs: number[]) => Float32Array.from(xs);
/** The seat's vectors here, as `kind/id model dims@embedded_at [floats]`. */
function vectorsOf(store: MemoryStore, handle: string): string[] {
  return store
    .records(handle)
    .filter((r) => r.table === "diary_vectors" || r.table === "episode_vectors")
    .map((r) => r.row as { id: string; model: string; dims: number; embedded_at: number; vector: string })
    .map((v) => `${v.id} ${v.model} ${v.dims}@${v.embedded_at} ${v.vector}`)
    .sort();
}

function skill(handle: string, terms: string[], body: string, over: Partial<SkillRow> = {}): { skill: SkillRow; version: SkillVersionRow } {
  const id = skillId(handle, terms);
  const version: SkillVersionRow = { id: skillVersionId(id, body), handle, skill_id: id, body, evidence: ["t1"], created_at: 1_000 };
  const row: SkillRow = { id, handle, terms, name: terms.join(" "), state: "active", origin: "clustered", promoted_from: null, version: version.id, uses: 0, last_used_at: null, state_at: 1_000, updated_at: 1_000, ...over };
  return { skill: row, version };
}

export function changelogConformance(name: string, make: () => Promise<ChangelogHarness>): void {
  describe(`memory changelog conformance: ${name}`, () => {
    let h: ChangelogHarness;
    const dir = mkdtempSync(join(tmpdir(), "crewlet-changelog-"));
    const clock = new FakeClock(1_700_000_000_000);
    let n = 0;
    /** A node: its own node.db, its own sync over one of the two changelog handles. */
    function node(which: "a" | "b", log: Logger = silentLogger) {
      n += 1;
      const db = new Database(join(dir, `node-${n}.db`), { create: true, strict: true });
      db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"); // as the node opens node.db
      const store = new MemoryStore(db, clock);
      // The sync's waits are real (a replay refused during a leader election is retried after
      // a real pause): on the fake clock a retry would sleep until the test timed out.
      const sync = new MemorySync({ store, changelog: which === "a" ? h.a : h.b, clock: systemClock, log });
      return { store, sync };
    }
    // Seat handles are unique per test: the changelog is shared across the suite.
    let seats = 0;
    const seat = () => `seat${++seats}x${Date.now() % 100_000}`;

    beforeAll(async () => {
      h = await make();
    });
    afterAll(async () => {
      await h.teardown();
      rmSync(dir, { recursive: true, force: true });
    });

    test("hydration replays exactly what was written and flushed, every table", async () => {
      const s = seat();
      const A = node("a");
      A.store.writeDiary({ handle: s, content: "the founder prefers short answers", source: "note", turn_id: "t1", work_key: null });
      A.store.writeDiary({ handle: s, content: "ENG-1 is blocked on the motor supplier", source: "reflection", turn_id: "t1", work_key: "wk-1" });
      A.store.writeEpisode(episode(s, "t1", "wk-1"));
      A.store.writeEpisode(episode(s, "t2", null));
      A.store.touchCounterparty(s, "founder", "wk-1");
      A.store.setCounterpartyNote(s, "founder", "asks for plans, likes bullet points");
      A.store.markOnboarding(s, "unit-knowledge", "read the Engineering space");
      A.store.touchConversation(s, "conv-1", "t1", ["ev-t1"]);
      const k = skill(s, ["invoice", "refund"], "Refunds: check the invoice first.");
      A.store.writeSkillVersion(k.version);
      A.store.putSkill(k.skill);
      A.store.setVectors(s, "tiny", [
        { kind: "diary", id: diaryId(s, "the founder prefers short answers"), vector: vec(0.25, -1, 3) },
        { kind: "episode", id: "t1", vector: vec(1, 0, 0) },
      ]);
      expect(await A.sync.flush(s)).toBeGreaterThan(0);
      expect(await A.sync.flush(s)).toBe(0); // nothing new: nothing published twice

      const B = node("b");
      const report = await B.sync.hydrate(s);
      expect(sorted(B.store.records(s))).toEqual(sorted(A.store.records(s)));
      expect(report.outcomes.inserted).toBe(A.store.records(s).length);
      expect(B.sync.state(s)).toBe("ready");
    });

    test("a seat with no memory hydrates to nothing; other seats' rows never come along", async () => {
      const s1 = seat();
      const s2 = seat();
      const A = node("a");
      A.store.writeDiary({ handle: s1, content: "mine", source: "note", turn_id: null, work_key: null });
      await A.sync.flush(s1);
      const B = node("b");
      expect((await B.sync.hydrate(s2)).rows).toBe(0);
      expect(B.store.records(s2)).toEqual([]);
      await B.sync.hydrate(s1);
      expect(B.store.handles()).toEqual([s1]);
    });

    test("a mutable row is one subject: the newest value is what travels", async () => {
      const s = seat();
      const A = node("a");
      for (let i = 1; i <= 5; i++) {
        A.store.touchCounterparty(s, "founder", `wk-${i}`);
        await A.sync.flush(s);
      }
      A.store.setCounterpartyNote(s, "founder", "five pieces of work so far");
      await A.sync.flush(s);
      const B = node("b");
      const r = await B.sync.hydrate(s);
      expect(r.rows).toBe(1);
      expect(B.store.counterparty(s, "founder")).toMatchObject({ interactions: 5, last_work_key: "wk-5", note: "five pieces of work so far" });
    });

    test("conflict rules: append-only keeps local, mutable takes carried, a work-key collision is skipped", async () => {
      const s = seat();
      const A = node("a");
      A.store.writeEpisode(episode(s, "t-a", "wk-same", "A's account"));
      A.store.writeEpisode(episode(s, "t-shared", "wk-2", "A's words"));
      A.store.touchCounterparty(s, "founder", "wk-1");
      A.store.setCounterpartyNote(s, "founder", "carried note");
      await A.sync.flush(s);

      const B = node("b");
      // B already has: the same work key under another id (a re-run on another node), the
      // same episode id with other words (cannot happen honestly; local stands), and an
      // older profile.
      B.store.writeEpisode(episode(s, "t-b", "wk-same", "B's account"));
      B.store.importRecord({ table: "episodes", row: episode(s, "t-shared", "wk-2", "B's local words") });
      B.store.setCounterpartyNote(s, "founder", "stale local note");
      const r = await B.sync.hydrate(s);
      expect(r.outcomes.skipped_collision).toBe(1);
      expect(r.outcomes.kept_local).toBe(1);
      expect(r.outcomes.took_carried).toBe(1);
      const onWork = (wk: string) => B.store.recentEpisodes(s, 100).filter((e) => e.work_key === wk);
      expect(onWork("wk-same").map((e) => e.id)).toEqual(["t-b"]);
      expect(onWork("wk-2")[0]!.summary).toBe("B's local words");
      expect(B.store.counterparty(s, "founder")!.note).toBe("carried note");
      // Rows carried in are not carried again by this node's next flush.
      const before = B.store.pending(s).map((p) => p.record.table);
      // B's own episode only: its profile write was overwritten by the carried copy.
      expect(before).toEqual(["episodes"]);
    });

    test("a row no schema accepts is skipped, never a refused seat", async () => {
      const s = seat();
      const A = node("a");
      A.store.writeDiary({ handle: s, content: "kept", source: "note", turn_id: null, work_key: null });
      await A.sync.flush(s);
      await h.putRaw(memorySubject(s, "diary", "dbroken"), new TextEncoder().encode("{not json"));
      await h.putRaw(memorySubject(s, "diary", "dwrongid"), encodeRecord({ table: "diary", row: { id: "dother", handle: s, content: "x", source: "note", turn_id: null, work_key: null, created_at: 1 } }));
      const B = node("b");
      const r = await B.sync.hydrate(s);
      expect(r.rows).toBe(1);
      expect(r.undecodable).toBe(2);
      expect(B.store.recentDiary(s, 10).map((d) => d.content)).toEqual(["kept"]);
    });

    test("the seat moves twice: the third holder has everything both wrote, nothing twice", async () => {
      const s = seat();
      const A = node("a");
      A.store.writeEpisode(episode(s, "t1", "wk-1"));
      A.store.writeDiary({ handle: s, content: "from A", source: "note", turn_id: "t1", work_key: "wk-1" });
      await A.sync.flush(s);
      const B = node("b");
      await B.sync.hydrate(s);
      B.store.writeEpisode(episode(s, "t2", "wk-2"));
      B.store.writeDiary({ handle: s, content: "from B", source: "note", turn_id: "t2", work_key: "wk-2" });
      // Identical content collapses on write: one row.
      expect(B.store.writeDiary({ handle: s, content: "from A", source: "note", turn_id: "t2", work_key: null }).inserted).toBe(false);
      await B.sync.release(s);
      expect(B.sync.state(s)).toBeNull();
      const C = node("a");
      await C.sync.hydrate(s);
      const ids = C.store.records(s).map((r) => `${r.table}/${r.row.id}`);
      expect(new Set(ids).size).toBe(ids.length);
      expect(sorted(C.store.records(s))).toEqual(sorted(B.store.records(s)));
      expect(C.store.recentDiary(s, 10).map((d) => d.content).sort()).toEqual(["from A", "from B"]);
    });

    test("skills travel: the state and use count take the carried copy, a version is append-only", async () => {
      const s = seat();
      const A = node("a");
      const v1 = skill(s, ["deploy", "staging"], "Deploy to staging first, then ask for review.");
      A.store.writeSkillVersion(v1.version);
      A.store.putSkill(v1.skill);
      await A.sync.flush(s);
      // The holder uses it twice and the lifecycle moves it; a second body is a second version.
      A.store.markSkillsUsed(s, [v1.skill.id], 5_000);
      A.store.markSkillsUsed(s, [v1.skill.id], 6_000);
      const v2body = "Deploy to staging first; the release checklist is on the Ops page.";
      const v2 = { ...v1.version, id: skillVersionId(v1.skill.id, v2body), body: v2body, created_at: 7_000 };
      expect(A.store.writeSkillVersion(v2)).toBe(true);
      expect(A.store.writeSkillVersion(v2)).toBe(false); // the same version is one row
      A.store.putSkill({ ...A.store.skill(s, v1.skill.id)!, version: v2.id, updated_at: 7_000 });
      await A.sync.flush(s);

      const B = node("b");
      // B already holds an older state of the skill and, under v1's id, other words (cannot
      // happen honestly: ids are content digests; the local append-only row stands).
      B.store.putSkill({ ...v1.skill, state: "stale" });
      B.store.importRecord({ table: "skill_versions", row: { ...v1.version, body: "B's local words" } });
      const r = await B.sync.hydrate(s);
      expect(r.outcomes.took_carried).toBe(1);
      expect(r.outcomes.kept_local).toBe(1);
      expect(B.store.skill(s, v1.skill.id)).toMatchObject({ state: "active", uses: 2, last_used_at: 6_000, version: v2.id });
      expect(B.store.skillVersion(s, v1.version.id)!.body).toBe("B's local words");
      expect(B.store.skillVersion(s, v2.id)!.body).toBe(v2body);
      expect(B.store.counts(s)).toMatchObject({ skills: 1, skill_versions: 2 });
    });

    test("a skill row no schema accepts is skipped, never a refused seat", async () => {
      const s = seat();
      const A = node("a");
      const k = skill(s, ["triage"], "Triage by severity.");
      A.store.writeSkillVersion(k.version);
      A.store.putSkill(k.skill);
      await A.sync.flush(s);
      await h.putRaw(memorySubject(s, "skills", "sbad"), encodeRecord({ table: "skills", row: { ...k.skill, id: "sbad", terms: ["Not Normalised"] } } as MemoryRecord));
      const B = node("b");
      const r = await B.sync.hydrate(s);
      expect(r.rows).toBe(2);
      expect(r.undecodable).toBe(1);
      expect(B.store.skills(s).map((x) => x.id)).toEqual([k.skill.id]);
    });

    test("vectors travel: setting one stamps a fresh sequence, the next flush carries exactly it, the next holder ranks with it", async () => {
      const s = seat();
      const A = node("a");
      const note = A.store.writeDiary({ handle: s, content: "the supplier delivers on Thursdays", source: "note", turn_id: "t1", work_key: null });
      A.store.writeEpisode(episode(s, "t1", "wk-1"));
      await A.sync.flush(s);
      // Filled after the insert, after the rows were carried: only the vectors are new.
      A.store.setVectors(s, "tiny", [{ kind: "diary", id: note.id, vector: vec(1, 0, 0) }, { kind: "episode", id: "t1", vector: vec(0, 1, 0) }], 2_000);
      expect(A.store.pending(s).map((p) => p.record.table)).toEqual(["diary_vectors", "episode_vectors"]);
      expect(await A.sync.flush(s)).toBe(2);
      const B = node("b");
      const r = await B.sync.hydrate(s);
      expect(r.outcomes).toMatchObject({ inserted: 4, kept_local: 0, took_carried: 0, skipped_no_row: 0 });
      expect(vectorsOf(B.store, s)).toEqual(vectorsOf(A.store, s));
      expect(B.store.pending(s)).toEqual([]); // carried in: not carried again
      expect(B.store.counts(s)).toMatchObject({ diary_vectors: 1, episode_vectors: 1 });
    });

    test("a carried vector replaces one of no model, another model or another width — never the reverse", async () => {
      const s = seat();
      const A = node("a");
      const ids = ["alpha", "beta", "gamma", "delta"].map((w) => A.store.writeDiary({ handle: s, content: `note ${w}`, source: "note", turn_id: null, work_key: null }).id);
      const [alpha, beta, gamma, delta] = ids as [string, string, string, string];
      A.store.setVectors(s, "m2", ids.map((id) => ({ kind: "diary" as const, id, vector: vec(1, 2, 3) })), 5_000);
      await A.sync.flush(s);
      const B = node("b");
      // B held the seat before: alpha has no vector, beta one of another model, gamma another
      // width, all older; delta one it filled later than A's (A's is the stale copy here).
      for (const w of ["alpha", "beta", "gamma", "delta"]) B.store.writeDiary({ handle: s, content: `note ${w}`, source: "note", turn_id: null, work_key: null });
      B.store.setVectors(s, "m1", [{ kind: "diary", id: beta, vector: vec(9, 9, 9) }], 1_000);
      B.store.setVectors(s, "m2", [{ kind: "diary", id: gamma, vector: vec(9, 9) }], 1_000);
      B.store.setVectors(s, "m3", [{ kind: "diary", id: delta, vector: vec(7, 7, 7) }], 9_000);
      const r = await B.sync.hydrate(s);
      expect(r.outcomes).toMatchObject({ inserted: 1, took_carried: 2 });
      const carried = `m2 3@5000 ${encodeVector(vec(1, 2, 3))}`;
      expect(vectorsOf(B.store, s)).toEqual([`${alpha} ${carried}`, `${beta} ${carried}`, `${gamma} ${carried}`, `${delta} m3 3@9000 ${encodeVector(vec(7, 7, 7))}`].sort());
    });

    test("a stale copy replayed later cannot erase a filled vector; a vector without its row is skipped", async () => {
      const s = seat();
      const A = node("a");
      const id = A.store.writeDiary({ handle: s, content: "refunds need the invoice", source: "note", turn_id: null, work_key: null }).id;
      A.store.setVectors(s, "m1", [{ kind: "diary", id, vector: vec(1, 0) }], 1_000);
      await A.sync.flush(s);
      const stale = encodeRecord(A.store.records(s).find((x) => x.table === "diary_vectors")!);
      // B takes the seat and refills under the company's new model.
      const B = node("b");
      await B.sync.hydrate(s);
      B.store.setVectors(s, "m2", [{ kind: "diary", id, vector: vec(0, 1, 0) }], 2_000);
      await B.sync.release(s);
      // A's copy arrives late (a predecessor's late flush), and B takes the seat back.
      await h.putRaw(memorySubject(s, "diary_vectors", id), stale);
      const r = await B.sync.hydrate(s);
      expect(r.outcomes.kept_local).toBe(2); // the note, and B's own newer vector
      expect(vectorsOf(B.store, s)).toEqual([`${id} m2 3@2000 ${encodeVector(vec(0, 1, 0))}`]);
      // A vector for a row no holder carried, and one whose bytes are not its width.
      await h.putRaw(memorySubject(s, "episode_vectors", "tnowhere"), encodeRecord({ table: "episode_vectors", row: { id: "tnowhere", handle: s, model: "m2", dims: 1, embedded_at: 3_000, vector: encodeVector(vec(1)) } }));
      await h.putRaw(memorySubject(s, "episode_vectors", "tbadwidth"), new TextEncoder().encode(JSON.stringify({ table: "episode_vectors", row: { id: "tbadwidth", handle: s, model: "m2", dims: 4, embedded_at: 3_000, vector: encodeVector(vec(1)) } })));
      const C = node("a");
      const rc = await C.sync.hydrate(s);
      expect(rc.outcomes.skipped_no_row).toBe(1);
      expect(rc.undecodable).toBe(1);
      expect(vectorsOf(C.store, s)).toEqual([`${id} m1 2@1000 ${encodeVector(vec(1, 0))}`]);
    });

    test("a row published again after its vector (the same note written on another node) still hydrates with its vector", async () => {
      const s = seat();
      const A = node("a");
      const id = A.store.writeDiary({ handle: s, content: "standup moved to 10:00", source: "note", turn_id: null, work_key: null }).id;
      A.store.setVectors(s, "m1", [{ kind: "diary", id, vector: vec(0.5, 0.5) }], 1_000);
      await A.sync.flush(s);
      // Another node writes the same words (one id): its flush puts the row after the vector.
      const other = node("b");
      other.store.writeDiary({ handle: s, content: "standup moved to 10:00", source: "reflection", turn_id: "t9", work_key: null });
      await other.sync.flush(s);
      const C = node("a");
      const r = await C.sync.hydrate(s);
      expect(r.outcomes).toMatchObject({ inserted: 2, skipped_no_row: 0 });
      expect(vectorsOf(C.store, s)).toEqual([`${id} m1 2@1000 ${encodeVector(vec(0.5, 0.5))}`]);
    });

    test("a replay of some tables brings those tables' rows only, in stream order (the learning duty skips the vectors)", async () => {
      const s = seat();
      const A = node("a");
      const note = A.store.writeDiary({ handle: s, content: "read me not", source: "note", turn_id: null, work_key: null }).id;
      A.store.writeEpisode(episode(s, "t1", "wk-1"));
      A.store.setVectors(s, "m1", [{ kind: "diary", id: note, vector: vec(1) }, { kind: "episode", id: "t1", vector: vec(2) }]);
      const k = skill(s, ["triage"], "Triage by severity.");
      A.store.writeSkillVersion(k.version);
      A.store.putSkill(k.skill);
      A.store.writeEpisode(episode(s, "t2", "wk-2"));
      await A.sync.flush(s);
      const some = await h.b.replay(s, ["episodes", "skills", "skill_versions"]);
      expect(some.records.map((r) => `${r.table}/${r.row.id}`)).toEqual(["episodes/t1", `skill_versions/${k.version.id}`, `skills/${k.skill.id}`, "episodes/t2"]);
      expect((await h.b.replay(s, ["onboarding"])).records).toEqual([]);
      expect((await h.b.replay(s)).records).toHaveLength(7);
    });

    test("a record of a table this build does not know is skipped, never a refused seat (how an older node meets a newer one's rows)", async () => {
      const s = seat();
      const A = node("a");
      A.store.writeDiary({ handle: s, content: "kept", source: "note", turn_id: null, work_key: null });
      await A.sync.flush(s);
      for (const f of ["f1", "f2", "f3"]) await h.putRaw(`crewlet.memory.${s}.future_rows.${f}`, new TextEncoder().encode(JSON.stringify({ table: "future_rows", row: { id: f, handle: s } })));
      const { log, sink } = memoryLogger("debug");
      const B = node("b", log);
      const r = await B.sync.hydrate(s);
      expect(r).toMatchObject({ rows: 1, undecodable: 3 });
      expect(B.sync.state(s)).toBe("ready");
      // One line for the kind, with its count, not one a row.
      expect(sink.events("memory_rows_of_newer_kind").map((e) => e.fields)).toEqual([{ seat: s, table: "future_rows", rows: 3 }]);
      expect(sink.events("memory_row_undecodable")).toEqual([]);
    });

    test("many rows: a replay of 2,500 rows brings every one", async () => {
      const s = seat();
      const A = node("a");
      A.store.sqlite.transaction(() => {
        for (let i = 0; i < 2_500; i++) A.store.writeDiary({ handle: s, content: `fact number ${i}`, source: "note", turn_id: null, work_key: null, created_at: i });
      })();
      expect(await A.sync.flush(s)).toBe(2_500);
      const B = node("b");
      expect((await B.sync.hydrate(s)).rows).toBe(2_500);
      expect(B.store.counts(s).diary).toBe(2_500);
    });
  });
}
