// The chaos run's I/O: a real fleet (three members R3 and one leaf, `crewlet run`
// processes on 127.0.0.1), a TCP proxy in front of every member's cluster and leaf
// listener, a driver posting uniquely identified chat messages through whichever member
// answers, the seeded fault schedule performed one fault at a time, a quiet period, a probe
// of every seat, and then the facts for the checker (checker.ts) gathered from the logs, the
// chat and the broker. test/chaos/chaos.test.ts runs it bounded in CI; bench/chaos.ts runs it
// for as long as it is told.
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { loadavg } from "node:os";
import { connect } from "nats";
import { decodeTrigger } from "../../src/org/trigger.ts";
import { durableName, mailbox, mailboxStream } from "../../src/queue/topics.ts";
import { MAILBOX_CHECK_EVERY_MS } from "../../src/seat/mailbox-watch.ts";
import { makeFleet, TEST_TOKEN, type Fleet, type FleetNode } from "../support/fleet.ts";
import { freePort } from "../support/ports.ts";
import { REQUEST_PREFIX } from "../../src/approvals/words.ts";
import { ARTIFACTS_POST_PREFIX } from "../../src/sandbox/artifacts.ts";
import { check, type ApprovalFact, type ChaosFacts, type DetachLine, type FaultRecord, type Incarnation, type Reply, type RunFact, type SeatLine, type Sent, type Verdict } from "./checker.ts";
import { Partitions, TcpProxy } from "./proxy.ts";
import { planFaults, type Fault } from "./schedule.ts";

/** Two agreeing mailbox-watch checks, and one more period for the reset's redelivery and the
 * turn: how long a stranded delivery takes to be answered once the run is quiet. */
const LATE_HEAL_MS = 3 * MAILBOX_CHECK_EVERY_MS;

export interface ChaosOptions {
  seed: number;
  /** How many faults (CI), or keep faulting until this many ms have passed (the long run). */
  faults: { count: number } | { for_ms: number };
  /** Lease TTL: the issue's runs used 6 s. */
  ttl_ms?: number;
  seats?: number;
  /** One chat message this often, round-robin over the seats. */
  send_every_ms?: number;
  /** After the last fault: traffic goes on this long, then stops, then the probe. */
  quiet_ms?: number;
  /** A probe message must be answered within this long. */
  probe_within_ms?: number;
  /** How long the fleet gets to recover from one fault before the next is performed anyway. */
  recovery_ms_max?: number;
  /** Where to write the checker's facts as JSON, so a run can be judged again (bench/chaos.ts --recheck). */
  factsFile?: string;
  say?: (line: string) => void;
}

export interface ChaosResult {
  verdict: Verdict;
  facts: ChaosFacts;
  seed: number;
  elapsed_ms: number;
  /** 1-minute load average sampled through the run: the box is shared. */
  load: { min: number; max: number; mean: number };
  notes: string[];
}

const MEMBERS = ["a", "b", "c"] as const;
const LEAF = "l";
/** How long the fleet gets to recover from a fault (all ready, every seat held) before the
 * next one is performed anyway — the checker then judges what the mess left. Generous: a
 * full restart of four nodes on a loaded 2-core box takes tens of seconds. */
const RECOVERY_MS_MAX = 90_000;
/** The recovery bound (first boot included) is at least this much per seat, so past 900
 * seats it grows with the company: the first boot's walk creates three consumers a seat,
 * proposed by the three members to one meta leader at ~45 creates/s on a loaded 2-core box
 * (queue/mailboxes.ts) — ~67 ms a seat — and then the claim ramp holds every seat; 100 ms a
 * seat leaves room for both (2,000 seats: 200 s). A restart later walks a listing, not
 * creates, so the bound is generous there. */
const RECOVERY_MS_PER_SEAT = 100;
/** A post is retried through the other members for this long before it counts as unanswered. */
const SEND_RETRY_MS_MAX = 30_000;
/** The probe stops after this many posts in a row are refused: each can take
 *  SEND_RETRY_MS_MAX, so a 2,000-seat probe of a fleet that takes no mail would run for
 *  hours. The seats left unprobed count as unanswered, so the verdict says so. */
const PROBE_REFUSED_IN_A_ROW_MAX = 10;
/** One HTTP attempt's bound: the router's write budget is 60 s, but a stuck member is skipped sooner. */
const ATTEMPT_TIMEOUT_MS = 10_000;
/** A frozen node is given this many TTLs after SIGCONT to exit 75 (its watchdog fires at once). */
const FROZEN_EXIT_TTLS = 4;
const POLL_MS = 250;

/** Every this-many'th seat may start coding runs, and every this-many'th message to it asks for one. */
const RUN_SEAT_EVERY = 4;
const RUN_MESSAGE_EVERY = 5;
/** A short job: long enough to be caught by a fault now and then, short enough to finish in the quiet. */
const RUN_TASK = "sleep:2;write:out.txt=done;commit:job;print:job done";
const RUN_REPORT_PREFIX = "run-report";
/** Seats offset by this from the run seats ask for a chat post that waits for approval. */
const APPROVAL_SEAT_OFFSET = 2;
const APPROVAL_REPORT_PREFIX = "approval-report";
const APPROVED_POST_PREFIX = "approved-post";
/** The driver rejects every this-many'th request (by id), and approves the rest. */
const REJECT_EVERY = 3;
/** After the probe, requests still unsettled get this long to be decided and told. */
const APPROVALS_SETTLE_MS = 60_000;
/** After the probe, runs not yet told get this long: a late delivery's turn may start one as
 *  the probe ends, and its job is seconds, its seat's failover a TTL or two. */
