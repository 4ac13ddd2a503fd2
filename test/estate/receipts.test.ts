// Turn receipts on a real estate (one data node on one nats-server, the one-box path): a
// receipt whose write answer is lost is written again under the turn id and kept once; the
// horizon lets old receipts go at the log position that passes it; and GET /turns,
// /turns/week and /turns/stuck through app.request() — filters, paging, a 400 naming the
// field, a 401 without a token.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { NatsConnection } from "nats";
import { createApp } from "../../src/api/app.ts";
import { ReceiptWriter } from "../../src/agent/receipt.ts";
import { systemClock } from "../../src/clock.ts";
import { makeRecord, type TurnReceipt } from "../../src/estate/records.ts";
import type { WriteOutcome } from "../../src/estate/router.ts";
import { openEstateDb } from "../../src/estate/migrate.ts";
import { dayIn, listReceipts, TURN_RECEIPT_HORIZON_MS } from "../../src/estate/turn-receipts.ts";
import { silentLogger } from "../../src/log.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { OPS_TOKEN, estateApp, removeTempDirs, startTestEstate, type TestEstate } from "./support.ts";

const TEST_TIMEOUT_MS = 60_000;
const TOKEN = OPS_TOKEN;
const HOUR = 3_600_000;

let nats: TestNats;
let nc: NatsConnection;
let node: TestEstate;
let app: ReturnType<typeof createApp>;

beforeAll(async () => {
  nats = await startNats(1);
  nc = await nats.connect();
  node = await startTestEstate({ nc, nodeId: "a", dataNodes: () => ["a"] });
  app = estateApp(node);
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  await node?.estate.stop();
  await nc?.close();
  await nats?.stop();
  removeTempDirs();
}, TEST_TIMEOUT_MS);

let n = 0;
function receipt(o: Partial<TurnReceipt> = {}): TurnReceipt {
  const ended_at = o.ended_at ?? Date.now();
  return {
    op: "turn.receipt",
    seat: "alice",
    turn_id: `turn-${String(++n).padStart(4, "0")}-${Math.random().toString(36).slice(2, 10)}`,
    node: "a",
    day: dayIn(ended_at, "UTC"),
    started_at: ended_at - 1_500,
    ended_at,
    duration_ms: 1_500,
    trigger: { type: "chat_mention", from: "carol", conversation: "chat:eng:root-0001", count: 1 },
    summary: "done",
    tools: [{ name: "work_comment", calls: 1, errors: 0 }],
    input_tokens: 100,
    output_tokens: 20,
    cost_micros: null,
    outcome: "completed",
    error: null,
    links: { channel: "eng", thread_root: "root-0001", work_key: null },
    ...o,
  };
}

const get = (path: string, token: string | null = TOKEN) => app.request(path, { headers: token ? { authorization: `Bearer ${token}` } : {} });
type Page = { turns: TurnReceipt[]; next: number | null };
type Week = { days: string[]; seats: { seat: string; turns: number; days: { day: string; turns: number; outcomes: Record<string, number> }[] }[] };
type Stuck = { stuck_after_minutes: number; work: { key: string; title: string; assignee: string; last_turn_at: number | null }[] };
const read = async <T>(path: string): Promise<T> => (await (await get(path)).json()) as T;

test("a receipt whose answer was lost is written again under the turn id, and kept once", async () => {
  const router = node.estate.router;
  const answers: WriteOutcome[] = [];
  let lose = true;
  const lossy = {
    async write(...args: Parameters<typeof router.write>): Promise<WriteOutcome> {
      const out = await router.write(...args);
      answers.push(out);
      if (lose) {
        lose = false;
        return { status: "unknown", domain: args[0], op_id: out.op_id, error: "the tracker log did not answer: TIMEOUT (injected)" };
      }
      return out;
    },
  };
  const writer = new ReceiptWriter({ estate: lossy, clock: systemClock, log: silentLogger, timezone: () => "UTC", retry_ms: 0 });
  const r = receipt({ seat: "bob", summary: "retried once" });
  await writer.write(r);
  expect(answers.map((a) => a.status)).toEqual(["applied", "applied"]);
  expect(answers.map((a) => a.op_id)).toEqual([r.turn_id, r.turn_id]);
  // The second write is the first, answered from the op ledger: the same position.
  if (answers[0]!.status === "applied" && answers[1]!.status === "applied") expect(answers[1]!.position).toBe(answers[0]!.position);
  const page = await router.read({ q: "turns.list", seat: "bob", limit: 100 });
  expect(page.turns.filter((t) => t.turn_id === r.turn_id).map((t) => t.summary)).toEqual(["retried once"]);
  // A whole second record of the same turn (another op id) keeps the first receipt too.
  const again = await router.writeRecord(makeRecord("tracker", { ...r, summary: "a second receipt" }, Date.now(), "a"));
  expect(again.status === "applied" && again.outcome).toMatchObject({ ok: true, kept: false });
  expect((await router.read({ q: "turns.list", seat: "bob", limit: 100 })).turns.map((t) => t.summary)).toEqual(["retried once"]);
}, TEST_TIMEOUT_MS);

