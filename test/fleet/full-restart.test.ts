// A full-fleet restart comes back by itself (issue 11 item 5): three `crewlet run` members
// R3 and a leaf on 127.0.0.1, every process killed -9 at once, then started again one by
// one in a seeded shuffled order (CREWLET_FULL_RESTART_SEED replays another) with a gap of
// over a minute after the first member — long enough that any boot step with a bounded wait
// for quorum would have given up (the ~30 s that made every node's first boot fail, exit 1).
// Each node started while no quorum could exist must wait without exiting, say so in
// progress lines (node_boot_waiting_for_quorum) and name the step it waits at on /ready;
// once the other members are back every node is ready and every seat is held exactly once.
// Nothing here times anything beyond generous bounds.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { makeFleet, waitFor, type Fleet, type FleetNode } from "../support/fleet.ts";
import { rng } from "../support/rng.ts";

/** Seed 1 starts the leaf first, then one member alone for the long gap, then the others. */
const SEED = Number(process.env.CREWLET_FULL_RESTART_SEED ?? 1);
const SEATS = 6;
const TTL_S = 6;
/** After the first member's start: past the ~30 s a bounded boot step used to wait, with
 * room for a dozen of its progress lines (one every 5 s). */
const LONELY_GAP_MS = 65_000;
/** The other gaps, drawn per start: any delay, short enough to keep the file under 4 min. */
const OTHER_GAP_MS_MAX = 8_000;
/** Generous: a loaded 2-core box (a chaos run beside it) boots a node in well under this. */
const READY_WITHIN_MS = 120_000;
const POLL_MS = 1_000;
/** Generous over the node's 5 s progress cadence (QUORUM_PROGRESS_EVERY_MS). */
const PROGRESS_SILENCE_MS_MAX = 30_000;

interface Lease {
  handle: string;
  node: string;
}

let fleet: Fleet;
beforeAll(async () => {
  const roles = Array.from({ length: SEATS }, (_, i) => ({ name: `Agent ${i}`, handle: `agent-${i}` }));
  fleet = await makeFleet({
    nodes: [
      { id: "a", kind: "member" },
      { id: "b", kind: "member" },
      { id: "c", kind: "member" },
      { id: "l", kind: "leaf" },
    ],
    leaseTtlSeconds: TTL_S,
    company: { name: "Restart", providers: { llm: { script: { type: "scripted", rules: [{ reply: "" }] } } }, default_llm: "script", roles },
  });
  await Promise.all(fleet.nodes.map((n) => n.start()));
  await Promise.all(fleet.nodes.map((n) => n.waitReady(READY_WITHIN_MS)));
  await everySeatHeldOnce(fleet.node("a"));
}, 2 * READY_WITHIN_MS);
afterAll(async () => {
  await fleet?.stop();
});

/** Every seat held exactly once (GET /fleet), and each holder's /health agreeing. */
async function everySeatHeldOnce(observer: FleetNode): Promise<Lease[]> {
  return waitFor(
    `${SEATS} seats each held once`,
    async () => {
      const res = await observer.get("/fleet");
      if (!res.ok) return null;
      const { leases } = (await res.json()) as { leases: Lease[] };
      if (leases.length !== SEATS || new Set(leases.map((l) => l.handle)).size !== SEATS) return null;
      const held: string[] = [];
      for (const n of fleet.nodes) {
        const body = (await (await fetch(`${n.apiUrl}/health`)).json()) as { seats?: { held: string[] } };
        held.push(...(body.seats?.held ?? []));
      }
      return held.length === SEATS && new Set(held).size === SEATS ? leases : null;
    },
    READY_WITHIN_MS,
    () => fleet.nodes.map((n) => `--- ${n.id}\n${n.log().slice(-1500)}`).join("\n"),
  );
}

/** The seeded start order, and the delay before each start (the first after the kill). */
function plan(): { node: FleetNode; delay_ms: number }[] {
  const rand = rng(SEED);
  const order = [...fleet.nodes];
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  let membersBefore = 0;
  return order.map((node, i) => {
    // The long gap comes right after the first member: it, and anything started with it,
    // has no quorum for all of it.
    const delay_ms = i === 0 ? 0 : membersBefore === 1 && order[i - 1]!.id !== "l" ? LONELY_GAP_MS : Math.floor(rand() * OTHER_GAP_MS_MAX);
    if (node.id !== "l") membersBefore++;
    return { node, delay_ms };
  });
}