const RUNS_SETTLE_MS = 60_000;
const FAKE_CLI = resolve(import.meta.dir, "../support/fake-coding-cli.sh");

function company(seats: number) {
  const roles = Array.from({ length: seats }, (_, i) => ({ name: `Agent ${i}`, handle: `agent-${String(i).padStart(2, "0")}` }));
  // Every turn answers in its thread at once, naming the message it answers: one chat
  // message, one turn, one reply. A quarter of the seats may start coding runs: a message
  // asking for a run-job starts one (and is acked), and the run's result is told in the same
  // thread as a run-report (first: the report quotes its task).
  // A quarter of the seats (others than the run seats) post to #general when asked for an
  // approve-job; the post waits for a person's yes (the driver decides), and the decision
  // is told in the thread as an approval-report.
  const rules = [
    { when: { trigger: "sandbox_run" }, reply: `${RUN_REPORT_PREFIX} {{text}}` },
    { when: { trigger: "approval_decided" }, reply: `${APPROVAL_REPORT_PREFIX} {{text}}` },
    { when: { text: "approve-job" }, tool_calls: [{ tool: "chat_post", args: { channel: "general", body: `${APPROVED_POST_PREFIX} {{message_id}}` } }], reply: "ack {{message_id}}" },
    { when: { text: "run-job" }, tool_calls: [{ tool: "run_sandbox", args: { task: RUN_TASK } }], reply: "ack {{message_id}}" },
    { reply: "ack {{message_id}}" },
  ];
  const withRuns = roles.map((r, i) => (i % RUN_SEAT_EVERY === 0 ? { ...r, sandbox: { engines: ["fake"], max_runs: 64 } } : r));
  const sandbox = { type: "local", engines: { fake: { command: ["/bin/sh", FAKE_CLI, "{task}"] } } };
  const approvals = { rules: [{ name: "chaos posts", tools: ["chat_post"] }] };
  return { name: "Chaos", providers: { llm: { script: { type: "scripted", rules } }, sandbox }, default_llm: "script", roles: withRuns, approvals };
}

function descendants(pid: number): { pid: number; comm: string }[] {
  const parent = new Map<number, { ppid: number; comm: string }>();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      const close = stat.lastIndexOf(")");
      const comm = stat.slice(stat.indexOf("(") + 1, close);
      const ppid = Number(stat.slice(close + 2).split(" ")[1]);
      parent.set(Number(d), { ppid, comm });
    } catch {
      // gone meanwhile
    }
  }
  const out: { pid: number; comm: string }[] = [];
  const frontier = [pid];
  while (frontier.length) {
    const p = frontier.pop()!;
    for (const [child, info] of parent) {
      if (info.ppid === p) {
        out.push({ pid: child, comm: info.comm });
        frontier.push(child);
      }
    }
  }
  return out;
}

async function timed(url: string, init: RequestInit = {}): Promise<Response> {
  return fetch(url, { ...init, signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS) });
}

