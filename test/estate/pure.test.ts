// Table tests on the estate's pure parts: the behind/wrong judgement, the ask order, mention
// parsing, record decoding, wake derivation, and the migrations against the drizzle schema.
import { expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { getTableConfig, type SQLiteTable } from "drizzle-orm/sqlite-core";
import { migrate } from "../../src/estate/migrate.ts";
import { dmChannelId, dmMembers, parseMentions } from "../../src/estate/mentions.ts";
import { checkRecord, decodeRecord, encodeRecord, makeRecord, MAX_MESSAGE_BYTES, RECORD_VERSION, truncateToBytes } from "../../src/estate/records.ts";
import { askOrder, SILENT_FOR_MS } from "../../src/estate/router.ts";
import * as schema from "../../src/estate/schema.ts";
import { seedBodies } from "../../src/estate/seed.ts";
import { judgeCopy, STALL_MS, UNDECODABLE_GRACE_MS, type CopyFacts, type Judgement } from "../../src/estate/soundness.ts";
import { automaticOpId, deriveTriggers, isAutomaticPost, type WakeFacts } from "../../src/estate/wakes.ts";
import { testCompany } from "./support.ts";

const NOW = 1_000_000_000;
const base: CopyFacts = { applier: { kind: "running" }, applied_seq: 10, log: { first_seq: 1, last_seq: 10 }, last_moved_ms: NOW, now_ms: NOW };

const cases: [string, CopyFacts, Judgement["state"]][] = [
  ["level", base, "level"],
  ["behind by a million is behind, not wrong", { ...base, log: { first_seq: 1, last_seq: 1_000_010 }, last_moved_ms: NOW - 1000 }, "behind"],
  ["stalled a minute with records waiting", { ...base, log: { first_seq: 1, last_seq: 11 }, last_moved_ms: NOW - STALL_MS }, "wrong"],
  ["idle a minute but level is fine", { ...base, last_moved_ms: NOW - 10 * STALL_MS }, "level"],
  ["applier stopped", { ...base, applier: { kind: "stopped", seq: 11, error: "boom" } }, "wrong"],
  ["undecodable within the grace is only behind", { ...base, applier: { kind: "held", seq: 11, error: "v2", since_ms: NOW - 1 }, log: { first_seq: 1, last_seq: 11 } }, "behind"],
  ["undecodable past the grace", { ...base, applier: { kind: "held", seq: 11, error: "v2", since_ms: NOW - UNDECODABLE_GRACE_MS } }, "wrong"],
  ["checkpoint names another stream", { ...base, applier: { kind: "foreign_checkpoint", error: "rebuilt" } }, "wrong"],
  ["rows below the log", { ...base, log: { first_seq: 50, last_seq: 60 } }, "wrong"],
  ["log trimmed exactly to the copy is fine", { ...base, log: { first_seq: 11, last_seq: 12 } }, "behind"],
  ["log silent, nothing local wrong", { ...base, log: null }, "unknown"],
  ["log silent, applier stopped", { ...base, log: null, applier: { kind: "stopped", seq: 11, error: "x" } }, "wrong"],
];
test.each(cases)("judgeCopy: %s", (_name, facts, want) => {
  expect(judgeCopy(facts).state).toBe(want);
});

test("askOrder: last answerer first, spread by asker, silent ones last, never self", () => {
  const nodes = ["a", "b", "c", "d"];
  const none = new Map<string, number>();
  const o1 = askOrder({ nodes, self: "x", last: null, silentAt: none, now_ms: NOW });
  expect([...o1].sort()).toEqual(nodes);
  // Different askers start at different nodes (spread), each a rotation of the same ring.
  const firsts = new Set(["x", "y", "z", "w", "v", "u"].map((self) => askOrder({ nodes, self, last: null, silentAt: none, now_ms: NOW })[0]));
  expect(firsts.size).toBeGreaterThan(1);
  expect(askOrder({ nodes, self: "x", last: "c", silentAt: none, now_ms: NOW })[0]).toBe("c");
  const silent = new Map([["c", NOW - 1000]]);
  const o2 = askOrder({ nodes, self: "x", last: "c", silentAt: silent, now_ms: NOW });
  expect(o2[o2.length - 1]).toBe("c");
  const old = new Map([["c", NOW - SILENT_FOR_MS]]);
  expect(askOrder({ nodes, self: "x", last: "c", silentAt: old, now_ms: NOW })[0]).toBe("c");
  expect(askOrder({ nodes: ["a", "a", "self"], self: "self", last: null, silentAt: none, now_ms: NOW })).toEqual(["a"]);
  expect(askOrder({ nodes: [], self: "x", last: null, silentAt: none, now_ms: NOW })).toEqual([]);
});

test("mentions and DM ids", () => {
  expect(parseMentions("@alice and @bob, again @alice")).toEqual(["alice", "bob"]);
  expect(parseMentions("mail x@bob.com or @carol.")).toEqual(["carol"]);
  expect(parseMentions("@@nope @Upper")).toEqual([]);
  expect(dmChannelId(["bob", "alice", "bob"])).toBe("dm.alice.bob");
  expect(dmMembers("dm.alice.bob")).toEqual(["alice", "bob"]);
  expect(dmMembers("dm.bob.alice")).toBeNull();
  expect(dmMembers("dm.alice")).toBeNull();
  expect(dmMembers("general")).toBeNull();
});

test("records round-trip; garbage, newer formats and bad fields are undecodable with the field named", () => {
  const r = makeRecord("chat", { op: "chat.post", channel: "general", author: "a", body: "hi", thread_parent: null, mentions: [], dm: null }, 5, "n1");
  const ok = decodeRecord("chat", encodeRecord(r));
  expect(ok.ok && ok.record).toEqual(r);
  expect(decodeRecord("chat", new TextEncoder().encode("{garbage")).ok).toBe(false);
  const newer = decodeRecord("chat", encodeRecord({ ...r, v: RECORD_VERSION + 1 } as never));
  expect(!newer.ok && newer.error).toMatch(/newer than this build/);
  const big = decodeRecord("chat", encodeRecord({ ...r, body: { ...r.body, body: "x".repeat(40_000) } } as never));
  expect(!big.ok && big.error).toMatch(/^body\.body: .*32 KiB/);
  // A chat record is not a tracker record.
  expect(decodeRecord("tracker", encodeRecord(r)).ok).toBe(false);
});

test("the record gate: what it passes decodes; what it refuses names the body field; sizes are bytes of the encoded record", () => {
  const post = (body: Record<string, unknown>) => makeRecord("chat", { op: "chat.post", channel: "general", author: "a", body: "hi", thread_parent: null, mentions: [], dm: null, ...body } as never, 5, "n1");
  const cases: [string, ReturnType<typeof checkRecord>, { ok: boolean; code?: string; field?: string }][] = [
    ["a plain post", checkRecord(post({})), { ok: true }],
    ["32 KiB of ASCII", checkRecord(post({ body: "x".repeat(MAX_MESSAGE_BYTES) })), { ok: true }],
    ["32 KiB + 1", checkRecord(post({ body: "x".repeat(MAX_MESSAGE_BYTES + 1) })), { ok: false, code: "invalid_record", field: "body" }],
    ["16,385 two-byte characters", checkRecord(post({ body: "é".repeat(MAX_MESSAGE_BYTES / 2 + 1) })), { ok: false, field: "body" }],
    ["a lone surrogate", checkRecord(post({ body: "a\ud800b" })), { ok: false, field: "body" }],
    ["17 DM members", checkRecord(post({ dm: { members: Array.from({ length: 17 }, (_, i) => `m${i}`) } })), { ok: false, field: "dm.members" }],
    ["a stray field", checkRecord(post({ extra: 1 })), { ok: false }],
    ["over the record limit", checkRecord(post({ body: "x".repeat(2000) }), 1000), { ok: false, code: "too_large" }],
    [
      "an impossible due date",
      checkRecord(makeRecord("tracker", { op: "work.create", project: "ENG", type: "task", title: "t", body: "", status: "todo", priority: "none", assignee: null, reporter: "a", parent: null, labels: [], due: "2026-02-30" }, 1, "n")),
      { ok: false, field: "due" },
    ],
  ];
  for (const [what, got, want] of cases) {
    expect({ what, ok: got.ok }).toEqual({ what, ok: want.ok });
    if (!got.ok) {
      if (want.code) expect({ what, code: got.code }).toEqual({ what, code: want.code as never });
      if (want.field) expect({ what, field: got.field }).toEqual({ what, field: want.field });
    }
  }
});

test("truncateToBytes: cuts at a code point, ends with the marker, leaves short text alone", () => {
  expect(truncateToBytes("short", 100)).toBe("short");
  const cut = truncateToBytes("😀".repeat(100), 64, "[cut]");
  expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(64);
  expect(cut).toBe("😀".repeat(14) + "[cut]");
  expect(truncateToBytes("a\ud800", 10)).toBe("a\ufffd");
  expect(Buffer.byteLength(truncateToBytes("é".repeat(20_000), MAX_MESSAGE_BYTES))).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
});

test("wake derivation: mentions and DMs wake agent seats, never the author or a person", () => {
  const kinds: Record<string, "agent" | "human"> = { alice: "agent", bob: "agent", carol: "human" };
  const facts = (over: Partial<WakeFacts> = {}): WakeFacts => ({
    seatKind: (h) => kinds[h] ?? null,
    outcome: { ok: true },
    channel: (id) => (id === "dm.alice.carol" ? { kind: "dm", members: ["alice", "carol"] } : { kind: "unit", members: [] }),
    ...over,
  });
  const post = (channel: string, author: string, mentions: string[]) =>
    makeRecord("chat", { op: "chat.post", channel, author, body: "hi", thread_parent: null, mentions, dm: null }, 7, "n", "op-12345678");
  expect(deriveTriggers(post("eng", "carol", ["alice", "bob", "carol", "zed"]), 3, facts()).map((t) => t.seat)).toEqual(["alice", "bob"]);
  expect(deriveTriggers(post("eng", "alice", ["alice"]), 3, facts())).toEqual([]);
  const dm = deriveTriggers(post("dm.alice.carol", "carol", ["alice"]), 3, facts());
  expect(dm.map((t) => [t.seat, t.type])).toEqual([["alice", "chat_direct"]]);
  expect(dm[0]!.event_id).toBe("wake.chat.op-12345678.alice");
  expect(deriveTriggers(post("eng", "carol", ["alice"]), 3, facts({ outcome: { ok: false, code: "unknown_channel", message: "" } }))).toEqual([]);
  const comment = makeRecord("tracker", { op: "work.comment", key: "ENG-1", author: "carol", body: "?" }, 7, "n", "op-22345678");
  expect(deriveTriggers(comment, 4, facts({ outcome: { ok: true, assignee: "bob", title: "t" } })).map((t) => [t.seat, t.type])).toEqual([["bob", "task_comment"]]);
  expect(deriveTriggers(comment, 4, facts({ outcome: { ok: true, assignee: "carol", title: "t" } }))).toEqual([]);
});

test("wake derivation: the engine's own posts in a DM (reply, notice, alert) wake no agent; a tool's post does", () => {
  const kinds: Record<string, "agent" | "human"> = { alice: "agent", bob: "agent" };
  const facts: WakeFacts = {
    seatKind: (h) => kinds[h] ?? null,
    outcome: { ok: true },
    channel: () => ({ kind: "dm", members: ["alice", "bob"] }),
  };
  const post = (op_id: string) => makeRecord("chat", { op: "chat.post", channel: "dm.alice.bob", author: "alice", body: "done", thread_parent: null, mentions: [], dm: null }, 7, "n", op_id);
  for (const kind of ["reply", "notice", "alert"] as const) {
    const op_id = automaticOpId(kind, "alice\nwake.chat.op-1.alice");
    expect(isAutomaticPost(op_id)).toBe(true);
    expect(deriveTriggers(post(op_id), 3, facts)).toEqual([]);
  }
  expect(automaticOpId("reply", "x")).toBe(automaticOpId("reply", "x")); // a retry is the same write
  expect(isAutomaticPost("op-12345678")).toBe(false);
  expect(deriveTriggers(post("op-12345678"), 3, facts).map((t) => [t.seat, t.type])).toEqual([["bob", "chat_direct"]]);
});

test("seeding: a project, container and channel per unit plus the company-wide ones", () => {
  const b = seedBodies(testCompany());
  expect(b.tracker.projects.map((p) => p.key)).toEqual(["ENG", "GEN", "SAL"]);
  expect(b.pages.containers.map((c) => c.key)).toEqual(["company", "eng-docs"]);
  expect(b.chat.channels.map((c) => [c.id, c.kind])).toEqual([["eng", "unit"], ["general", "general"], ["sales", "unit"]]);
});

test("the migrations create every table and column the drizzle schema names", () => {
  const db = new Database(":memory:");
  expect(migrate(db)).toEqual([1, 2, 3, 4]);
  expect(migrate(db)).toEqual([]);
  const tables = Object.values(schema as Record<string, unknown>).filter((v): v is SQLiteTable => typeof v === "object" && v !== null && Symbol.for("drizzle:IsDrizzleTable") in v);
  expect(tables.length).toBe(14);
  for (const t of tables) {
    const cfg = getTableConfig(t);
    const cols = db.query<{ name: string; notnull: number }, []>(`PRAGMA table_info(${cfg.name})`).all();
    const have = new Map(cols.map((c) => [c.name, c.notnull === 1]));
    for (const c of cfg.columns) {
      expect({ table: cfg.name, column: c.name, exists: have.has(c.name) }).toEqual({ table: cfg.name, column: c.name, exists: true });
      if (!c.primary) expect({ table: cfg.name, column: c.name, notNull: have.get(c.name) }).toEqual({ table: cfg.name, column: c.name, notNull: c.notNull });
    }
    expect(cols.length).toBe(cfg.columns.length);
  }
  db.close();
});
