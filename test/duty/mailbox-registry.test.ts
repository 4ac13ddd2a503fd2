// The walk's registry step (spec: Seat Ownership § The removed seat, "How the fleet knows a
// mailbox exists"): which seats one listing of crewlet_mailboxes sends to registration, by
// table, and the step on the in-memory store — a second walk writes nothing, a record that
// needs its registration gets it, a listing that fails registers everything one by one.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import type { KvEntry } from "../../src/coord/contract.ts";
import { isWrite } from "../../src/coord/faults.ts";
import { MemoryCoordination, StoreFaults } from "../../src/coord/index.ts";
import { decodeMailboxRecord, encodeRecord, registerSeats, registrationPlan, type MailboxRecord } from "../../src/duty/mailbox-registry.ts";
import { memoryLogger } from "../../src/log.ts";

const settled: MailboxRecord = { handle: "a", registered_at: 1, absent_since: null, retiring: null };
const entry = (key: string, value: Uint8Array): KvEntry => ({ key, value, revision: 7, created: 1, operation: "put" });
const rec = (r: Partial<MailboxRecord>) => entry("a", encodeRecord({ ...settled, ...r }));

describe("registrationPlan (table)", () => {
  const cases: [string, Map<string, KvEntry> | null, "skip" | "create" | "judge" | "read"][] = [
    ["settled record: nothing to write", new Map([["a", rec({})]]), "skip"],
    ["no record: a create, no read", new Map(), "create"],
    ["absence stamped: cleared by the registration", new Map([["a", rec({ absent_since: 5 })]]), "judge"],
    ["retirement in flight: waited out before the mailbox", new Map([["a", rec({ absent_since: 5, retiring: { owner: "x", since: 9 } })]]), "judge"],
    ["unreadable record: replaced", new Map([["a", entry("a", new TextEncoder().encode("{not json"))]]), "judge"],
    ["a record of another shape: replaced", new Map([["a", entry("a", new TextEncoder().encode('{"handle":"a"}'))]]), "judge"],
    ["no listing: read first", null, "read"],
  ];
  for (const [name, listed, want] of cases) {
    test(name, () => {
      const plan = registrationPlan(["a"], listed);
      if (want === "skip") return expect(plan).toEqual([]);
      expect(plan).toHaveLength(1);
      const seen = plan[0]!.seen;
      if (want === "create") expect(seen).toBeNull();
      if (want === "read") expect(seen).toBeUndefined();
      if (want === "judge") expect(seen).toBe(listed!.get("a")!);
    });
  }
  test("a handle named twice is visited once", () => {
    expect(registrationPlan(["a", "b", "a"], new Map()).map((v) => v.handle)).toEqual(["a", "b"]);
  });
});

describe("registerSeats on the in-memory store", () => {
  async function store() {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const { log, sink } = memoryLogger("debug", clock);
    const faults = new StoreFaults(clock);
    const coord = new MemoryCoordination({ clock, log, lease_ttl_ms: 45_000 });
    const registry = coord.node({ faults }).slot("mailboxes");
    const writes: string[] = [];
    const reads: string[] = [];
    faults.onOp = (op) => {
      if (isWrite(op)) writes.push(`${op.kind} ${op.key}`);
      else if (op.kind === "get") reads.push(op.key!);
    };
    return { clock, log, sink, faults, registry, writes, reads };
  }

  test("the first walk creates each record without reading it; a second writes nothing", async () => {
    const s = await store();
    const first = await registerSeats(s.registry, ["a", "b", "c"], s.clock, s.log);
    expect(first).toMatchObject({ registry_listed: true, registry_visited: 3, registered: 3, unregistered: 0 });
    expect(s.writes.sort()).toEqual(["create a", "create b", "create c"]);
    expect(s.reads).toEqual([]);
    s.writes.length = 0;
    const again = await registerSeats(s.registry, ["a", "b", "c"], s.clock, s.log);
    expect(again).toMatchObject({ registry_listed: true, registry_visited: 0, registered: 0 });
    expect(s.writes).toEqual([]);
    expect(s.reads).toEqual([]);
  });

  test("a stamped absence is cleared (seat_mailbox_returned); only that seat is written", async () => {
    const s = await store();
    await registerSeats(s.registry, ["a", "b"], s.clock, s.log);
    const e = (await s.registry.get("a"))!;
    await s.registry.update("a", encodeRecord({ ...decodeMailboxRecord(e)!, absent_since: 5 }), e.revision);
    s.writes.length = 0;
    const out = await registerSeats(s.registry, ["a", "b"], s.clock, s.log);
    expect(out.registry_visited).toBe(1);
    expect(s.writes).toEqual(["update a"]);
    expect(decodeMailboxRecord((await s.registry.get("a"))!)!.absent_since).toBeNull();
    expect(s.sink.events("seat_mailbox_returned").map((l) => l.fields.seat)).toEqual(["a"]);
  });

  test("a listing that fails registers every seat one by one; a write that fails is seat_mailbox_unregistered", async () => {
    const s = await store();
    await registerSeats(s.registry, ["a"], s.clock, s.log);
    s.faults.failNext((op) => op.kind === "entries");
    s.faults.failNext((op) => op.kind === "create" && op.key === "c");
    const out = await registerSeats(s.registry, ["a", "b", "c"], s.clock, s.log);
    expect(out).toMatchObject({ registry_listed: false, registry_visited: 3, registered: 1, unregistered: 1 });
    expect(s.sink.events("seat_mailbox_registry_list_failed")).toHaveLength(1);
    expect(s.sink.events("seat_mailbox_unregistered").map((l) => l.fields.seat)).toEqual(["c"]);
    expect((await s.registry.keys()).sort()).toEqual(["a", "b"]);
  });

  test("a peer's record landing between the listing and the create is judged, not overwritten", async () => {
    const s = await store();
    // The listing sees no record for b; a peer registers it before this node's create.
    s.faults.onOp = async (op) => {
      if (op.kind === "create" && op.key === "b" && !(await s.registry.get("b").catch(() => null))) {
        s.faults.onOp = null;
        await s.registry.create("b", encodeRecord({ ...settled, handle: "b", registered_at: 42 }));
      }
    };
    const out = await registerSeats(s.registry, ["b"], s.clock, s.log);
    expect(out).toMatchObject({ registered: 0, unregistered: 0 });
    expect(decodeMailboxRecord((await s.registry.get("b"))!)!.registered_at).toBe(42);
  });
});