export async function runChaos(o: ChaosOptions): Promise<ChaosResult> {
  const ttl_ms = o.ttl_ms ?? 6_000;
  const seatCount = o.seats ?? 16;
  const send_every_ms = o.send_every_ms ?? 500;
  const quiet_ms = o.quiet_ms ?? 20_000;
  const probe_within_ms = o.probe_within_ms ?? 60_000;
  const say = o.say ?? (() => undefined);
  const notes: string[] = [];
  const note = (s: string) => {
    notes.push(s);
    say(s);
  };
  const seats = Array.from({ length: seatCount }, (_, i) => `agent-${String(i).padStart(2, "0")}`);
  const loads: number[] = [];
  const loadTimer = setInterval(() => loads.push(loadavg()[0]!), 5_000);
  const started_ms = Date.now();

  const partitions = new Partitions();
  const proxies: TcpProxy[] = [];
  const fleet: Fleet = await makeFleet({
    nodes: [...MEMBERS.map((id) => ({ id, kind: "member" as const })), { id: LEAF, kind: "leaf" as const }],
    leaseTtlSeconds: ttl_ms / 1000,
    company: company(seatCount),
    via: async (_kind, memberId, port) => {
      const p = new TcpProxy(port, partitions, memberId);
      proxies.push(p);
      return p.listen(await freePort());
    },
  });
  const members = MEMBERS.map((id) => fleet.node(id));
  const all = fleet.nodes;

  // --- lives ---------------------------------------------------------------------------
  const incarnations: Incarnation[] = [];
  const current = new Map<string, Incarnation>();
  const start = async (n: FleetNode) => {
    await n.start();
    const life: Incarnation = { node: n.id, inc: n.incarnations(), started_ms: Date.now(), ended_ms: null, exit_code: null };
    incarnations.push(life);
    current.set(n.id, life);
    void n.exited().then((code) => {
      life.ended_ms ??= Date.now();
      life.exit_code = code;
    });
  };
  const running = (n: FleetNode) => n.proc !== null && n.proc.exitCode === null && n.proc.signalCode === null;
  const kill9 = async (n: FleetNode) => {
    const life = current.get(n.id);
    if (life) life.ended_ms ??= Date.now();
    n.kill("SIGKILL");
    await n.exited();
  };

  // --- the driver ------------------------------------------------------------------------
  const sent: Sent[] = [];
  let seq = 0;
  let driving = true;
  const inflight = new Set<Promise<void>>();
  const post = async (seat: string, key: string, body: string): Promise<Sent> => {
    const rec: Sent = { key, seat, status: 0, message_id: null, acked_ms: null };
    const deadline = Date.now() + SEND_RETRY_MS_MAX;
    let turn = seq;
    while (Date.now() < deadline) {
      const m = members[turn++ % members.length]!;
      if (!running(m)) {
        await Bun.sleep(POLL_MS);
        continue;
      }
      try {
        const res = await timed(`${m.apiUrl}/chat/channels/general/messages`, {
          method: "POST",
          headers: { authorization: `Bearer ${TEST_TOKEN}`, "content-type": "application/json", "idempotency-key": key },
          body: JSON.stringify({ body, author: "driver" }),
        });
        rec.status = res.status;
        const json = (await res.json().catch(() => null)) as { message_id?: string; op_id?: string } | null;
        if (res.status === 200 || res.status === 202) {
          rec.message_id = json?.message_id ?? json?.op_id ?? null;
          rec.acked_ms = Date.now();
          return rec;
        }
        if (res.status >= 400 && res.status < 500 && res.status !== 409 && res.status !== 429) return rec;
      } catch {
        // not listening, or stuck past the attempt bound: the next member
      }
      await Bun.sleep(POLL_MS);
    }
    return rec;
  };
  const driver = (async () => {
    while (driving) {
      const seat = seats[seq % seats.length]!;
      const key = `chaos-${o.seed}-${seq}`;
      seq++;
      const jobRound = seq % (RUN_MESSAGE_EVERY * seats.length) < seats.length;
      const runJob = seats.indexOf(seat) % RUN_SEAT_EVERY === 0 && jobRound;
      const approveJob = seats.indexOf(seat) % RUN_SEAT_EVERY === APPROVAL_SEAT_OFFSET && jobRound;
      const p = post(seat, key, `@${seat} please ${runJob ? "run-job and " : approveJob ? "approve-job and " : ""}ack ${key}`).then((r) => void sent.push(r));
      inflight.add(p);
      void p.finally(() => inflight.delete(p));
      await Bun.sleep(send_every_ms);
    }
  })();

  // --- the person deciding -----------------------------------------------------------------
  // Every second, whatever waits is decided on a running member: most approved, every
  // REJECT_EVERY'th (by id) rejected. A decision the fleet cannot take now (503) is tried
  // on the next lap, as a person would.
  let deciding = true;
  const decideLap = async (): Promise<{ id: string; state: string; stage: string }[] | null> => {
    for (const m of members) {
      if (!running(m)) continue;
      try {
        const res = await timed(`${m.apiUrl}/approvals`, { headers: { authorization: `Bearer ${TEST_TOKEN}` } });
        if (!res.ok) continue;
        const list = ((await res.json()) as { approvals: { id: string; state: string; stage: string }[] }).approvals;
        for (const a of list.filter((x) => x.state === "pending")) {
          const reject = parseInt(a.id.slice(-4), 16) % REJECT_EVERY === 0;
          await timed(`${m.apiUrl}/approvals/${a.id}/${reject ? "reject" : "approve"}`, {
            method: "POST",
            headers: { authorization: `Bearer ${TEST_TOKEN}`, "content-type": "application/json" },
            body: JSON.stringify({ reason: reject ? "chaos says no" : "chaos says yes" }),
          }).catch(() => null);
        }
        return list;
      } catch {
        // the next member
      }
    }
    return null;
  };
  const decider = (async () => {
    while (deciding) {
      await decideLap();
      await Bun.sleep(1_000);
    }
  })();

  // --- recovery --------------------------------------------------------------------------
  const fleetView = async (): Promise<{ leases: { handle: string; node: string }[] } | null> => {
    for (const m of members) {
      if (!running(m)) continue;
      try {
        const res = await timed(`${m.apiUrl}/fleet`, { headers: { authorization: `Bearer ${TEST_TOKEN}` } });
        if (res.ok) return (await res.json()) as { leases: { handle: string; node: string }[] };
      } catch {
        // next member
      }
    }
    return null;
  };
  const recovered = async (): Promise<boolean> => {
    for (const n of all) {
      if (!running(n)) return false;
      try {
        if (!(await timed(`${n.apiUrl}/ready`)).ok) return false;
      } catch {
        return false;
      }
    }
    const v = await fleetView();
    return v !== null && new Set(v.leases.map((l) => l.handle)).size === seatCount;
  };
  const waitRecovered = async (what: string) => {
    const t0 = Date.now();
    const bound_ms = o.recovery_ms_max ?? Math.max(RECOVERY_MS_MAX, seatCount * RECOVERY_MS_PER_SEAT);
    while (Date.now() - t0 < bound_ms) {
      if (await recovered()) return Date.now() - t0;
      await Bun.sleep(POLL_MS * 2);
    }
    // What each node not ready says it waits for (its /ready names the boot step), so a
    // long run's note tells a stuck boot step from a fleet short of seats.
    const said: string[] = [];
    for (const n of all) {
      if (!running(n)) {
        said.push(`${n.id}: not running`);
        continue;
      }
      const body = await timed(`${n.apiUrl}/ready`).then(async (r) => (r.ok ? null : `${r.status} ${(await r.text()).slice(0, 300)}`)).catch((err) => `no answer (${(err as Error).message})`);
      if (!body) continue;
      // A leaf's boot rides its one leafnode connection: which member it is attached to.
      const via = n.id === LEAF ? await timed(`http://127.0.0.1:${n.monitorPort}/leafz`).then(async (r) => ((await r.json()) as { leafs?: { name?: string }[] }).leafs?.map((l) => l.name).join(",") || "none").catch(() => "?") : null;
      said.push(`${n.id}#${n.incarnations()}: ${body}${via !== null ? ` (leafnode to ${via})` : ""}`);
    }
    note(`recovery after ${what}: not every node ready with every seat held within ${bound_ms} ms${said.length ? ` — ${said.join("; ")}` : ""}`);
    return bound_ms;
  };

  // --- faults ------------------------------------------------------------------------------
  const faults: FaultRecord[] = [];
  const restartAfter = async (n: FleetNode, delay_ms: number) => {
    await Bun.sleep(delay_ms);
    await start(n);
  };
  const perform = async (f: Fault) => {
    const n = fleet.node(f.target);
    const at_ms = Date.now();
    const rec: FaultRecord = { kind: f.kind, targets: [f.target], at_ms, healed_ms: null };
    faults.push(rec);
    say(`fault ${faults.length}: ${f.kind} ${f.target} hold ${f.hold_ms} ms (t+${Math.round((at_ms - started_ms) / 1000)} s, load ${loadavg()[0]!.toFixed(2)})`);
    switch (f.kind) {
      case "kill9":
        await kill9(n);
        await restartAfter(n, f.hold_ms);
        break;
      case "broker_kill9": {
        const sidecar = descendants(n.proc!.pid).find((d) => d.comm.startsWith("nats-server"));
        if (!sidecar) {
          note(`broker_kill9 ${n.id}: no nats-server under pid ${n.proc!.pid}; killed the node instead`);
          await kill9(n);
        } else {
          process.kill(sidecar.pid, "SIGKILL");
          // The node notices its sidecar's death and stops (exit 1); bounded by its shutdown budget.
          const code = await Promise.race([n.exited(), Bun.sleep(45_000).then(() => null)]);
          if (code === null) {
            note(`broker_kill9 ${n.id}: the node outlived its sidecar by 45 s; killed it`);
            await kill9(n);
          }
        }
        await restartAfter(n, f.hold_ms);
        break;
      }
      case "sigstop": {
        rec.frozen = { node: n.id, inc: n.incarnations() };
        n.kill("SIGSTOP");
        await Bun.sleep(f.hold_ms);
        rec.healed_ms = Date.now();
        n.kill("SIGCONT");
        const code = await Promise.race([n.exited(), Bun.sleep(FROZEN_EXIT_TTLS * ttl_ms).then(() => null)]);
        if (code === null) {
          note(`sigstop ${n.id}: still running ${FROZEN_EXIT_TTLS} TTLs after SIGCONT; killed it`);
          await kill9(n);
        }
        await restartAfter(n, 0);
        break;
      }
      case "sigterm":
        n.kill("SIGTERM");
        await n.exited();
        await restartAfter(n, f.hold_ms);
        break;
      case "cut_member":
      case "cut_leaf":
        partitions.cutOff(n.id);
        await Bun.sleep(f.hold_ms);
        partitions.heal(n.id);
        rec.healed_ms = Date.now();
        break;
      case "full_restart":
        rec.targets = all.map((x) => x.id);
        await Promise.all(all.map((x) => kill9(x)));
        await Bun.sleep(f.hold_ms);
        // Any order, any delay: each start after its own delay from the one before.
        for (const r of f.restart ?? []) {
          await Bun.sleep(r.delay_ms);
          await start(fleet.node(r.node));
        }
        break;
    }
    const took = await waitRecovered(`${f.kind} ${f.target}`);
    say(`  recovered in ${took} ms`);
  };

  let verdict: Verdict | null = null;
  let facts: ChaosFacts | null = null;
  try {
    await Promise.all(all.map((n) => start(n)));
    await waitRecovered("the first boot");
    const count = "count" in o.faults ? o.faults.count : 10_000;
    const plan = planFaults({ seed: o.seed, members: MEMBERS, leaf: LEAF, ttl_ms, count, everyKindFirst: true });
    const until = "for_ms" in o.faults ? started_ms + o.faults.for_ms : Number.POSITIVE_INFINITY;
    for (const f of plan) {
      if (Date.now() + f.gap_ms >= until) break;
      await Bun.sleep(f.gap_ms);
      await perform(f);
    }
    say(`quiet for ${quiet_ms} ms`);
    await Bun.sleep(quiet_ms);
    driving = false;
    await driver;
    await Promise.all([...inflight]);

    // --- the probe ---------------------------------------------------------------------
    const probes = new Map<string, string>();
    let refusedInARow = 0;
    for (const [i, seat] of seats.entries()) {
      const r = await post(seat, `probe-${o.seed}-${seat}`, `@${seat} probe ${seat}`);
      refusedInARow = r.message_id ? 0 : refusedInARow + 1;
      if (r.message_id) probes.set(r.message_id, seat);
      else note(`probe to ${seat} was not accepted (status ${r.status})`);
      if (refusedInARow >= PROBE_REFUSED_IN_A_ROW_MAX) {
        note(`probe stopped after ${refusedInARow} refusals in a row: the fleet is not taking mail; ${seats.length - i - 1} seat(s) left unprobed count as unanswered`);
        break;
      }
    }
    const probeAnswered = new Set<string>();
    const probe_t0 = Date.now();
    let replies: Reply[] = [];
    while (Date.now() - probe_t0 < probe_within_ms) {
      replies = await readReplies(members.filter(running));
      for (const r of replies) {
        const seat = probes.get(r.thread_parent);
        if (seat && r.author === seat) probeAnswered.add(seat);
      }
      if (probeAnswered.size === seats.length) break;
      await Bun.sleep(1_000);
    }
    // Late answers to the driver's messages have had the probe's time to land as well. One
    // still unanswered may be a delivery nobody is working: a departing holder's last pull
    // took it after the new holder's reclaim looked (ack-pending, no kill). The new holder's
    // mailbox watch hands such mail out again once two checks agree (ack_pending_elsewhere,
    // MAILBOX_CHECK_EVERY_MS apart), so an unanswered message waits that heal out before it
    // counts as lost; a run with everything answered does not wait.
    const acknowledged = sent.filter((s) => s.message_id && (s.status === 200 || s.status === 202)).map((s) => s.message_id!);
    // A probe is mail like any other: one stranded by the same hand-back waits the same heal.
    const late_until = Date.now() + LATE_HEAL_MS;
    for (let round = 0; ; round++) {
      replies = await readReplies(members.filter(running));
      for (const r of replies) {
        const seat = probes.get(r.thread_parent);
        if (seat && r.author === seat) probeAnswered.add(seat);
      }
      const answeredNow = new Set(replies.filter((r) => !r.report).map((r) => r.thread_parent));
      const waiting = acknowledged.filter((id) => !answeredNow.has(id)).length + (seats.length - probeAnswered.size);
      if (waiting === 0 || Date.now() >= late_until) break;
      if (round === 0) note(`${waiting} acknowledged message(s) or probe(s) unanswered after the probe's wait; waiting up to ${LATE_HEAL_MS} ms for the mailbox watch's heal`);
      await Bun.sleep(5_000);
    }
    // Requests still waiting are decided, and each settles and is told within the bound.
    const settle_until = Date.now() + APPROVALS_SETTLE_MS;
    while (Date.now() < settle_until) {
      const list = await decideLap();
      if (list && list.every((a) => a.stage === "done")) {
        const told = await readReplies(members.filter(running));
        if (list.every((a) => told.some((r) => r.approval && r.body?.includes(a.id)))) break;
      }
      await Bun.sleep(1_000);
    }
    deciding = false;
    await decider;
    // A run told to its seat but not yet reported in its thread waits too: its result's
    // trigger rides the same mailbox, and the same watch heal, as a message.
    const runs_until = Date.now() + RUNS_SETTLE_MS;
    for (let round = 0; Date.now() < runs_until; round++) {
      const told = await readReplies(members.filter(running));
      const reported = (r: RunFact) => told.some((x) => x.thread_parent === r.thread && x.author === r.seat && x.report);
      const open = (await runFacts(members.filter(running), all)).runs.filter((r) => !r.reported || !reported(r)).length;
      if (open === 0) break;
      if (round === 0) note(`${open} coding run(s) not yet told or reported after the probe; waiting up to ${RUNS_SETTLE_MS} ms`);
      await Bun.sleep(2_000);
    }
    replies = await readReplies(members.filter(running));
    const run_ended_ms = Date.now();

    // --- facts -------------------------------------------------------------------------
    const claims: SeatLine[] = [];
    const detaches: DetachLine[] = [];
    const turns: SeatLine[] = [];
    const completions: SeatLine[] = [];
    const answeredWithDecision: string[] = [];
    const answeredWithRun: string[] = [];
    const mailboxProbes = { sent: 0, heard: 0 };
    const deafAlarms: { node: string; seat: string; reason: string; ts: number }[] = [];
    const fences: { node: string; seat: string; reason: string; ts: number }[] = [];
    const storeAnswering: { node: string; ts: number; unrenewed_ms: number }[] = [];
    let invalidTriggers = 0;
    for (const n of all) {
      for (let inc = 1; inc <= n.incarnations(); inc++) {
        for (const line of n.logOf(inc).split("\n")) {
          if (!line.startsWith("{")) continue;
          let e: Record<string, unknown>;
          try {
            e = JSON.parse(line) as Record<string, unknown>;
          } catch {
            continue;
          }
          const base = { node: n.id, inc, seat: String(e.seat), epoch: Number(e.epoch), ts: Date.parse(String(e.ts)) };
          if (e.event === "seat_claimed") claims.push(base);
          else if (e.event === "seat_detached") detaches.push({ ...base, mode: String(e.mode) });
          // The grant was revoked: the detach under the seat's lock comes after.
          else if (e.event === "seat_fenced") {
            detaches.push({ ...base, mode: "fenced" });
            fences.push({ node: n.id, seat: base.seat, reason: String(e.reason), ts: base.ts });
          }
          // An acquire that failed (fenced while establishing) ends its tenure without a detach.
          else if (e.event === "seat_acquire_failed") detaches.push({ ...base, mode: "acquire_failed" });
          else if (e.event === "turn_started") turns.push(base);
          else if (e.event === "turn_completed" && e.outcome === "completed") {
            completions.push(base);
            const ids = Array.isArray(e.trigger_ids) ? e.trigger_ids.map(String) : [];
            if (ids.some((t) => /^approval\..+\.decided$/.test(t))) for (const t of ids) answeredWithDecision.push(...(/^wake\.chat\.(.+)\.[^.]+$/.exec(t)?.slice(1) ?? []));
            if (ids.some((t) => /^run\..+\.done$/.test(t))) for (const t of ids) answeredWithRun.push(...(/^wake\.chat\.(.+)\.[^.]+$/.exec(t)?.slice(1) ?? []));
          }
          else if (e.event === "seat_probe_sent") mailboxProbes.sent++;
          else if (e.event === "seat_probe_heard") mailboxProbes.heard++;
          else if (e.event === "seat_mailbox_deaf") deafAlarms.push({ node: n.id, seat: base.seat, reason: String(e.reason), ts: base.ts });
          else if (e.event === "inbox_trigger_invalid") invalidTriggers++;
          else if (e.event === "lease_store_answering") storeAnswering.push({ node: n.id, ts: base.ts, unrenewed_ms: Number(e.unrenewed_ms) });
        }
      }
    }
    const acked = new Set(sent.filter((s) => s.message_id && (s.status === 200 || s.status === 202)).map((s) => s.message_id!));
    const answered = new Set(replies.filter((r) => !r.report).map((r) => r.thread_parent));
    const unanswered = [...acked].filter((id) => !answered.has(id));
    const heldByBroker = await brokerHeld(members.filter(running), unanswered, seats, note);
    const streamReplicas = await replicasOf(members.filter(running), note);
    const streamUpdates: { node: string; stream: string }[] = [];
    for (const n of all) {
      for (const e of n.eventsEver("queue_stream_updated")) streamUpdates.push({ node: n.id, stream: String(e.stream) });
    }
    facts = {
      seats,
      incarnations,
      claims,
      detaches,
      turns,
      faults,
      sent,
      replies,
      heldByBroker,
      streamReplicas,
      membersReplicas: MEMBERS.length,
      streamUpdates,
      leaf: LEAF,
      probeAnswered,
      completions,
      answeredWithDecision,
      answeredWithRun,
      mailboxProbes,
      deafAlarms,
      fences,
      storeAnswering,
      invalidTriggers,
      ...(await runFacts(members.filter(running), all)),
      approvals: await approvalFacts(members.filter(running)),
      ttl_ms,
      run_started_ms: started_ms,
      run_ended_ms,
    };
    if (o.factsFile) writeFileSync(o.factsFile, factsToJson(facts));
    verdict = check(facts);
    // A run that did not settle is told by its nodes' lines about it, read before the fleet goes.
    for (const r of facts.runs ?? []) if (r.state !== "done" || !r.reported) note(`run ${r.id} unsettled; its lines:\n${linesNaming(all, r.id).join("\n")}`);
    // So is a lost message, by its message id (what the nodes' trigger lines name).
    for (const v of verdict.violations) {
      const id = /^lost: \S+ \(([^)]+)\)/.exec(v)?.[1];
      if (id) note(`message ${id} lost; its lines:\n${linesNaming(all, id).join("\n")}`);
    }
  } finally {
    driving = false;
    deciding = false;
    clearInterval(loadTimer);
    partitions.healAll();
    await fleet.stop();
    for (const p of proxies) await p.close();
  }
  const mean = loads.length ? loads.reduce((a, b) => a + b, 0) / loads.length : loadavg()[0]!;
  if (!verdict || !facts) throw new Error("chaos: the run ended without a verdict");
  return {
    verdict,
    facts,
    seed: o.seed,
    elapsed_ms: Date.now() - started_ms,
    load: { min: Math.min(...loads, mean), max: Math.max(...loads, mean), mean },
    notes,
  };
}

