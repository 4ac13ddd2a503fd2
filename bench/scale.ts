// bun bench/scale.ts [--seats 2000] [--members 1|3] [--leaves 0] [--load-seconds 60] [--idle-seconds 60]
//
// A generated company of N agent seats on the scripted provider, run by real `crewlet run`
// processes (test/support/fleet.ts) on their own nats-server sidecars, on this box. The
// members and any --leaves K leaves run the seats (label pool=main); one more leaf, the
// idle node, runs the seats role with no label, so no seat matches it and it claims
// nothing. Prints, per run:
//   - the boot walk per node (seat_mailbox_created's elapsed_ms) and each node's ready time;
//   - the time until every seat is held, from the last member ready: every seat has a live
//     lease in one listing of the lease store (a member's GET /fleet), the store's word
//     rather than a sum of sweep lines taken at different moments; and how many seats were
//     given back to rebalance on the way (seat_detached reason=rebalance);
//   - messages the idle node's client connections receive per sweep once the fleet is full
//     (out_msgs of its connections on its sidecar's /connz, over the idle window below);
//   - the CPU every broker and node spends (cores), every seat held and idle, over
//     --idle-seconds (default 60: one probe period) starting IDLE_SETTLE_MS after the fleet is full;
//   - sweep duration (seat_sweep elapsed_ms on the seat holders, once full);
//   - claim p50/p99 (seat_attached claim_ms: lease write to inbox attached);
//   - RSS of every node and sidecar, and per seat;
//   - the broker's consumer count (a member's /jsz);
//   - publish → turn start: chat messages naming a seat, one per seat per minute spread
//     evenly, for --load-seconds (default 60); from the POST to the seat's turn_started line.
// Last line: seats=N members=M boot_walk_s=… all_held_s=… rss_mb=… idle_msgs_per_sweep=…
// (boot_walk_s: the slowest node's walk; rss_mb: the largest node process's RSS).
// Figures only, nothing passes or fails here; on a shared box they are upper bounds.
import { readFileSync, readdirSync } from "node:fs";
import { loadavg } from "node:os";
import { z } from "zod";
import { benchArgs, countFlag, wholeFlag, membersFlag } from "./args.ts";
import { cpuSeconds } from "./proc.ts";
import { SEAT_MAILBOX_KINDS, subjectMatches } from "../src/queue/topics.ts";
import { SWEEP_INTERVAL_MS } from "../src/seat/placement.ts";
import { SAFETY_PULL_MS } from "../src/queue/attachment.ts";
import { MAILBOX_CHECK_EVERY_MS } from "../src/seat/mailbox-watch.ts";
import { makeFleet, TEST_TOKEN, type FleetNode, type NodeSpec } from "../test/support/fleet.ts";

const args = benchArgs(
  "scale",
  "[--seats 2000] [--members 1|3] [--leaves 0] [--load-seconds 60] [--idle-seconds 60]",
  z.object({
    seats: countFlag(2_000, 20_000),
    members: membersFlag.default(1),
    leaves: wholeFlag(0, 16).default(0),
    "load-seconds": z.coerce.number().min(0).max(3_600).default(60),
    "idle-seconds": z.coerce.number().min(10).max(3_600).default(60),
  }),
);
const SEATS = args.seats;
const MEMBERS = args.members;
const LEAVES = args.leaves;
const LOAD_MS = args["load-seconds"] * 1000;
/** The idle window: a whole probe period by default, so each seat's probe, trim and watch
 * checks are in it as often as in any other window. */
const IDLE_MS = args["idle-seconds"] * 1000;
/** Quiet before the idle window opens: a fresh attachment pulls without napping for its
 * first SAFETY_PULL_MS, and a seat's first mailbox check only sets its baseline, so a window
 * opened at once measures the claims' tail, not idle seats (seen: 0.29 → 0.39 cores between
 * two runs of one build at 2,000 seats). */
const IDLE_SETTLE_MS = SAFETY_PULL_MS + MAILBOX_CHECK_EVERY_MS * 2;