test(`kill -9 of the whole fleet, restarted in a shuffled order with a gap over a minute (seed ${SEED}): every node comes back by itself`, async () => {
  for (const n of fleet.nodes) n.kill("SIGKILL");
  await Promise.all(fleet.nodes.map((n) => n.exited()));

  const starts = plan();
  console.log(`full restart, seed ${SEED}: ${starts.map((s) => `${s.node.id} after ${s.delay_ms} ms`).join(", ")}`);
  const firstMember = starts.findIndex((s) => s.node.id !== "l");
  // Started while no quorum can exist: everything up to the first member, and the first
  // member itself (the long gap follows it).
  const lonely = starts.slice(0, firstMember + 1).map((s) => s.node);
  const readyWhileWaiting = new Map<string, string[]>();
  /** Node → how it ended, as first seen (polled once a second through every gap). */
  const exitedEarly = new Map<string, string>();

  for (const [i, s] of starts.entries()) {
    if (s.delay_ms > 0) {
      // Poll the nodes already started through the gap: still running, /ready 503 with why.
      const until = Date.now() + s.delay_ms;
      while (Date.now() < until) {
        for (const n of starts.slice(0, i).map((x) => x.node)) {
          const ended = n.proc?.exitCode ?? n.proc?.signalCode ?? null;
          if (ended !== null && !exitedEarly.has(n.id)) exitedEarly.set(n.id, `${n.id} exited ${ended} during the gap before ${s.node.id}:\n${n.log().slice(-1500)}`);
          // Judged only while at most one member runs: no quorum can exist yet.
          if (!lonely.includes(n) || starts.slice(0, i).filter((x) => x.node.id !== "l").length > 1) continue;
          const res = await fetch(`${n.apiUrl}/ready`).catch(() => null);
          if (!res) continue; // its API not listening yet
          const body = (await res.json()) as { ready: boolean; reason?: string };
          readyWhileWaiting.set(n.id, [...(readyWhileWaiting.get(n.id) ?? []), res.status === 200 ? "READY" : String(body.reason)]);
        }
        await Bun.sleep(Math.min(POLL_MS, Math.max(0, until - Date.now())));
      }
    }
    await s.node.start();
  }
  expect([...exitedEarly.values()]).toEqual([]);

  // Every node ready, none exited on the way, every seat held exactly once.
  await Promise.all(fleet.nodes.map((n) => n.waitReady(READY_WITHIN_MS)));
  const leases = await everySeatHeldOnce(fleet.node(starts.at(-1)!.node.id));
  expect(new Set(leases.map((l) => l.handle)).size).toBe(SEATS);
  for (const n of fleet.nodes) {
    expect(n.incarnations()).toBe(2);
    expect(n.proc?.exitCode ?? null).toBeNull();
    expect(n.events("node_boot_failed")).toEqual([]);
  }

  // The nodes that waited said so: /ready named the step they waited at, never ready
  // before a second member was back, and their logs carry progress lines through the gap.
  for (const n of lonely) {
    const said = readyWhileWaiting.get(n.id) ?? [];
    console.log(`${n.id} while alone: ${[...new Set(said)].join(" | ")}`);
    expect(said.length).toBeGreaterThan(10);
    expect(said.filter((r) => r === "READY")).toEqual([]);
    for (const r of said) expect(r).toMatch(/^booting: \S+/);
    expect(said.some((r) => r.includes("waiting for quorum"))).toBe(true);
    const progress = n.events("node_boot_waiting_for_quorum");
    console.log(`${n.id} waiting lines: ${progress.map((e) => `${String(e.step)}@${String(e.waited_ms)}`).join(", ")}`);
    // One every 5 s (a step's first attempt may spend a 10 s request timeout) through a gap
    // of over a minute, whichever steps the wait fell in: many lines, spanning most of the
    // gap, never silent for long.
    expect(progress.length).toBeGreaterThanOrEqual(8);
    const at = progress.map((e) => Date.parse(String(e.ts)));
    expect(at.at(-1)! - at[0]!).toBeGreaterThanOrEqual(LONELY_GAP_MS / 2);
    const silences = at.slice(1).map((t, k) => t - at[k]!);
    expect(silences.filter((ms) => ms > PROGRESS_SILENCE_MS_MAX)).toEqual([]);
  }
}, 4 * 60_000);