/** The facts as JSON (sets as arrays), and back: a run judged again by a newer checker. */
export function factsToJson(f: ChaosFacts): string {
  return JSON.stringify({ ...f, heldByBroker: [...f.heldByBroker], probeAnswered: [...f.probeAnswered] });
}
export function factsFromJson(text: string): ChaosFacts {
  const raw = JSON.parse(text) as ChaosFacts & { heldByBroker: string[]; probeAnswered: string[] };
  return { ...raw, heldByBroker: new Set(raw.heldByBroker), probeAnswered: new Set(raw.probeAnswered) };
}

/** The coding runs at the end (GET /runs on a member) and how often each was told (every log). */
async function runFacts(from: FleetNode[], all: FleetNode[]): Promise<{ runs: RunFact[]; runTold: Record<string, number> }> {
  const runTold: Record<string, number> = {};
  for (const n of all) {
    for (const name of ["sandbox_run_finished", "sandbox_run_failed"]) for (const e of n.eventsEver(name)) runTold[String(e.run)] = (runTold[String(e.run)] ?? 0) + 1;
  }
  for (const m of from) {
    try {
      const res = await timed(`${m.apiUrl}/runs`, { headers: { authorization: `Bearer ${TEST_TOKEN}` } });
      if (!res.ok) continue;
      const body = (await res.json()) as { runs: { id: string; seat: string; conversation: string; state: string; reported: boolean }[] };
      return { runs: body.runs.map((r) => ({ id: r.id, seat: r.seat, thread: r.conversation.split(":")[2] ?? "", state: r.state, reported: r.reported })), runTold };
    } catch {
      // the next member
    }
  }
  return { runs: [], runTold };
}