/** A node's boot on a loaded 2-core box with thousands of mailboxes: generous, so a slow
 * walk is reported rather than cut off. */
const READY_WITHIN_MS = 15 * 60_000;
/** How long the fleet gets to hold every seat before the bench reports what it reached. */
const HELD_WITHIN_MS = 15 * 60_000;
/** Sweeps the breakdown's tap counts the idle node's traffic over. */
const MEASURED_SWEEPS = 6;
/** The background load: one message per seat per minute (the issue's figure). */
const LOAD_PER_SEAT_MS = 60_000;
/** A message whose turn has not started this long after the load stops counts as not started. */
const TURN_START_GRACE_MS = 60_000;
const POLL_MS = 1_000;

const handle = (i: number) => `s-${String(i).padStart(5, "0")}`;
const handles = Array.from({ length: SEATS }, (_, i) => handle(i));
const company = {
  name: "Scale",
  providers: { llm: { script: { type: "scripted", rules: [{ reply: "ack {{message_id}}" }] } } },
  default_llm: "script",
  roles: handles.map((h) => ({ name: `Agent ${h}`, handle: h, placement: { labels: { pool: "main" } } })),
};

const loads: number[] = [];
const loadTimer = setInterval(() => loads.push(loadavg()[0]!), 5_000);
const say = (s: string) => console.log(s);

const specs: NodeSpec[] = [
  ...Array.from({ length: MEMBERS }, (_, i) => ({ id: `m${i + 1}`, kind: "member" as const, labels: { pool: "main" } })),
  ...Array.from({ length: LEAVES }, (_, i) => ({ id: `l${i + 1}`, kind: "leaf" as const, roles: ["seats"], labels: { pool: "main" } })),
  { id: "idle", kind: "leaf" as const, roles: ["seats"] },
];
const fleet = await makeFleet({ nodes: specs, company, logLevel: "info" });
const members = fleet.nodes.filter((n) => n.id.startsWith("m"));
const holders = fleet.nodes.filter((n) => n.id !== "idle");
const idle = fleet.node("idle");

function lastEvent(n: FleetNode, name: string): Record<string, unknown> | undefined {
  return n.events(name).at(-1);
}
function rssKb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}
/** CPU seconds so far of every node process and its sidecar, for the idle window's cores. */
function idleCpu(): { id: string; what: "node" | "broker"; cpu_s: number }[] {
  return fleet.nodes.flatMap((n) => {
    const sp = sidecarPid(n);
    const out: { id: string; what: "node" | "broker"; cpu_s: number }[] = [{ id: n.id, what: "node", cpu_s: cpuSeconds(n.proc!.pid) }];
    if (sp) out.push({ id: n.id, what: "broker", cpu_s: cpuSeconds(sp) });
    return out;
  });
}

function sidecarPid(n: FleetNode): number | null {
  const parent = n.proc?.pid;
  if (!parent) return null;
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      const close = stat.lastIndexOf(")");
      const comm = stat.slice(stat.indexOf("(") + 1, close);
      const ppid = Number(stat.slice(close + 2).split(" ")[1]);
      if (ppid === parent && comm.startsWith("nats-server")) return Number(d);
    } catch {
      // gone meanwhile
    }
  }
  return null;
}
async function monitor<T>(n: FleetNode, path: string): Promise<T> {
  const res = await fetch(`http://127.0.0.1:${n.monitorPort}${path}`);
  return (await res.json()) as T;
}
/** Messages the broker sent to the node's own connections (named `crewlet:{node}`); the
 * sidecar's other clients (its JetStream internals) are not the node's traffic. */
async function clientOutMsgs(n: FleetNode): Promise<number> {
  const z = await monitor<{ connections?: { out_msgs: number; name?: string }[] }>(n, "/connz?limit=1024");
  return (z.connections ?? []).filter((c) => c.name?.startsWith("crewlet:")).reduce((s, c) => s + c.out_msgs, 0);
}
type SubDetail = { subject: string; sid: string; msgs: number };
/** Every subscription subject of the node's own connections. */
async function clientSubjects(n: FleetNode): Promise<string[]> {
  const z = await monitor<{ connections?: { name?: string; subscriptions_list_detail?: SubDetail[] }[] }>(n, "/connz?limit=1024&subs=detail");
  return (z.connections ?? []).filter((c) => c.name?.startsWith("crewlet:")).flatMap((c) => (c.subscriptions_list_detail ?? []).map((d) => d.subject));
}
/** A subject with its generated tokens (inboxes, consumer names, lease keys past their kind)
 * folded, so one kind of traffic is one row. */
