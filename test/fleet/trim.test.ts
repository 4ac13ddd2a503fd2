// The state-log trim on real processes (issue 14): three `crewlet run` members, R3, with the
// retention duty's tick, margin and unheard hold shortened by the testing block. The trim
// runs and GET /estate shows its conclusion; `crewlet estate hold` stops it and release lets
// it go on; a member stopped and back within the unheard hold holds the log at its position
// while away, catches up from the log on its return (no snapshot), and the trim then moves
// past it; a stopped member holds the log at its last position while unheard from, is let go
// past the hold, and when restarted restores from the snapshot and converges; a fourth data
// node joining the trimmed fleet restores and converges too.
import { afterAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { digestTables } from "../../src/estate/digest.ts";
import { ESTATE_DB_FILE } from "../../src/estate/estate.ts";
import { makeFleet, type Fleet, type FleetNode } from "../support/fleet.ts";

const POLL_MS = 250;
/** A member stops and starts again well inside it (about 2 s measured, under load ~9). */
const UNHEARD_HOLD_S = 30;

const fleets: Fleet[] = [];
afterAll(async () => {
  for (const f of fleets) await f.stop();
});

async function waitFor<T>(what: string, timeout_ms: number, probe: () => Promise<T | null>): Promise<T> {
  const started = Date.now();
  let last: unknown = null;
  while (Date.now() - started < timeout_ms) {
    try {
      const v = await probe();
      if (v !== null) return v;
    } catch (err) {
      last = err;
    }
    await Bun.sleep(POLL_MS);
  }
  throw new Error(`${what}: not within ${timeout_ms} ms${last ? ` (last error: ${String(last)})` : ""}`);
}

interface Conclusion {
  outcome: string;
  floor: number | null;
  holding: string | null;
  log: { first_seq: number; last_seq: number } | null;
  terms: { key: string; kind: string; position: number }[];
  released: string[];
  at: number;
}
interface EstateView {
  domains: Record<string, { applied: number; log_last: number | null; in_service: boolean }>;
  retention: Record<string, { hold: { position: number; by: string } | null; conclusion: Conclusion | null }>;
}

async function estateOf(n: FleetNode): Promise<EstateView> {
  const res = await n.get("/estate");
  if (!res.ok) throw new Error(`GET /estate on ${n.id}: ${res.status}`);
  return (await res.json()) as EstateView;
}

/** A chat conclusion written after `after` that satisfies `ok`. */
async function chatConclusion(n: FleetNode, after: number, what: string, ok: (c: Conclusion, v: EstateView) => boolean, timeout_ms = 60_000): Promise<Conclusion> {
  let seen: Conclusion | null = null;
  try {
    return await waitFor(what, timeout_ms, async () => {
      const v = await estateOf(n);
      const c = v.retention.chat?.conclusion ?? null;
      seen = c;
      return c && c.at > after && ok(c, v) ? c : null;
    });
  } catch (err) {
    throw new Error(`${(err as Error).message}; last conclusion: ${JSON.stringify(seen)}`);
  }
}

/** Posts as a client would: a 503 (no data node could answer just then — e.g. every copy's
 *  log consumer lived on the member that just left, until they restart) is retried after its
 *  Retry-After, for up to a minute. */
async function post(n: FleetNode, count: number, tag: string): Promise<void> {
  for (let i = 0; i < count; i++) {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const res = await n.post("/chat/channels/general/messages", { body: `${tag} ${i}` });
      if (res.status === 503 && Date.now() < deadline) {
        await Bun.sleep(Math.min(5, Number(res.headers.get("retry-after") ?? "1")) * 1000);
        continue;
      }
      expect(res.status).toBeLessThan(300);
      break;
    }
  }
}

function chatDigest(n: FleetNode): unknown {
  const db = new Database(join(n.dir, "store", ESTATE_DB_FILE), { readonly: true });
  try {
    return digestTables(db, ["chat_channels", "chat_messages", "chat_message_edits", "estate_checkpoints"]);
  } finally {
    db.close();
  }
}

async function level(nodes: FleetNode[]): Promise<void> {
  await waitFor("every copy level and in service", 90_000, async () => {
    const views = await Promise.all(nodes.map(estateOf));
    const last = views[0]!.domains.chat!.log_last;
    return views.every((v) => Object.values(v.domains).every((d) => d.in_service && d.log_last !== null && d.applied === d.log_last)) && views.every((v) => v.domains.chat!.applied === last) ? true : null;
  });
}