/** Every log line (every incarnation) naming `id`, oldest incarnation first, at most 40 per node. */
function linesNaming(nodes: FleetNode[], id: string): string[] {
  const out: string[] = [];
  for (const n of nodes) {
    const lines: string[] = [];
    for (let inc = 1; inc <= n.incarnations(); inc++) for (const l of n.logOf(inc).split("\n")) if (l.includes(id)) lines.push(`${n.id}#${inc} ${l}`);
    out.push(...lines.slice(-40));
  }
  return out;
}

/** Every reply in #general: a message with a thread parent, by its author. */
async function readReplies(from: FleetNode[]): Promise<Reply[]> {
  for (const m of from) {
    try {
      const out: Reply[] = [];
      let cursor: number | null = 0;
      for (let page = 0; page < 10_000 && cursor !== null; page++) {
        const res = await timed(`${m.apiUrl}/chat/channels/general/messages?limit=500&cursor=${cursor}`, { headers: { authorization: `Bearer ${TEST_TOKEN}` } });
        if (!res.ok) throw new Error(`${m.id} answered ${res.status}`);
        const body = (await res.json()) as { messages: { thread_parent: string | null; author: string; created_at: number; body: string }[]; next: number | null };
        for (const msg of body.messages) {
          if (!msg.thread_parent) continue;
          const approval = msg.body.startsWith(APPROVAL_REPORT_PREFIX);
          // The engine's own approval lines (the request, an expiry) speak about the work;
          // they answer nothing.
          const engine = msg.body.startsWith(REQUEST_PREFIX);
          if (msg.body.startsWith(ARTIFACTS_POST_PREFIX)) {
            out.push({ thread_parent: msg.thread_parent, author: msg.author, created_ms: msg.created_at, files: true });
            continue;
          }
          out.push({ thread_parent: msg.thread_parent, author: msg.author, created_ms: msg.created_at, ...(msg.body.startsWith(RUN_REPORT_PREFIX) || approval || engine ? { report: true } : {}), ...(approval ? { approval: true, body: msg.body } : {}) });
        }
        cursor = body.messages.length === 0 ? null : body.next;
      }
      return out;
    } catch {
      // the next member
    }
  }
  return [];
}