function subjectKind(subject: string): string {
  // The JetStream API under an account's prefix ($JS.crewlet.API) reads as $JS.API.
  const t = subject.replace(/^\$JS\.[A-Za-z0-9_-]+\.API\./, "$JS.API.").split(".");
  if (t[0] === "_INBOX") return "_INBOX.<id>";
  if (t[0] === "$KV" && t.length > 3) return `$KV.${t[1]}.${t[2]}.*`;
  if (t[0] === "$JS" && t[1] === "API" && t[2] === "$KV" && t.length > 5) return `$JS.API.$KV.${t[3]}.${t[4]}.*`;
  const api = t.join(".");
  if (api.startsWith("$JS.API.CONSUMER.CREATE.") && t.length > 6) return `$JS.API.CONSUMER.CREATE.${t[4]}.<name>.${t.slice(6, 9).join(".")}${t.length > 9 ? ".*" : ""}`;
  if (api.startsWith("$JS.API.DIRECT.GET.") && t.length > 7) return `$JS.API.DIRECT.GET.${t.slice(4, 8).join(".")}${t.length > 8 ? ".*" : ""}`;
  if (api.startsWith("$JS.API.CONSUMER.") && t.length > 5) return `${t.slice(0, 5).join(".")}.<name>${t.length > 6 ? `.${t.slice(6).join(".")}` : ""}`;
  return t.map((x) => (x.length >= 20 ? "<id>" : x)).join(".");
}

/** Which traffic the node's connections are sent while `during` runs, by what it is: a
 * second connection on the node's sidecar (not named crewlet:, so not counted in
 * clientOutMsgs) takes in every subject; a message on one of the node's subscriptions
 * (polled from /connz every BREAKDOWN_POLL_MS) is attributed to the request it answers
 * (its reply subject seen on the node's own publish), to the consumer whose deliver
 * subject it is (seen in that consumer's create request), or to the subscription. */