describe("the state-log trim on a 3-member R3 fleet", () => {
  test("trimmed below the floor; a hold stops it; a member back within the unheard hold catches up from the log; a stopped member holds the log until let go, then restores from the snapshot; a fourth data node joins by snapshot", async () => {
    const fleet = await makeFleet({
      nodes: ["t1", "t2", "t3", "t4"].map((id) => ({ id, kind: "member" as const })),
      leaseTtlSeconds: 3,
      company: { name: "Trim", providers: { llm: { script: { type: "scripted", rules: [{ reply: "" }] } } }, default_llm: "script", roles: [{ name: "Ops", handle: "ops" }] },
      testing: { retention_tick_seconds: 2, retention_margin_records: 2, retention_unheard_hold_seconds: UNHEARD_HOLD_S, retention_snapshot_max_age_seconds: 0 },
    });
    fleets.push(fleet);
    const [t1, t2, t3, t4] = fleet.nodes as [FleetNode, FleetNode, FleetNode, FleetNode];
    await Promise.all([t1, t2, t3].map((n) => n.start()));
    await Promise.all([t1, t2, t3].map((n) => n.waitReady(120_000)));

    await post(t1, 20, "first");
    await level([t1, t2, t3]);
    let c = await chatConclusion(t1, 0, "a chat trim", (x) => x.outcome === "trimmed" || (x.outcome === "nothing" && (x.log?.first_seq ?? 1) > 1));
    expect(c.log!.first_seq).toBeGreaterThan(1);

    // A hold: the log stays where it starts while more is written.
    const held = await t2.post("/estate/chat/hold", { reason: "backup" });
    expect(held.status).toBe(201);
    const holdAt = Date.now();
    const heldFirst = (await estateOf(t1)).retention.chat!.hold!.position + 1;
    await post(t2, 10, "held");
    c = await chatConclusion(t1, holdAt + 2_500, "a conclusion holding on the hold", (x) => x.holding === "hold");
    expect(c.log!.first_seq).toBe(heldFirst);
    expect((await t3.post("/estate/chat/release", {})).status).toBe(200);
    const released = Date.now();
    c = await chatConclusion(t1, released, "a trim after the release", (x) => x.holding !== "hold" && (x.log?.first_seq ?? 0) > heldFirst);

    // t2 stops and comes back inside the unheard hold: the log is held at its position while
    // it is away, it catches up from the log (no snapshot restore), and the trim then moves on.
    await level([t1, t2, t3]);
    const t2At = (await estateOf(t2)).domains.chat!.applied;
    expect(await t2.stop()).toBe(0);
    const t2Stopped = Date.now();
    await post(t1, 10, "while t2 is away");
    c = await chatConclusion(t1, t2Stopped, "t2 holding the log", (x) => x.terms.some((t) => t.key === "copy:t2" && t.kind === "unheard_copy") && (x.log?.last_seq ?? 0) > t2At);
    expect(c.terms.find((t) => t.key === "copy:t2")!.position).toBe(t2At);
    expect(c.log!.first_seq).toBeLessThanOrEqual(t2At + 1);
    await t2.start();
    await t2.waitReady(120_000);
    const t2Away = Date.now() - t2Stopped;
    // The case's premise, not a timing claim: a return after the hold is the t3 case below.
    if (t2Away >= UNHEARD_HOLD_S * 1000) throw new Error(`t2 took ${t2Away} ms to come back, past the ${UNHEARD_HOLD_S} s unheard hold: this run cannot show a return within it`);
    await level([t1, t2, t3]);
    expect(t2.events("estate_copy_restored")).toEqual([]);
    expect(chatDigest(t2)).toEqual(chatDigest(t1));
    const t2Back = Date.now();
    await post(t1, 10, "t2 back");
    c = await chatConclusion(t1, t2Back, "the log trimmed past t2's old position", (x) => (x.log?.first_seq ?? 0) > t2At + 1 && !x.terms.some((t) => t.key === "copy:t2" && t.kind === "unheard_copy"));

    // t3 stops: its last position holds the log while it is unheard from.
    await level([t1, t2, t3]);
    const t3At = (await estateOf(t3)).domains.chat!.applied;
    expect(await t3.stop()).toBe(0);
    const stopped = Date.now();
    await post(t1, 10, "while t3 is away");
    // (A peer's copy may tie with it at the same position, so the term is looked for, not the holder.)
    c = await chatConclusion(t1, stopped, "t3 holding the log", (x) => x.terms.some((t) => t.key === "copy:t3" && t.kind === "unheard_copy") && (x.log?.last_seq ?? 0) > t3At);
    expect(c.terms.find((t) => t.key === "copy:t3")!.position).toBe(t3At);
    expect(c.floor!).toBeLessThanOrEqual(t3At);
    expect(c.log!.first_seq).toBeLessThanOrEqual(t3At + 1);
    // Past the unheard hold: let go, the log trimmed past it.
    c = await chatConclusion(t1, stopped + UNHEARD_HOLD_S * 1000, "the log trimmed past t3", (x) => (x.log?.first_seq ?? 0) > t3At + 1, 180_000);

    // t3 returns below the log: it restores from the snapshot and converges.
    const t3Start = Date.now();
    await t3.start();
    await t3.waitReady(120_000);
    const t3Ready = Date.now() - t3Start;
    await post(t2, 5, "t3 back");
    await level([t1, t2, t3]);
    expect(t3.events("estate_copy_restored").some((e) => e.domain === "chat")).toBe(true);
    expect(chatDigest(t3)).toEqual(chatDigest(t1));

    // A fourth data node joins the trimmed fleet.
    const t4Start = Date.now();
    await t4.start();
    await t4.waitReady(120_000);
    const t4Ready = Date.now() - t4Start;
    await post(t4, 5, "t4 joined");
    await level([t1, t2, t3, t4]);
    expect(t4.events("estate_copy_restored").length).toBeGreaterThanOrEqual(1);
    expect(chatDigest(t4)).toEqual(chatDigest(t1));
    const trimmed = fleet.nodes.flatMap((n) => n.eventsEver("estate_trimmed"));
    const restoreMs = (n: FleetNode) => n.events("estate_copy_restored").map((e) => `${e.domain} ${e.from}→${e.to}`).join(", ");
    console.log(`estate_trimmed lines: ${trimmed.length}; t2 away ${t2Away} ms (hold ${UNHEARD_HOLD_S} s), caught up from the log; t3 back: ready in ${t3Ready} ms, restored ${restoreMs(t3)}; t4 joined: ready in ${t4Ready} ms, restored ${restoreMs(t4)}`);
  }, 600_000);
});