/**
 * Which unanswered messages the broker still holds ack-pending on their seat's inbox: the
 * trigger is stored, at or below the mailbox's delivered pointer, above its ack floor, and
 * the mailbox counts deliveries pending. Stored above the delivered pointer is mail the
 * seat never took (deaf); gone from the stream is mail acked without an answer (lost).
 */
async function brokerHeld(from: FleetNode[], unanswered: string[], seats: string[], note: (s: string) => void): Promise<Set<string>> {
  const held = new Set<string>();
  if (unanswered.length === 0) return held;
  const want = new Set(unanswered);
  let nc: Awaited<ReturnType<typeof connect>> | null = null;
  for (const via of from) {
    try {
      nc = await connect({ servers: `nats://127.0.0.1:${via.clientPort}`, ...via.natsAuth(), reconnect: false, name: "chaos-checker" });
      break;
    } catch (err) {
      note(`broker: could not read through ${via.id}: ${(err as Error).message}`);
    }
  }
  // No broker to ask: nothing counts as held, so every unanswered message is judged lost.
  if (!nc) return held;
  try {
    const jsm = await nc.jetstreamManager({ timeout: 10_000 });
    for (const seat of seats) {
      const box = mailbox(seat, "inbox");
      const info = await jsm.consumers.info(mailboxStream(seat), durableName(box.group)).catch(() => null);
      if (!info) continue;
      const floor = info.ack_floor.stream_seq;
      const delivered = info.delivered.stream_seq;
      let seq = floor + 1;
      for (let i = 0; i < 10_000; i++) {
        const reply = await nc.request(`$JS.API.STREAM.MSG.GET.${mailboxStream(seat)}`, JSON.stringify({ seq, next_by_subj: box.subject }), { timeout: 10_000 });
        const body = JSON.parse(new TextDecoder().decode(reply.data)) as { message?: { seq: number; data?: string } };
        if (!body.message) break;
        const m = { seq: body.message.seq, data: Buffer.from(body.message.data ?? "", "base64") };
        seq = m.seq + 1;
        const decoded = decodeTrigger(m.data);
        const id = decoded.ok ? decoded.trigger.refs.message_id : undefined;
        if (!id || !want.has(id)) continue;
        if (m.seq <= delivered && info.num_ack_pending > 0) held.add(id);
        else note(`broker: ${seat}'s trigger for ${id} is stored at ${m.seq} beyond its mailbox's delivered pointer ${delivered} (ack floor ${floor}, ${info.num_ack_pending} pending)`);
      }
    }
  } catch (err) {
    // A cluster without quorum answers nothing: the verdict still comes, with every message
    // not read here judged lost (a 2,000-seat run whose brokers never regained quorum).
    note(`broker: reading the mailboxes stopped: ${(err as Error).message}; unanswered messages not read count as lost`);
  } finally {
    await nc.close().catch(() => undefined);
  }
  return held;
}