const BREAKDOWN_POLL_MS = 100;
async function subjectTap(n: FleetNode): Promise<{ count(during: Promise<unknown>): Promise<Map<string, number>> }> {
  const { connect } = await import("nats");
  const auth = n.natsAuth();
  const nc = await connect({ servers: `127.0.0.1:${n.clientPort}`, user: auth.user, pass: auth.pass, name: "bench-tap" });
  let subjects = await clientSubjects(n);
  const isTheirs = (subject: string) => subjects.some((p) => subjectMatches(p, subject));
  const asked = new Map<string, string>();
  const delivers = new Map<string, string>();
  const out = new Map<string, number>();
  const count = (k: string) => out.set(k, (out.get(k) ?? 0) + 1);
  let counting = false;
  nc.subscribe(">", {
    callback: (_err, m) => {
      if (m.reply && isTheirs(m.reply)) {
        asked.set(m.reply, subjectKind(m.subject));
        if (subjectKind(m.subject).startsWith("$JS.API.CONSUMER.CREATE.")) {
          try {
            const body = JSON.parse(new TextDecoder().decode(m.data)) as { config?: { deliver_subject?: string } };
            if (body.config?.deliver_subject) delivers.set(body.config.deliver_subject, subjectKind(m.subject).replace("$JS.API.CONSUMER.CREATE.", "consumer "));
          } catch {
            // not JSON: no deliver subject to learn
          }
        }
      }
      if (!counting) return;
      // A reply or a consumer's delivery is the node's whether or not the poll caught its
      // subscription (a listing's consumer lives a few ms); anything else must be on one.
      const req = asked.get(m.subject);
      if (req) return void count(`reply to ${req}`);
      const d = delivers.get(m.subject);
      // A status 100 is the server's idle heartbeat or flow-control request to a push consumer.
      const status = m.headers?.code === 100 ? ` (status 100: ${m.headers.description || "heartbeat"})` : "";
      if (d) return void count(`${d}${status}`);
      if (isTheirs(m.subject)) count(`on ${subjectKind(m.subject)}${status}`);
    },
  });
  await nc.flush();
  let done = false;
  void (async () => {
    while (!done) {
      subjects = await clientSubjects(n).catch(() => subjects);
      await Bun.sleep(BREAKDOWN_POLL_MS);
    }
  })();
  return {
    // Consumers created before the tap are learned only from their create (a steady watch
    // started earlier shows as 'on _INBOX.<id>').
    async count(during) {
      counting = true;
      await during;
      counting = false;
      done = true;
      await nc.close();
      return out;
    },
  };
}
/** Seats with a live lease (a tenure, epoch > 0) in one listing of the lease store. */
async function heldNow(): Promise<number> {
  const via = members.find((m) => m.proc) ?? members[0]!;
  const res = await fetch(`${via.apiUrl}/fleet`, { headers: { authorization: `Bearer ${TEST_TOKEN}` }, signal: AbortSignal.timeout(30_000) });
  if (!res.ok) return 0;
  const view = (await res.json()) as { leases?: { handle: string }[] };
  const wanted = new Set(handles);
  return new Set((view.leases ?? []).map((l) => l.handle).filter((h) => wanted.has(h))).size;
}
function heldBySweeps(): string {
  return holders.map((n) => `${n.id}=${lastEvent(n, "seat_sweep")?.held ?? 0}`).join(" ");
}
function rebalanced(): number {
  return holders.reduce((s, n) => s + n.events("seat_detached").filter((e) => e.reason === "rebalance").length, 0);
}
function pct(xs: number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}
const sec = (ms: number) => (ms / 1000).toFixed(1);