test("receipts past the horizon go when a receipt written past it is applied", async () => {
  const router = node.estate.router;
  const t0 = Date.now() - TURN_RECEIPT_HORIZON_MS - 10 * HOUR;
  const old = receipt({ seat: "alice", ended_at: t0, summary: "ancient" });
  const w1 = await router.writeRecord(makeRecord("tracker", old, t0 + 1_000, "a", old.turn_id));
  expect(w1.status).toBe("applied");
  expect((await router.read({ q: "turns.list", seat: "alice", limit: 500 })).turns.some((t) => t.summary === "ancient")).toBe(true);
  const fresh = receipt({ seat: "alice", summary: "fresh" });
  await router.writeRecord(makeRecord("tracker", fresh, Date.now(), "a", fresh.turn_id));
  const left = (await router.read({ q: "turns.list", seat: "alice", limit: 500 })).turns.map((t) => t.summary);
  expect(left).toContain("fresh");
  expect(left).not.toContain("ancient");
}, TEST_TIMEOUT_MS);

test("GET /turns: filters, newest first, paged by cursor; a bad query is a 400 naming the field; no token is 401", async () => {
  const router = node.estate.router;
  // Two days ago, well inside the horizon, on a day of its own.
  const base = Date.now() - 2 * 24 * HOUR;
  const DAY = dayIn(base, "UTC");
  for (const [i, outcome] of ["completed", "failed", "completed", "retry", "completed"].entries()) {
    const r = receipt({ seat: "bob", ended_at: base + i * 60_000, outcome, error: outcome === "completed" ? null : "the model did not answer", day: DAY });
    await router.writeRecord(makeRecord("tracker", r, Date.now(), "a", r.turn_id));
  }
  const day = await read<Page>(`/turns?seat=bob&day=${DAY}`);
  expect(day.turns.map((t) => t.outcome)).toEqual(["completed", "retry", "completed", "failed", "completed"]);
  const failed = await read<Page>(`/turns?seat=bob&outcome=failed&day=${DAY}`);
  expect(failed.turns.map((t) => [t.outcome, t.error])).toEqual([["failed", "the model did not answer"]]);
  const window = await read<Page>(`/turns?seat=bob&since=${new Date(base + 60_000).toISOString()}&until=${base + 3 * 60_000}`);
  expect(window.turns.map((t) => t.ended_at)).toEqual([base + 2 * 60_000, base + 60_000]);
  // Paging: two at a time, the cursor from each page, every receipt once.
  const seen: number[] = [];
  let cursor: number | null = null;
  for (let i = 0; i < 5; i++) {
    const page: Page = await read<Page>(`/turns?seat=bob&day=${DAY}&limit=2${cursor ? `&cursor=${cursor}` : ""}`);
    seen.push(...page.turns.map((t) => t.ended_at));
    cursor = page.next;
    if (cursor === null) break;
  }
  expect(seen).toEqual([4, 3, 2, 1, 0].map((i) => base + i * 60_000));

  const bad = await get("/turns?since=yesterday");
  expect(bad.status).toBe(400);
  expect(await bad.json()).toMatchObject({ error: { code: "invalid_input", field: "since" } });
  expect((await get("/turns?limit=0")).status).toBe(400);
  expect((await get("/turns", null)).status).toBe(401);
  expect((await get("/turns/week", null)).status).toBe(401);
}, TEST_TIMEOUT_MS);

test("GET /turns/week: every agent seat, every day, today's turns and outcomes", async () => {
  const router = node.estate.router;
  const r = receipt({ seat: "alice", outcome: "failed", error: "x" });
  await router.writeRecord(makeRecord("tracker", r, Date.now(), "a", r.turn_id));
  const week = await read<Week>("/turns/week");
  expect(week.days.length).toBe(7);
  expect(week.days[6]).toBe(dayIn(Date.now(), "UTC"));
  expect(week.seats.map((s) => s.seat).slice(0, 2)).toEqual(["alice", "bob"]);
  const today = week.seats[0]!.days[6]!;
  expect(today.outcomes.failed).toBeGreaterThanOrEqual(1);
  expect(today.turns).toBe(Object.values(today.outcomes).reduce((a, b) => a + b, 0));
  expect((await get("/turns/week?days=40")).status).toBe(400);
}, TEST_TIMEOUT_MS);

