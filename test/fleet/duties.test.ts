// Singleton duties on real processes (issue 14): three `crewlet run` members, R3,
// embedded-kv coordination. A 1 s cron fires exactly once per instant fleet-wide while
// members are killed (-9), drained and restarted — counted where it matters, in what the
// seat's inbox stream stored, through a stream of the test's own sourcing it; the scheduler duty moves at once after a
// drain and within one duty TTL after kill -9 of its holder, whose missed ticks fire once
// (schedule_catch_up). Bounds carry slack for a loaded 2-core box; bench/duties.ts prints
// the figures.
import { afterAll, describe, expect, test } from "bun:test";
import { AckPolicy, connect, DeliverPolicy, type NatsConnection } from "nats";
import { SCHEDULER_TICK_MS, SCHEDULER_TTL_MS } from "../../src/duty/duties.ts";
import { decodeTrigger } from "../../src/org/trigger.ts";
import { AGENT_STREAMS, mailboxStream, mailboxSubject } from "../../src/queue/topics.ts";
import { makeFleet, type Fleet, type FleetNode } from "../support/fleet.ts";

const SLACK_MS = 15_000;
/** The test's copy of the seat's inbox (see below). */
const FIRES_STREAM = "TEST_FIRES";
const POLL_MS = 200;

const fleets: Fleet[] = [];
const connections: NatsConnection[] = [];
afterAll(async () => {
  for (const nc of connections) await nc.close().catch(() => {});
  for (const f of fleets) await f.stop();
});

interface DutyHolding {
  duty: string;
  node: string;
  epoch: number;
  last_tick: { at: number; duration_ms: number; outcome: string } | null;
}

async function waitFor<T>(what: string, timeout_ms: number, probe: () => Promise<T | null>): Promise<{ value: T; elapsed_ms: number }> {
  const started = Date.now();
  let last: unknown = null;
  while (Date.now() - started < timeout_ms) {
    try {
      const v = await probe();
      if (v !== null) return { value: v, elapsed_ms: Date.now() - started };
      last = null;
    } catch (err) {
      last = err;
    }
    await Bun.sleep(POLL_MS);
  }
  throw new Error(`${what}: not within ${timeout_ms} ms${last ? ` (last error: ${String(last)})` : ""}`);
}

async function schedulerHolder(observer: FleetNode, not?: string): Promise<DutyHolding | null> {
  const res = await observer.get("/fleet");
  if (!res.ok) return null;
  const body = (await res.json()) as { duties: DutyHolding[] | null };
  const d = body.duties?.find((x) => x.duty === "scheduler") ?? null;
  if (!d || d.node === not) return null;
  return d;
}