let exitCode = 0;
try {
  const t0 = Date.now();
  say(`scale: ${SEATS} seats, ${MEMBERS} member(s), ${LEAVES} leaf/leaves + 1 idle leaf; load average ${loadavg().map((x) => x.toFixed(1)).join(" ")}`);
  const ready = new Map<string, number>();
  // Members together (they form the cluster), then the leaves.
  for (const m of members) await m.start();
  await Promise.all(members.map((m) => m.waitReady(READY_WITHIN_MS).then(() => void ready.set(m.id, Date.now() - t0))));
  const lastMemberReady = t0 + Math.max(...members.map((m) => ready.get(m.id)!));
  for (const n of fleet.nodes.filter((x) => !x.id.startsWith("m"))) await n.start();
  await Promise.all(fleet.nodes.filter((x) => !x.id.startsWith("m")).map((n) => n.waitReady(READY_WITHIN_MS).then(() => void ready.set(n.id, Date.now() - t0))));
  const walks = new Map<string, number>();
  for (const n of fleet.nodes) {
    const w = lastEvent(n, "seat_mailbox_created")?.elapsed_ms;
    walks.set(n.id, typeof w === "number" ? w : Number.NaN);
    say(`  ${n.id}: ready at ${sec(ready.get(n.id)!)} s, boot walk ${sec(walks.get(n.id)!)} s`);
  }

  // Every seat held.
  let allHeldMs = Number.NaN;
  const heldDeadline = Date.now() + HELD_WITHIN_MS;
  let lastSay = 0;
  let held = 0;
  while (Date.now() < heldDeadline) {
    held = await heldNow().catch(() => held);
    if (held >= SEATS) {
      allHeldMs = Date.now() - lastMemberReady;
      break;
    }
    if (Date.now() - lastSay > 10_000) {
      lastSay = Date.now();
      say(`  held ${held}/${SEATS} at ${sec(Date.now() - lastMemberReady)} s after the last member ready (sweeps say ${heldBySweeps()}; ${rebalanced()} given back to rebalance)`);
    }
    await Bun.sleep(POLL_MS);
  }
  say(`  all held: ${Number.isNaN(allHeldMs) ? `NO (${held}/${SEATS} after ${sec(HELD_WITHIN_MS)} s)` : `${sec(allHeldMs)} s after the last member ready`} (sweeps say ${heldBySweeps()}; ${rebalanced()} given back to rebalance so far)`);
  for (const n of holders) {
    const behind = n.events("seats_behind").length;
    if (behind > 0) say(`  ${n.id}: behind ${behind} time(s) (its estate copy catching up: peers leave it out of shares)`);
  }
  const claims = holders.flatMap((n) => n.events("seat_attached").map((e) => Number(e.claim_ms))).filter((x) => Number.isFinite(x));
  say(`  claim (lease write → inbox attached): p50 ${pct(claims, 50)} ms, p99 ${pct(claims, 99)} ms over ${claims.length} claims`);

  // The full fleet, quiet: what the idle node draws, how long a sweep takes.
  await Bun.sleep(IDLE_SETTLE_MS);
  const sweepsBefore = new Map(holders.map((n) => [n.id, n.events("seat_sweep").length]));
  // CPU and the idle node's count first, with nothing of the bench's on the brokers: the
  // breakdown's tap takes in every subject of the fleet (`>` on the idle leaf, its /connz
  // polled every 100 ms), which cost the leaf's broker ~0.2 cores when it was measured with it.
  const out0 = await clientOutMsgs(idle);
  const cpu0 = idleCpu();
  await Bun.sleep(IDLE_MS);
  const idlePerSweep = ((await clientOutMsgs(idle)) - out0) / (IDLE_MS / SWEEP_INTERVAL_MS);
  const idleCores = idleCpu().map((c, i) => ({ ...c, cores: (c.cpu_s - cpu0[i]!.cpu_s) / (IDLE_MS / 1000) }));
  // The breakdown is a reading aid, over a window of its own: a tap that cannot start gives none.
  const tap = await subjectTap(idle).catch((err) => (say(`  (no breakdown: ${String(err)})`), null));
  const bySubject = tap ? await tap.count(Bun.sleep(SWEEP_INTERVAL_MS * MEASURED_SWEEPS)) : new Map<string, number>();
  const brokerCores = idleCores.filter((c) => c.what === "broker").reduce((t, c) => t + c.cores, 0);
  const nodeCores = idleCores.filter((c) => c.what === "node").reduce((t, c) => t + c.cores, 0);
  say(`  idle, every seat held: brokers ${brokerCores.toFixed(3)} cores in all, nodes ${nodeCores.toFixed(3)} (${idleCores.map((c) => `${c.id} ${c.what} ${c.cores.toFixed(3)}`).join(", ")})`);
  const sweeps = holders.flatMap((n) => n.events("seat_sweep").slice(sweepsBefore.get(n.id)).map((e) => Number(e.elapsed_ms)));
  const idleFull = lastEvent(idle, "seat_sweep")?.fleet_full;
  say(`  idle node: ${idlePerSweep.toFixed(1)} messages per sweep (its sweep says fleet_full=${String(idleFull)})`);
  const rows = [...bySubject].sort((a, b) => b[1] - a[1]);
  const attributed = rows.reduce((t, [, m]) => t + m, 0) / MEASURED_SWEEPS;
  for (const [kind, m] of rows) say(`    ${(m / MEASURED_SWEEPS).toFixed(1)} per sweep on ${kind}`);
  say(`    ${(idlePerSweep - attributed).toFixed(1)} per sweep not seen by the tap (out_msgs less the rows)`);
  say(`  sweep duration when full: p50 ${pct(sweeps, 50)} ms, max ${Math.max(...sweeps)} ms over ${sweeps.length} sweeps`);

  // Memory and the broker.
  let maxNodeKb = 0;
  for (const n of fleet.nodes) {
    const node = rssKb(n.proc!.pid);
    const sp = sidecarPid(n);
    const broker = sp ? rssKb(sp) : 0;
    maxNodeKb = Math.max(maxNodeKb, node);
    const held = Number(lastEvent(n, "seat_sweep")?.held ?? 0);
    const per = held > 0 ? ` (${(node / held).toFixed(0)} kB node + ${(broker / held).toFixed(0)} kB broker per held seat)` : "";
    say(`  ${n.id}: RSS node ${(node / 1024).toFixed(0)} MB, broker ${(broker / 1024).toFixed(0)} MB, holds ${held}${per}`);
  }
  const jsz = await monitor<{ consumers?: number; streams?: number }>(members[0]!, "/jsz");
  say(`  broker: ${jsz.consumers} consumers, ${jsz.streams} streams (${members[0]!.id}'s /jsz); ${SEATS * SEAT_MAILBOX_KINDS.length} seat mailboxes expected`);

  // Publish → turn start under one message per seat per minute.
  if (LOAD_MS > 0) {
    const gap = LOAD_PER_SEAT_MS / SEATS;
    const sent: { seat: string; at: number; ok: boolean }[] = [];
    const posts: Promise<void>[] = [];
    const loadStart = Date.now();
    const loadEnd = loadStart + LOAD_MS;
    let i = 0;
    while (Date.now() < loadEnd) {
      const seat = handles[i % SEATS]!;
      const via = members[i % members.length]!;
      const at = Date.now();
      const rec = { seat, at, ok: false };
      sent.push(rec);
      posts.push(
        fetch(`${via.apiUrl}/chat/channels/general/messages`, {
          method: "POST",
          headers: { authorization: `Bearer ${TEST_TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify({ body: `@${seat} ping ${i}`, author: "bench" }),
          signal: AbortSignal.timeout(30_000),
        })
          .then((r) => void (rec.ok = r.ok))
          .catch(() => undefined),
      );
      i++;
      const wait = loadStart + i * gap - Date.now();
      if (wait > 0) await Bun.sleep(wait);
    }
    await Promise.all(posts);
    await Bun.sleep(Math.min(TURN_START_GRACE_MS, 20_000));
    const starts = new Map<string, number[]>();
    for (const n of holders) {
      for (const e of n.events("turn_started")) {
        const seat = String(e.seat);
        starts.set(seat, [...(starts.get(seat) ?? []), Date.parse(String(e.ts))]);
      }
    }
    const lat: number[] = [];
    let notStarted = 0;
    for (const s of sent.filter((x) => x.ok)) {
      const t = (starts.get(s.seat) ?? []).filter((x) => x >= s.at).sort((a, b) => a - b)[0];
      if (t === undefined) notStarted++;
      else lat.push(t - s.at);
    }
    say(
      `  publish → turn start at one message per seat per minute for ${sec(LOAD_MS)} s: ${sent.length} sent (${sent.filter((x) => x.ok).length} accepted), ` +
        `p50 ${pct(lat, 50)} ms, p99 ${pct(lat, 99)} ms, ${notStarted} not started`,
    );
  }

  const l = loads.length ? loads : [loadavg()[0]!];
  say(`  load average (1 min) during the run: min ${Math.min(...l).toFixed(1)}, mean ${(l.reduce((a, b) => a + b, 0) / l.length).toFixed(1)}, max ${Math.max(...l).toFixed(1)} on ${navigator.hardwareConcurrency} cores — figures are upper bounds on a shared box`);
  const bootWalk = Math.max(...[...walks.values()].filter((x) => Number.isFinite(x)));
  say(
    `seats=${SEATS} members=${MEMBERS} boot_walk_s=${sec(bootWalk)} all_held_s=${Number.isNaN(allHeldMs) ? "none" : sec(allHeldMs)} rss_mb=${(maxNodeKb / 1024).toFixed(0)} idle_msgs_per_sweep=${idlePerSweep.toFixed(1)} idle_broker_cores=${brokerCores.toFixed(3)}`,
  );
} catch (err) {
  console.error(String(err instanceof Error ? (err.stack ?? err.message) : err));
  exitCode = 1;
} finally {
  clearInterval(loadTimer);
  await fleet.stop();
}
process.exit(exitCode);
