// A graceful stop ends in a bounded, explained time even when the fleet loses quorum under
// it, on real processes: three `crewlet run` members R3 at the shipped lease TTL (45 s) with
// six seats. SIGTERM to all three at once (what `systemctl stop` on every box does) left
// the last member draining without quorum for 5 minutes — its estate applier re-creating a
// consumer no member could place, awaited by a stop budget that was only checked between
// steps. Now every member exits 0 well within a generous 60 s (the node's own budget is
// STOP_TOTAL_BUDGET_MS, under the unit's TimeoutStopSec), every seat it held is either
// given back or named as left (seat_release_abandoned: its lease lapses at the TTL), every
// step it cut short is named (node_stop_step_abandoned / _skipped), and a restart of all
// three holds every seat once. Then the same with the last member alone: the other two
// stopped first, it stops with no quorum at all and names every seat it could not give back.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { makeFleet, waitFor, type Fleet, type FleetNode } from "../support/fleet.ts";

const SEATS = 6;
const HANDLES = Array.from({ length: SEATS }, (_, i) => `agent-${i}`);
/** Generous over the node's own stop bound (42 s): a loaded 2-core box, a chaos run beside it. */
const EXIT_WITHIN_MS = 60_000;
/** Generous: a loaded box boots three members and places six seats well within this. */
const READY_WITHIN_MS = 120_000;

interface Lease {
  handle: string;
  node: string;
}

let fleet: Fleet;
let members: FleetNode[];
beforeAll(async () => {
  const roles = [...HANDLES.map((handle, i) => ({ name: `Agent ${i}`, handle })), { name: "Founder", handle: "founder", kind: "human" }];
  fleet = await makeFleet({
    nodes: [
      { id: "a", kind: "member" },
      { id: "b", kind: "member" },
      { id: "c", kind: "member" },
    ],
    // The shipped TTL: a seat whose holder loses quorum is not fenced within the stop, so
    // its drain meets the lease store without quorum (a short TTL would fence it first).
    leaseTtlSeconds: 45,
    company: { name: "Stop Co", providers: { llm: { script: { type: "scripted", rules: [{ reply: "" }] } } }, default_llm: "script", roles },
  });
  members = ["a", "b", "c"].map((id) => fleet.node(id));
  await Promise.all(members.map((n) => n.start()));
  await Promise.all(members.map((n) => n.waitReady(READY_WITHIN_MS)));
}, 2 * READY_WITHIN_MS);
afterAll(async () => {
  await fleet?.stop();
});

/** Every seat held exactly once (GET /fleet on every member), each holder's /health agreeing. */
async function everySeatHeldOnce(): Promise<Lease[]> {
  return waitFor(
    `${SEATS} seats each held once`,
    async () => {
      const res = await members[0]!.get("/fleet");
      if (!res.ok) return null;
      const { leases } = (await res.json()) as { leases: Lease[] };
      const seatLeases = leases.filter((l) => HANDLES.includes(l.handle));
      if (seatLeases.length !== SEATS || new Set(seatLeases.map((l) => l.handle)).size !== SEATS) return null;
      const held: string[] = [];
      for (const n of members) held.push(...(await heldBy(n)));
      return held.length === SEATS && new Set(held).size === SEATS ? seatLeases : null;
    },
    READY_WITHIN_MS,
    () => members.map((n) => `--- ${n.id}\n${n.log().slice(-1500)}`).join("\n"),
  );
}

async function heldBy(n: FleetNode): Promise<string[]> {
  const body = (await (await fetch(`${n.apiUrl}/health`)).json()) as { seats?: { held: string[] } };
  return body.seats?.held ?? [];
}

/** Each seat ran a turn, so the stop has memory, the estate's chat log and acks to settle. */
async function everySeatRanATurn(): Promise<void> {
  const before = members.flatMap((n) => n.events("turn_completed")).length;
  for (const h of HANDLES) expect((await members[0]!.post("/chat/channels/general/messages", { body: `@${h} status?`, author: "founder" })).status).toBeLessThan(300);
  await waitFor("every seat ran its turn", async () => {
    const ran = new Set(members.flatMap((n) => n.events("turn_completed")).map((e) => e.seat));
    return HANDLES.every((h) => ran.has(h)) && members.flatMap((n) => n.events("turn_completed")).length >= before + SEATS ? true : null;
  }, READY_WITHIN_MS);
}

interface StopFacts {
  id: string;
  code: number;
  exit_ms: number;
  took_ms: number;
  released: string[];
  abandoned: string[];
  steps_left: string[];
  /** Leaderships its hand-offs could not pass on (no peer to elect): told, not asserted. */
  leaders_left: number;
}