describe("singleton duties on a 3-member R3 fleet", () => {
  test("a 1 s schedule fires exactly once per instant through kill -9, drain and restart; the duty moves at once after a drain and within its TTL after kill -9", async () => {
    const company = {
      name: "Duties",
      providers: { llm: { script: { type: "scripted", rules: [{ reply: "" }] } } },
      default_llm: "script",
      roles: [{ name: "Ops", handle: "ops" }],
      schedules: [{ id: "beat", cron: "* * * * * *", seat: "ops", prompt: "tick" }],
    };
    const fleet = await makeFleet({ nodes: ["d1", "d2", "d3"].map((id) => ({ id, kind: "member" as const })), leaseTtlSeconds: 3, company });
    fleets.push(fleet);
    await Promise.all(fleet.nodes.map((n) => n.start()));
    await Promise.all(fleet.nodes.map((n) => n.waitReady(90_000)));
    const [d1] = fleet.nodes;
    // Each member's sidecar mints its own client credential per boot: connect to one
    // member with its own, for as long as it lives.
    const natsTo = async (n: FleetNode) => {
      const auth = n.natsAuth();
      const nc = await connect({ servers: `127.0.0.1:${n.clientPort}`, user: auth.user, pass: auth.pass });
      connections.push(nc);
      return nc;
    };
    const setupNc = await natsTo(d1!);
    const jsm = await setupNc.jetstreamManager();
    // A stream of the test's own sourcing the seat's inbox: a copy of every message the mail
    // stream stored (after its duplicate window), made as it is stored, and kept after the
    // seat's holder has read the original and trimmed it (limits retention, queue/trim.ts).
    await jsm.streams.add({ name: FIRES_STREAM, num_replicas: 3, sources: [{ name: mailboxStream("ops"), filter_subject: mailboxSubject("ops", "inbox") }] });
    await jsm.consumers.add(FIRES_STREAM, { durable_name: "test-fire-count", ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, max_ack_pending: -1 });
    await setupNc.close();
    const t0 = Date.now();

    const first = (await waitFor("a scheduler holder", 60_000, () => schedulerHolder(d1!))).value;
    const others = (id: string) => fleet.nodes.filter((n) => n.id !== id);

    // 1. kill -9 a member that does not hold the duty, and bring it back.
    const bystander = others(first.node)[0]!;
    bystander.kill("SIGKILL");
    await bystander.exited();
    await Bun.sleep(3_000);
    await bystander.start();
    await bystander.waitReady(90_000);

    // 2. drain the holder: the duty is given back (duty_released) and a peer takes it at once.
    const h1 = fleet.node(first.node);
    const observer1 = others(h1.id)[0]!;
    const drained = Date.now();
    await h1.stop();
    expect(h1.events("duty_released").some((e) => e.duty === "scheduler")).toBe(true);
    const afterDrain = await waitFor("the scheduler moving after a drain", SCHEDULER_TICK_MS + SLACK_MS, () => schedulerHolder(observer1, h1.id));
    const drainMove_ms = Date.now() - drained;
    await h1.start();
    await h1.waitReady(90_000);

    // 3. kill -9 the new holder: its duty lapses and a peer takes it within one duty TTL.
    const h2 = fleet.node(afterDrain.value.node);
    const observer2 = others(h2.id)[0]!;
    h2.kill("SIGKILL");
    await h2.exited();
    const killed = Date.now();
    const afterKill = await waitFor("the scheduler moving after kill -9", SCHEDULER_TTL_MS + SLACK_MS, () => schedulerHolder(observer2, h2.id));
    const killMove_ms = Date.now() - killed;
    const h3 = fleet.node(afterKill.value.node);
    // The instants that fell due while nobody ran it fire once, and the catch-up is logged.
    await waitFor("schedule_catch_up on the new holder", SLACK_MS, async () => (h3.events("schedule_catch_up").length > 0 ? true : null));
    await h2.start();
    await h2.waitReady(90_000);
    // A stretch of quiet firing after the faults, so the count covers well over 20 ticks.
    await Bun.sleep(25_000);

    // Count what the inbox stream holds.
    const nc = await natsTo(observer2);
    const consumer = await nc.jetstream().consumers.get(FIRES_STREAM, "test-fire-count");
    // Up to now: the schedule keeps firing while the test reads, so the read ends at the
    // first instant past this cut (or an empty fetch), bounded by a number of fetches.
    const cut = Date.now();
    const ids: string[] = [];
    let past = false;
    for (let fetches = 0; fetches < 100 && !past; fetches++) {
      const batch = await consumer.fetch({ max_messages: 256, expires: 2_000 });
      let got = 0;
      for await (const m of batch) {
        got++;
        m.ack();
        const t = decodeTrigger(m.data);
        if (!t.ok || t.trigger.type !== "schedule") continue;
        if (t.trigger.created_at > cut) past = true;
        else ids.push(t.trigger.event_id);
      }
      if (got === 0) break;
    }
    const elapsed_s = (cut - t0) / 1000;
    const instants = ids.map((id) => Number(id.split(":")[2]));
    console.log(`fires: ${ids.length} distinct instants over ${elapsed_s.toFixed(0)} s; drain → moved ${drainMove_ms} ms; kill -9 → moved ${killMove_ms} ms`);
    // Exactly once: no instant twice in the inbox.
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBeGreaterThanOrEqual(20);
    // In order of instant, each a whole second.
    expect(instants.every((t) => t % 1000 === 0)).toBe(true);
    expect([...instants].sort((a, b) => a - b)).toEqual(instants);
    // Never two holders' fires for one instant: every fire any incarnation logged is unique.
    const logged = fleet.nodes.flatMap((n) => n.eventsEver("schedule_fired")).map((e) => String(e.event_id));
    expect(new Set(logged).size).toBe(logged.length);
    expect(drainMove_ms).toBeLessThan(SCHEDULER_TICK_MS + SLACK_MS);
    expect(killMove_ms).toBeLessThan(SCHEDULER_TTL_MS + SLACK_MS);

    // GET /schedules names the next fire and how the last one went, on any node.
    const res = await observer2.get("/schedules");
    expect(res.status).toBe(200);
    const body = (await res.json()) as { schedules: { id: string; next_fire: string | null; last_fire: { outcome: string } | null }[] };
    expect(body.schedules[0]).toMatchObject({ id: "beat" });
    expect(body.schedules[0]!.next_fire).not.toBeNull();
    expect(body.schedules[0]!.last_fire?.outcome).toBe("fired");
  }, 420_000);
});

