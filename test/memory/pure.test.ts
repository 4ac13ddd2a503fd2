// Tables for the pure parts of seat memory: the recall block's budget, the reflection's
// parse, the row schemas' limits, the diary cap.
import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { estimateTokens, memoryBlock, MEMORY_PROMPT_TOKENS } from "../../src/memory/recall.ts";
import { decodeRecord, diaryId, MAX_NOTE_BYTES, MemoryNoteInput } from "../../src/memory/records.ts";
import { parseReflection, MAX_REFLECTION_NOTES } from "../../src/memory/reflection.ts";
import { DIARY_CAP, MemoryStore } from "../../src/memory/store.ts";
import { MemoryChangelog } from "../../src/memory/changelog.ts";
import { MemorySync } from "../../src/memory/sync.ts";
import { silentLogger } from "../../src/log.ts";
import type { DiaryRow } from "../../src/memory/records.ts";

const note = (i: number, content = `note number ${i}`): DiaryRow => ({ id: diaryId("s", content), handle: "s", content, source: "note", turn_id: null, work_key: null, created_at: i });

describe("recall block", () => {
  test.each([
    ["nothing remembered", { diary: [], episodes: [], counterparty: null, onboarding: [] }, null],
    ["a diary note", { diary: [note(1, "ships on Thursdays")], episodes: [], counterparty: null, onboarding: [] }, "- ships on Thursdays"],
  ] as const)("%s", (_, input, want) => {
    const out = memoryBlock({ ...input, diary: [...input.diary], episodes: [], onboarding: [] });
    if (want === null) expect(out).toBeNull();
    else expect(out).toContain(want);
  });

  test("never over the budget, newest notes first, whole lines only", () => {
    const diary = Array.from({ length: 500 }, (_, i) => note(500 - i, `fact ${500 - i}: ${"x".repeat(100)}`));
    const out = memoryBlock({ diary, episodes: [], counterparty: null, onboarding: [] })!;
    expect(estimateTokens(out)).toBeLessThanOrEqual(MEMORY_PROMPT_TOKENS);
    const lines = out.split("\n").filter((l) => l.startsWith("- "));
    expect(lines.length).toBeGreaterThan(5);
    expect(lines.length).toBeLessThan(500);
    expect(lines[0]).toContain("fact 500:");
    for (const l of lines) expect(l.endsWith("x")).toBe(true);
  });

  test("the counterparty and this work's episodes come before the diary", () => {
    const out = memoryBlock({
      diary: [note(1, "a diary line")],
      episodes: [{ id: "t1", handle: "s", work_key: "w", turn_id: "t1", trigger_ids: [], conversation: "c", counterparty: "bo", outcome: "completed", summary: "did the thing", work_items: [], created_at: 1 }],
      counterparty: { id: "c1", handle: "s", counterparty: "bo", interactions: 2, last_work_key: "w", last_seen: 1, note: "likes dates", updated_at: 1 },
      onboarding: [],
    })!;
    expect(out.indexOf("About bo: likes dates")).toBeLessThan(out.indexOf("did the thing"));
    expect(out.indexOf("did the thing")).toBeLessThan(out.indexOf("a diary line"));
  });
});

describe("reflection answer", () => {
  test.each([
    ["lines", "diary: the founder wants March\nabout: asks for dates", ["the founder wants March"], "asks for dates"],
    ["bullets and case", "- Diary: one\n* DIARY: two", ["one", "two"], null],
    ["nothing", "nothing new", [], null],
    ["free text kept whole", "The founder  wants\nMarch.", ["The founder wants March."], null],
    ["too many notes", "diary: 1\ndiary: 2\ndiary: 3\ndiary: 4", ["1", "2", "3"], null],
    ["empty", "", [], null],
  ] as const)("%s", (_, text, notes, about) => {
    const r = parseReflection(text);
    expect(r.notes).toEqual([...notes]);
    expect(r.counterparty_note).toBe(about);
    expect(r.notes.length).toBeLessThanOrEqual(MAX_REFLECTION_NOTES);
  });

  test("a note is cut to the row's byte limit on a character boundary", () => {
    const r = parseReflection(`diary: ${"é".repeat(MAX_NOTE_BYTES)}`);
    expect(Buffer.byteLength(r.notes[0]!, "utf8")).toBeLessThanOrEqual(MAX_NOTE_BYTES);
    expect(r.notes[0]!.endsWith("é")).toBe(true);
  });
});