/** Every stream's replica count, read through the first member that answers. */
async function replicasOf(from: FleetNode[], note: (s: string) => void): Promise<Record<string, number>> {
  for (const via of from) {
    try {
      const nc = await connect({ servers: `nats://127.0.0.1:${via.clientPort}`, ...via.natsAuth(), reconnect: false, name: "chaos-checker" });
      try {
        const jsm = await nc.jetstreamManager({ timeout: 10_000 });
        const out: Record<string, number> = {};
        for await (const s of jsm.streams.list()) out[s.config.name] = s.config.num_replicas;
        return out;
      } finally {
        await nc.close();
      }
    } catch (err) {
      note(`broker: could not list streams through ${via.id}: ${(err as Error).message}`);
    }
  }
  return {};
}

/** The figures as lines a person reads. */
export function report(r: ChaosResult): string[] {
  const f = r.verdict.figures;
  const lines = [
    `chaos seed ${r.seed}: ${Math.round(r.elapsed_ms / 1000)} s, ${r.facts.faults.length} faults (${r.facts.faults.map((x) => x.kind).join(", ")})`,
    `  load average (1 min) min ${r.load.min.toFixed(2)} mean ${r.load.mean.toFixed(2)} max ${r.load.max.toFixed(2)} on ${navigator.hardwareConcurrency} cores`,
    `  tenures ${f.tenures}; unowned seat time total ${(f.unowned_ms_total / 1000).toFixed(1)} s, worst seat ${(f.unowned_ms_max_seat / 1000).toFixed(1)} s`,
    `  messages: ${f.acked} acknowledged (${f.unacked} not), ${f.answered_once} answered once, ${f.answered_twice_in_kill_window} twice in a kill window, ${f.held_by_broker} held by the broker, ${f.lost} lost`,
    `  frozen nodes exiting 75: ${f.frozen_exits_75}; final probe answered ${f.probe}; coding runs done and told once ${f.runs}; approvals settled and told once ${f.approvals}`,
  ];
  lines.push(`  seats fenced on nodes no fault touched: ${Object.entries(f.fences_untouched).map(([r, n]) => `${n} ${r}`).join(", ") || "none"}; on fault targets: ${f.fences_on_targets}`);
  if (f.unrenewed_max) lines.push(`  lease renewals: the longest a seat went unrenewed and kept its lease ${(f.unrenewed_max.ms / 1000).toFixed(1)} s of the TTL's ${(r.facts.ttl_ms ?? 0) / 1000} s (${f.unrenewed_max.where})`);
  for (const [kind, x] of Object.entries(f.failover_ms)) lines.push(`  failover ${kind}: n=${x.n} p50 ${x.p50} ms p99 ${x.p99} ms max ${x.max} ms`);
  for (const [kind, x] of Object.entries(f.first_turn_ms)) lines.push(`  fault → a held seat's first successful turn on its next holder, ${kind}: n=${x.n} seats p50 ${x.p50} ms p99 ${x.p99} ms max ${x.max} ms`);
  lines.push(`  mailbox probes heard/sent ${f.mailbox_probes}; deaf alarms ${Object.entries(f.deaf_alarms).map(([r, n]) => `${r} ${n}`).join(", ") || "none"}`);
  lines.push(`  violations: ${r.verdict.violations.length}`);
  for (const v of r.verdict.violations.slice(0, 50)) lines.push(`    ${v}`);
  for (const n of r.notes) lines.push(`  note: ${n}`);
  return lines;
}