/** SIGTERMs `nodes` at once and reads, per node, how its stop went from its log. */
async function sigtermAtOnce(nodes: FleetNode[]): Promise<StopFacts[]> {
  const t0 = Date.now();
  for (const n of nodes) n.kill("SIGTERM");
  const exits = await Promise.all(nodes.map(async (n) => ({ n, code: await n.exited(), exit_ms: Date.now() - t0 })));
  return exits.map(({ n, code, exit_ms }) => {
    const stopped = n.events("node_stopped");
    expect(stopped).toHaveLength(1);
    const drained = n.events("seat_drain_finished");
    expect(drained).toHaveLength(1);
    return {
      id: n.id,
      code,
      exit_ms,
      took_ms: Number(stopped[0]!.took_ms),
      released: drained[0]!.released as string[],
      abandoned: drained[0]!.abandoned as string[],
      steps_left: (stopped[0]!.steps_abandoned as string[] | undefined) ?? [],
      leaders_left: [...n.events("broker_streams_not_handed_off").map((e) => e.streams), ...n.events("queue_leaders_not_handed_off").map((e) => e.consumers)].flat().length,
    };
  });
}

/** What each stop says it left is named line by line: every seat, every step. */
function expectLeftoversNamed(n: FleetNode, f: StopFacts): void {
  expect(n.events("seat_release_abandoned").map((e) => e.seat).sort()).toEqual([...f.abandoned].sort());
  for (const e of n.events("seat_release_abandoned")) {
    expect(typeof e.left).toBe("string");
    expect(e.lapses_within_ms).toBe(45_000);
  }
  const named = [...n.events("node_stop_step_abandoned"), ...n.events("node_stop_step_skipped")].map((e) => e.step).sort();
  expect(named).toEqual([...f.steps_left].sort());
}

function describeStops(title: string, facts: StopFacts[]): void {
  console.log(
    `${title}: ` +
      facts
        .map((f) => `${f.id} exit ${f.code} after ${f.exit_ms} ms (node says ${f.took_ms} ms), released [${f.released.join(",")}], abandoned [${f.abandoned.join(",")}], steps left [${f.steps_left.join(",")}], leaderships not handed off ${f.leaders_left}`)
        .join("; "),
  );
}

/** Placement settled at two seats a member, so no seat is moving when the stop comes. */
async function balanced(): Promise<Map<string, string[]>> {
  await everySeatHeldOnce();
  return waitFor(
    "two seats on each member",
    async () => {
      const held = new Map<string, string[]>();
      for (const n of members) held.set(n.id, await heldBy(n));
      return [...held.values()].every((h) => h.length === SEATS / members.length) ? held : null;
    },
    READY_WITHIN_MS,
  );
}

test("SIGTERM to all three members at once: each exits 0 within the bound, naming what it left; a restart of all three holds every seat", async () => {
  await everySeatHeldOnce();
  await everySeatRanATurn();
  const held = await balanced();
  const facts = await sigtermAtOnce(members);
  describeStops("all three at once", facts);
  for (const f of facts) {
    expect(f.code).toBe(0);
    expect(f.exit_ms).toBeLessThan(EXIT_WITHIN_MS);
    expectLeftoversNamed(fleet.node(f.id), f);
  }
  // Every seat its holder had is accounted for: given back, or named as left to lapse.
  // A node may also name a seat it claimed from a peer that stopped first (b gave agent-0 back,
  // c took it, then gave it back too), so what it held is contained in what it names.
  for (const f of facts) expect([...held.get(f.id)!].filter((s) => ![...f.released, ...f.abandoned].includes(s))).toEqual([]);

  await Promise.all(members.map((n) => n.start()));
  await Promise.all(members.map((n) => n.waitReady(READY_WITHIN_MS)));
  await everySeatHeldOnce();
}, 6 * 60_000);

test("the last member alone, with no quorum left: it exits 0 within the bound and names every seat it could not give back; a restart holds every seat", async () => {
  await everySeatHeldOnce();
  // The two holding the fewest seats go first; the one holding the most stops last, alone.
  const held = new Map<string, string[]>();
  for (const n of members) held.set(n.id, await heldBy(n));
  const order = [...members].sort((x, y) => held.get(x.id)!.length - held.get(y.id)!.length);
  const last = order[2]!;
  const first = await sigtermAtOnce(order.slice(0, 2));
  describeStops("first two", first);
  for (const f of first) expect(f.code).toBe(0);
  // What the last one holds now, read locally (its /health needs no quorum); a seat the
  // first two gave back may have reached it before their brokers went.
  const lastHeld = await heldBy(last);
  expect(lastHeld.length).toBeGreaterThan(0);

  const [alone] = await sigtermAtOnce([last]);
  describeStops("the last one, alone", [alone!]);
  expect(alone!.code).toBe(0);
  expect(alone!.exit_ms).toBeLessThan(EXIT_WITHIN_MS);
  expectLeftoversNamed(last, alone!);
  // No lease store to answer: not one seat could be given back, and each is named. It may
  // also name a seat the first two gave back whose claim it had written before their brokers
  // went and attached after lastHeld was read (a clean-clone CI run: lastHeld [agent-2,
  // agent-3, agent-5], abandoned all six); it names nothing else.
  expect(alone!.released).toEqual([]);
  expect(lastHeld.filter((s) => !alone!.abandoned.includes(s))).toEqual([]);
  const givenBack = first.flatMap((f) => f.released);
  expect(alone!.abandoned.filter((s) => !lastHeld.includes(s) && !givenBack.includes(s))).toEqual([]);

  await Promise.all(members.map((n) => n.start()));
  await Promise.all(members.map((n) => n.waitReady(READY_WITHIN_MS)));
  await everySeatHeldOnce();
}, 6 * 60_000);