test("GET /turns/stuck: work in progress no turn moved for the limit, until a turn works on it", async () => {
  const router = node.estate.router;
  const quiet = Date.now() - 3 * HOUR;
  const created = await router.writeRecord(
    makeRecord("tracker", { op: "work.create", project: "ENG", type: "task", title: "Wedged", body: "", status: "in_progress", priority: "none", assignee: "alice", reporter: "carol", parent: null, labels: [], due: null }, quiet, "a"),
  );
  const key = created.status === "applied" ? String(created.outcome.ok && created.outcome.key) : "";
  const person = await router.writeRecord(
    makeRecord("tracker", { op: "work.create", project: "ENG", type: "task", title: "Carol's", body: "", status: "in_progress", priority: "none", assignee: "carol", reporter: "carol", parent: null, labels: [], due: null }, quiet, "a"),
  );
  expect(person.status).toBe("applied");
  const before = await read<Stuck>("/turns/stuck");
  expect(before.stuck_after_minutes).toBe(120);
  expect(before.work.map((w) => w.key)).toEqual([key]);
  expect(before.work[0]).toMatchObject({ title: "Wedged", assignee: "alice", last_turn_at: null });
  const r = receipt({ seat: "alice", links: { channel: null, thread_root: null, work_key: key } });
  await router.writeRecord(makeRecord("tracker", r, Date.now(), "a", r.turn_id));
  const after = await read<Stuck>("/turns/stuck");
  expect(after.work).toEqual([]);
  expect((await get("/turns/stuck?x=1")).status).toBe(400);
}, TEST_TIMEOUT_MS);

test("every read decodes the receipt against its schema: a row this build cannot read is an error that says where, never a half receipt", () => {
  const { sqlite } = openEstateDb(":memory:");
  const good = receipt({ seat: "alice" });
  const { op: _op, ...stored } = good;
  const insert = sqlite.query("INSERT INTO turn_receipts (turn_id, seat, day, ended_at, outcome, work_key, body, position) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  insert.run(good.turn_id, "alice", good.day, good.ended_at, "completed", null, JSON.stringify(stored), 7);
  expect(listReceipts(sqlite, { limit: 10 }).turns.map((t) => [t.turn_id, t.position])).toEqual([[good.turn_id, 7]]);
  insert.run("turn-bad-0001", "alice", good.day, good.ended_at, "completed", null, JSON.stringify({ ...stored, turn_id: "turn-bad-0001", input_tokens: -1 }), 8);
  expect(() => listReceipts(sqlite, { limit: 10 })).toThrow(/turn receipt at position 8 cannot be read by this build: input_tokens/);
  sqlite.close();
});

test("crewlet turns reads the same ledger over HTTP, and a bad parameter is the node's 400 in words", async () => {
  const { runTurnsCommand } = await import("../../src/cli/turns.ts");
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => app.fetch(req) });
  const lines: string[] = [];
  const errors: string[] = [];
  const log = console.log;
  const error = console.error;
  console.log = (...a: unknown[]) => void lines.push(a.join(" "));
  console.error = (...a: unknown[]) => void errors.push(a.join(" "));
  try {
    const r = receipt({ seat: "bob", summary: "from the CLI's point of view", cost_micros: 12_345 });
    await node.estate.router.writeRecord(makeRecord("tracker", r, Date.now(), "a", r.turn_id));
    const url = `http://127.0.0.1:${server.port}`;
    expect(await runTurnsCommand(["--url", url, "--token", TOKEN, "--seat", "bob", "--limit", "1"])).toBe(0);
    expect(lines[0]).toMatch(/^ENDED\s+SEAT/);
    expect(lines[0]).toMatch(/@bob\s+completed\s+chat_mention from carol\s+100\/20\s+0\.0123\s+from the CLI's point of view\n\(more: --cursor \d+\)$/);
    expect(await runTurnsCommand(["--url", url, "--token", TOKEN, "--since", "yesterday"])).toBe(1);
    expect(errors[0]).toMatch(/^crewlet turns: .*query\.since: is not a time/);
  } finally {
    console.log = log;
    console.error = error;
    server.stop(true);
  }
});