describe("row schemas", () => {
  test.each([
    ["a note over 2 KiB", { table: "diary", row: { ...note(1), content: "é".repeat(1025) } }, "row.content: is over 2048 bytes"],
    ["a row id that is not a subject token", { table: "diary", row: { ...note(1), id: "a.b" } }, "row.id"],
    ["a handle with a dot", { table: "diary", row: { ...note(1), handle: "a.b" } }, "row.handle"],
    ["an unknown table", { table: "vectors", row: {} }, "table"],
    ["an extra field", { table: "diary", row: { ...note(1), vector: [] } }, "vector"],
  ] as const)("%s is refused naming the field", (_, value, field) => {
    const d = decodeRecord(value);
    expect(d.ok).toBe(false);
    if (!d.ok) expect(d.error).toContain(field);
  });

  test("memory_note's input is the diary row's content rule", () => {
    expect(MemoryNoteInput.safeParse({ content: "x".repeat(MAX_NOTE_BYTES) }).success).toBe(true);
    expect(MemoryNoteInput.safeParse({ content: "x".repeat(MAX_NOTE_BYTES + 1) }).success).toBe(false);
    expect(MemoryNoteInput.safeParse({ content: "   " }).success).toBe(false);
  });
});

describe("the diary cap", () => {
  test("drops the oldest beyond the cap, keeps the newest, and its FTS entries go with them", () => {
    const store = new MemoryStore(new Database(":memory:", { strict: true }), new FakeClock(0));
    for (let i = 1; i <= 30; i++) store.writeDiary({ handle: "s", content: `entry ${i} zebra`, source: "note", turn_id: null, work_key: null, created_at: i });
    store.writeDiary({ handle: "other", content: "entry zebra", source: "note", turn_id: null, work_key: null, created_at: 0 });
    expect(store.dropOldestDiary("s", 10)).toBe(20);
    expect(store.recentDiary("s", 100).map((d) => d.created_at)).toEqual([30, 29, 28, 27, 26, 25, 24, 23, 22, 21]);
    expect(store.search("s", "zebra", 100)).toHaveLength(10);
    expect(store.counts("other").diary).toBe(1);
    expect(store.dropOldestDiary("s", 10)).toBe(0);
  });

  test("capDiaries (a sweep of every node's retention tick) caps the seats this node keeps current, and only those; DIARY_CAP unless told", async () => {
    const clock = new FakeClock(0);
    const store = new MemoryStore(new Database(":memory:", { strict: true }), clock);
    const sync = new MemorySync({ store, changelog: new MemoryChangelog(), clock, log: silentLogger });
    for (const h of ["held", "copy"]) for (let i = 1; i <= 15; i++) store.writeDiary({ handle: h, content: `${h} ${i}`, source: "note", turn_id: null, work_key: null, created_at: i });
    await sync.hydrate("held");
    expect(sync.capDiaries(5)).toEqual({ held: 10 });
    expect(store.counts("held").diary).toBe(5);
    expect(store.counts("copy").diary).toBe(15);
    store.sqlite.transaction(() => {
      for (let i = 1; i <= DIARY_CAP + 2; i++) store.writeDiary({ handle: "held", content: `busy ${i}`, source: "note", turn_id: null, work_key: null, created_at: 100 + i });
    })();
    expect(sync.capDiaries()).toEqual({ held: 7 });
    expect(store.counts("held").diary).toBe(DIARY_CAP);
  });
});