describe("removed-seat mailbox retirement on a 3-member R3 fleet", () => {
  test("a seat removed by a config revision has its mailbox retired after the grace, never before; the seats left keep theirs", async () => {
    const GRACE_S = 6;
    const roles = [{ name: "Ops", handle: "ops" }, { name: "Temp", handle: "temp" }];
    const company = (rs: typeof roles) => ({
      name: "Retire",
      providers: { llm: { script: { type: "scripted", rules: [{ reply: "" }] } } },
      default_llm: "script",
      roles: rs,
    });
    const fleet = await makeFleet({
      nodes: ["r1", "r2", "r3"].map((id) => ({ id, kind: "member" as const })),
      leaseTtlSeconds: 3,
      company: company(roles),
      testing: { mailbox_grace_seconds: GRACE_S, maintenance_tick_seconds: 2 },
    });
    fleets.push(fleet);
    await Promise.all(fleet.nodes.map((n) => n.start()));
    await Promise.all(fleet.nodes.map((n) => n.waitReady(90_000)));
    const [r1] = fleet.nodes;
    const auth = r1!.natsAuth();
    const nc = await connect({ servers: `127.0.0.1:${r1!.clientPort}`, user: auth.user, pass: auth.pass });
    connections.push(nc);
    const jsm = await nc.jetstreamManager();
    const consumers = async () => {
      const names: string[] = [];
      for (const stream of AGENT_STREAMS) for await (const c of jsm.consumers.list(stream)) names.push(c.name);
      return names.filter((n) => n.startsWith("agent-")).sort();
    };
    // Two mailboxes a seat (SEAT_MAILBOX_KINDS: inbox and reflect; no sandbox control).
    const all = ["agent-ops", "agent-ops-reflect", "agent-temp", "agent-temp-reflect"];
    expect(await consumers()).toEqual(all);

    const removed = Date.now();
    const res = await r1!.post("/config/revisions", { company: company([roles[0]!]) });
    expect(res.status).toBe(201);
    const retired = await waitFor("seat_mailbox_retired for @temp", 90_000, async () => {
      for (const n of fleet.nodes) {
        const e = n.events("seat_mailbox_retired").find((x) => x.seat === "temp");
        if (e) return { node: n.id, line: e };
      }
      return null;
    });
    const elapsed_ms = Date.now() - removed;
    console.log(`@temp retired by ${retired.value.node} ${elapsed_ms} ms after its removal (grace ${GRACE_S} s)`);
    // Never early: the grace runs from a sweep's first sight of the absence.
    expect(elapsed_ms).toBeGreaterThanOrEqual(GRACE_S * 1000);
    const absent = fleet.nodes.flatMap((n) => n.events("seat_mailbox_absent")).filter((e) => e.seat === "temp");
    expect(absent.length).toBeGreaterThanOrEqual(1);
    expect(typeof absent[0]!.retire_at).toBe("string");
    expect(await consumers()).toEqual(["agent-ops", "agent-ops-reflect"]);

    // Added back: a new, empty mailbox, registered again.
    const back = await r1!.post("/config/revisions", { company: company(roles) });
    expect(back.status).toBe(201);
    await waitFor("@temp's mailboxes again", 30_000, async () => ((await consumers()).length === all.length ? true : null));
  }, 300_000);
});