/** The calls parked for approval at the end (GET /approvals on a member), each with its
 *  effect counted: its approved-post among #general's top-level messages. */
async function approvalFacts(from: FleetNode[]): Promise<ApprovalFact[]> {
  for (const m of from) {
    try {
      const res = await timed(`${m.apiUrl}/approvals`, { headers: { authorization: `Bearer ${TEST_TOKEN}` } });
      if (!res.ok) continue;
      const list = ((await res.json()) as { approvals: { id: string; seat: string; conversation: string; state: string; stage: string; result: { ran: string } | null }[] }).approvals;
      const posts = new Map<string, number>();
      let cursor: number | null = 0;
      for (let page = 0; page < 10_000 && cursor !== null; page++) {
        const r = await timed(`${m.apiUrl}/chat/channels/general/messages?limit=500&cursor=${cursor}`, { headers: { authorization: `Bearer ${TEST_TOKEN}` } });
        if (!r.ok) throw new Error(`${m.id} answered ${r.status}`);
        const body = (await r.json()) as { messages: { thread_parent: string | null; body: string }[]; next: number | null };
        for (const msg of body.messages) {
          if (msg.thread_parent === null && msg.body.startsWith(APPROVED_POST_PREFIX)) posts.set(msg.body.slice(APPROVED_POST_PREFIX.length + 1), (posts.get(msg.body.slice(APPROVED_POST_PREFIX.length + 1)) ?? 0) + 1);
        }
        cursor = body.messages.length === 0 ? null : body.next;
      }
      return list.map((a) => {
        const thread = a.conversation.split(":")[2] ?? "";
        return { id: a.id, seat: a.seat, thread, state: a.state, stage: a.stage, ran: a.result?.ran ?? null, effects: posts.get(thread) ?? 0 };
      });
    } catch {
      // the next member
    }
  }
  return [];
}
