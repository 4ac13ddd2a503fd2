// The chaos run's independent checker: pure, over facts the harness gathered from the
// nodes' JSON logs, the chat (read back through the API) and the broker. It knows nothing
// of how the fleet works inside; it judges what the logs and the chat show.
//
// How a tenure is read. A tenure is one incarnation's hold of one seat at one epoch. It
// begins at its `seat_claimed` line. It ends at its first `seat_fenced`, `seat_detached` or
// `seat_acquire_failed` line, at the same incarnation's next claim of that seat, or at the incarnation's death
// (kill -9, exit) if that comes first. A node that cannot renew — frozen by SIGSTOP, cut
// off from the store, or with its broker killed — has lost the right to act from that
// moment (it is admitted no turn on a renew older than one heartbeat), so its tenure ends
// at the freeze or the cut, extended to the start of any turn it still admitted under that
// epoch afterwards: the fenced `seat_detached` such a node logs after SIGCONT or the heal is
// its bookkeeping, not ownership, but a turn it started is ownership exercised. Two tenures
// of one seat that overlap are a violation; so are epochs that do not strictly increase in
// claim order.
//
// How a message is judged. An acknowledged message (the API answered 200 applied or 202
// pending, with its id) must be answered in its thread by the seat it mentioned:
//   - exactly once; or
//   - not yet, if the broker still holds it ack-pending on the seat's mailbox after a kill
//     (or during a freeze) took the delivery down with its holder (it comes back after the
//     broker's ack wait);
//   - twice only when a kill (kill -9 of a node or its broker, a freeze, a full restart)
//     fell between the first answer's turn and the second answer: the killed holder wrote
//     the answer, died before its ack, and the next owner answered again.
// Anything else is a violation: lost (no answer, not held), or answered twice outside a
// kill window, or more than twice.
//
// How an exit is judged. Every incarnation that exited must have been ended by a fault the
// harness performed on it while it ran, with the code that fault causes (EXPECTED_EXITS):
// SIGKILL's 137 for a kill -9 or a full restart, 0 for a SIGTERM's drain, 1 (or 137) for a
// broker kill -9, 75 for a freeze (judged by the frozen rule). Any other exit — exit 1 on
// its own, a watchdog's 75 with no freeze, a cut-off node that quit — is a violation naming
// the node, the incarnation and the code.
//
// Mailbox probes (seat/mailbox-watch.ts) ride the same inboxes but are not mail: the
// driver never sent them, so they are in no `sent` record and no reply is owed; the checker
// counts them apart (sent, heard, deaf alarms by reason) and holds one thing against them —
// the agent's inbox handler must never have been handed one (it would log
// inbox_trigger_invalid, which no driver message can cause).
import { KILL_KINDS, type FaultKind } from "./schedule.ts";
import { replicatedLeaseTtlFloorMs } from "../../src/coord/ttl.ts";

export interface Incarnation {
  node: string;
  /** 1-based start count of this node. */
  inc: number;
  started_ms: number;
  /** When it died or exited; null while running at the end of the run. */
  ended_ms: number | null;
  exit_code: number | null;
}

/** A log line about one seat at one epoch, by one incarnation. */
export interface SeatLine {
  node: string;
  inc: number;
  seat: string;
  epoch: number;
  ts: number;
}

export interface DetachLine extends SeatLine {
  mode: string;
}

export interface FaultRecord {
  kind: FaultKind;
  /** Nodes the fault hit (one, or all for a full restart). */
  targets: string[];
  at_ms: number;
  /** When the freeze or cut ended (SIGCONT, heal); null for the others. */
  healed_ms: number | null;
  /** The incarnation frozen, for sigstop: it must exit 75. */
  frozen?: { node: string; inc: number };
}

export interface Sent {
  key: string;
  seat: string;
  /** Status the API answered at last (after retries); 0 when no answer ever came. */
  status: number;
  message_id: string | null;
  acked_ms: number | null;
}

export interface Reply {
  thread_parent: string;
  author: string;
  created_ms: number;
  /** A coding run's result told in the thread (not the answer to the message). */
  report?: boolean;
  /** An approval's decision told in the thread (also a report: not the answer). */
  approval?: boolean;
  /** The report's words, kept for approval reports (they name their request). */
  body?: string;
  /** The seat's message carrying a run's files (sandbox/artifacts.ts): neither an answer nor a report. */
  files?: boolean;
}

/** A call parked for approval, as its record stood at the end, and what it did outside. */
export interface ApprovalFact {
  id: string;
  seat: string;
  /** The message whose thread the call was asked in. */
  thread: string;
  /** pending, approved, rejected or expired. */
  state: string;
  /** pending → decided → running → done. */
  stage: string;
  /** Whether the approved call ran: yes, no, unknown (its holder died during it), or null. */
  ran: string | null;
  /** The call's effect as seen in chat: its post, counted. */
  effects: number;
}

/** A coding run as its record stood at the end of the run. */
export interface RunFact {
  id: string;
  seat: string;
  /** The message whose thread the run was asked in. */
  thread: string;
  state: string;
  reported: boolean;
}

export interface ChaosFacts {
  seats: string[];
  incarnations: Incarnation[];
  claims: SeatLine[];
  detaches: DetachLine[];
  /** turn_started lines (the epoch the turn was admitted under). */
  turns: SeatLine[];
  faults: FaultRecord[];
  sent: Sent[];
  replies: Reply[];
  /** Acknowledged message ids the broker still holds ack-pending on their seat's mailbox. */
  heldByBroker: ReadonlySet<string>;
  /** Each stream's replica count at the end, as the broker reports it. */
  streamReplicas: Readonly<Record<string, number>>;
  /** The replica count the members configure (stream.replicas). */
  membersReplicas: number;
  /** Lines any node logged saying it changed a stream's settings, by node. */
  streamUpdates: { node: string; stream: string }[];
  /** The leaf's node id: it must never change a stream. */
  leaf: string;
  /** The final probe: seats that answered a fresh message within the bound. */
  probeAnswered: ReadonlySet<string>;
  /** turn_completed lines whose outcome is completed (a successful turn). Absent in facts
   * written before it was gathered. */
  completions?: SeatLine[];
  /** Mailbox probes the nodes logged sending and hearing back (debug lines). */
  mailboxProbes?: { sent: number; heard: number };
  /** seat_mailbox_deaf lines. */
  deafAlarms?: { node: string; seat: string; reason: string; ts: number }[];
  /** inbox_trigger_invalid lines: something that is not a driver's trigger reached the agent. */
  invalidTriggers?: number;
  /** Coding runs the driver's messages started (absent in facts from before runs). */
  runs?: RunFact[];
  /** How many times each run's result was told (sandbox_run_finished / _failed lines, every node). */
  runTold?: Record<string, number>;
  /** Calls the driver's messages parked for approval (absent in facts from before approvals). */
  approvals?: ApprovalFact[];
  /** seat_fenced lines: a holder gave a seat up because it could not renew in time. */
  fences?: { node: string; seat: string; reason: string; ts: number }[];
  /** lease_store_answering lines: a stale seat's renewal came back, `unrenewed_ms` after its
   *  last good one — how close an outage came to fencing it. Absent in older facts. */
  storeAnswering?: { node: string; ts: number; unrenewed_ms: number }[];
  /**
   * Message ids whose trigger a completed turn ran together with an approval's decision
   * (a holder lost the turn that parked the call, and its successor was handed both). The
   * scripted model answers a turn by one rule, so that turn's only reply in the thread is
   * the decision's report: it answers the message too. Absent in older facts.
   */
  answeredWithDecision?: string[];
  /** Message ids whose trigger a completed turn ran together with a coding run's result (a
   *  holder started the run and died before replying; its successor was handed the message
   *  and the run's done trigger at once): that turn's one reply is the run's report. */
  answeredWithRun?: string[];
  /** The run's lease TTL (absent in facts from before issue 34). */
  ttl_ms?: number;
  run_started_ms: number;
  run_ended_ms: number;
}

export interface Tenure {
  seat: string;
  node: string;
  inc: number;
  epoch: number;
  start_ms: number;
  end_ms: number;
  ended_by: "detached" | "acquire_failed" | "death" | "frozen" | "cut" | "running";
}

export interface Figures {
  tenures: number;
  acked: number;
  unacked: number;
  answered_once: number;
  answered_twice_in_kill_window: number;
  held_by_broker: number;
  lost: number;
  frozen_exits_75: string;
  probe: string;
  /** Per fault kind: time from the fault until every seat its target held was claimed again. */
  failover_ms: Record<string, { n: number; p50: number; p99: number; max: number }>;
  /** Per fault kind, per seat its target held: time from the fault to that seat's first
   * successful turn under a later epoch (the next holder serving it). Includes the wait for
   * the seat's next mail when none was waiting. */
  first_turn_ms: Record<string, { n: number; p50: number; p99: number; max: number }>;
  /** Mailbox probes heard back / sent, and deaf alarms by reason. */
  mailbox_probes: string;
  deaf_alarms: Record<string, number>;
  unowned_ms_total: number;
  unowned_ms_max_seat: number;
  /** Coding runs started, and those done and told exactly once in their thread. */
  runs: string;
  /** Calls parked for approval, and those settled with their effect and decision told once. */
  approvals: string;
  /** Seats fenced on a node no fault touched at the time (issue 34's measure: an election
   *  elsewhere made a healthy node give its seats up), by reason; and those on a target. */
  fences_untouched: Record<string, number>;
  fences_on_targets: number;
  /** The longest a seat went unrenewed and still kept its lease, and where: the margin an
   *  outage left below the TTL (null when no renewal went unanswered). */
  unrenewed_max: { ms: number; where: string } | null;
}

export interface Verdict {
  violations: string[];
  figures: Figures;
  tenures: Tenure[];
}

const key = (l: { node: string; inc: number; seat: string; epoch: number }) => `${l.node}#${l.inc}|${l.seat}@${l.epoch}`;

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

/** Windows in which a node could not renew: its freezes and its cuts, [from, to]. */
function blackouts(f: ChaosFacts, node: string): { from: number; to: number; by: "frozen" | "cut" }[] {
  return f.faults
    // A node whose broker was killed is cut off from the store as surely as a partitioned one.
    .filter((x) => (x.kind === "sigstop" || x.kind === "cut_member" || x.kind === "cut_leaf" || x.kind === "broker_kill9") && x.targets.includes(node))
    .map((x) => ({ from: x.at_ms, to: x.healed_ms ?? f.run_ended_ms, by: x.kind === "sigstop" ? ("frozen" as const) : ("cut" as const) }));
}

export function tenuresOf(f: ChaosFacts): Tenure[] {
  const detachBy = new Map<string, number>();
  for (const d of f.detaches) {
    const k = key(d);
    if (!detachBy.has(k) || d.ts < detachBy.get(k)!) detachBy.set(k, d.ts);
  }
  const turnsBy = new Map<string, number[]>();
  for (const t of f.turns) turnsBy.set(key(t), [...(turnsBy.get(key(t)) ?? []), t.ts]);
  const incOf = new Map(f.incarnations.map((i) => [`${i.node}#${i.inc}`, i]));
  const out: Tenure[] = [];
  for (const c of f.claims) {
    const k = key(c);
    let end = Number.POSITIVE_INFINITY;
    let ended_by: Tenure["ended_by"] = "running";
    const detached = detachBy.get(k);
    if (detached !== undefined && detached >= c.ts) [end, ended_by] = [detached, "detached"];
    // One process holds a seat once: its next claim of the same seat ends this tenure at the
    // latest (a claim that failed before its inbox attached logs no seat_detached).
    const again = f.claims.find((o) => o.node === c.node && o.inc === c.inc && o.seat === c.seat && o.ts > c.ts);
    if (again && again.ts < end) [end, ended_by] = [again.ts, "detached"];
    const life = incOf.get(`${c.node}#${c.inc}`);
    if (life?.ended_ms != null && life.ended_ms < end) [end, ended_by] = [life.ended_ms, "death"];
    // A blackout that began inside the tenure, before it otherwise ended, ends it — at the
    // last turn admitted under it if any came later.
    for (const b of blackouts(f, c.node)) {
      if (b.from < c.ts || b.from >= end) continue;
      const acts = (turnsBy.get(k) ?? []).filter((t) => t >= b.from && t <= end);
      const last = acts.length ? Math.max(...acts) : b.from;
      // A cut the holder outlived with its lease (nobody else claimed the seat before the
      // tenure otherwise ended) ended nothing: it renews again after the heal.
      if (b.by === "cut" && !f.claims.some((o) => o.seat === c.seat && o.epoch > c.epoch && o.ts >= b.from && o.ts < end)) continue;
      [end, ended_by] = [last, b.by];
    }
    // A claim whose acquire failed (fenced while establishing) never attached its inbox, so
    // it admitted no turn: its hold ends where its last turn began, if it had any — the
    // `seat_acquire_failed` line comes when the establishing step returns, which after a
    // lost lease can be seconds after a successor claimed (seen: a 21 s hydration).
    if (ended_by === "detached" && f.detaches.some((d) => key(d) === k && d.mode === "acquire_failed" && d.ts >= end)) {
      const acts = turnsBy.get(k) ?? [];
      [end, ended_by] = [acts.length ? Math.max(...acts) : c.ts, "acquire_failed"];
    }
    if (end === Number.POSITIVE_INFINITY) end = f.run_ended_ms;
    out.push({ seat: c.seat, node: c.node, inc: c.inc, epoch: c.epoch, start_ms: c.ts, end_ms: end, ended_by });
  }
  return out.sort((a, b) => a.start_ms - b.start_ms || a.epoch - b.epoch);
}

export function check(f: ChaosFacts): Verdict {
  const violations: string[] = [];
  const tenures = tenuresOf(f);

  // --- ownership -------------------------------------------------------------------------
  const bySeat = new Map<string, Tenure[]>();
  for (const t of tenures) bySeat.set(t.seat, [...(bySeat.get(t.seat) ?? []), t]);
  let unowned_total = 0;
  let unowned_max = 0;
  for (const [seat, ts] of bySeat) {
    let unowned = 0;
    for (let i = 1; i < ts.length; i++) {
      const prev = ts[i - 1]!;
      const next = ts[i]!;
      if (next.epoch <= prev.epoch) violations.push(`epochs: ${seat} claimed at epoch ${next.epoch} by ${next.node}#${next.inc} after epoch ${prev.epoch} by ${prev.node}#${prev.inc}`);
      // Overlap against every earlier tenure still running, not only the one before.
      for (let j = 0; j < i; j++) {
        const earlier = ts[j]!;
        if (earlier.end_ms > next.start_ms) {
          violations.push(
            `overlap: ${seat} held by ${earlier.node}#${earlier.inc}@${earlier.epoch} until ${earlier.end_ms} (${earlier.ended_by}) and by ${next.node}#${next.inc}@${next.epoch} from ${next.start_ms}`,
          );
        }
      }
      const latestEnd = Math.max(...ts.slice(0, i).map((t) => t.end_ms));
      if (next.start_ms > latestEnd) unowned += next.start_ms - latestEnd;
    }
    unowned_total += unowned;
    unowned_max = Math.max(unowned_max, unowned);
  }

  // --- frozen nodes exit 75 --------------------------------------------------------------
  const frozen = f.faults.filter((x) => x.frozen);
  let frozen75 = 0;
  for (const x of frozen) {
    const life = f.incarnations.find((i) => i.node === x.frozen!.node && i.inc === x.frozen!.inc);
    if (life?.exit_code === 75) frozen75++;
    else violations.push(`frozen: ${x.frozen!.node}#${x.frozen!.inc} frozen at ${x.at_ms} exited ${life?.exit_code ?? "never"}, want 75`);
  }

  // --- every exit is a fault's ----------------------------------------------------------
  for (const life of f.incarnations) {
    if (life.exit_code === null) continue;
    // A frozen incarnation's exit is the frozen rule's to judge (it must be 75).
    if (frozen.some((x) => x.frozen!.node === life.node && x.frozen!.inc === life.inc)) continue;
    const ended = life.ended_ms ?? f.run_ended_ms;
    const hitBy = f.faults.filter((x) => x.targets.includes(life.node) && x.at_ms >= life.started_ms && x.at_ms <= ended);
    if (hitBy.some((x) => EXPECTED_EXITS[x.kind].includes(life.exit_code!))) continue;
    const why = hitBy.length === 0 ? "no fault hit it" : hitBy.map((x) => `the ${x.kind} at ${x.at_ms} explains ${EXPECTED_EXITS[x.kind].join("/") || "no exit"}`).join("; ");
    violations.push(`exit: ${life.node}#${life.inc} exited ${life.exit_code} at ${life.ended_ms ?? "?"}; ${why}`);
  }

  // --- mail ------------------------------------------------------------------------------
  const repliesTo = new Map<string, Reply[]>();
  for (const r of f.replies) repliesTo.set(r.thread_parent, [...(repliesTo.get(r.thread_parent) ?? []), r]);
  const killFaults = f.faults.filter((x) => KILL_KINDS.has(x.kind));
  const kills = killFaults.map((x) => x.at_ms);
  let acked = 0;
  let once = 0;
  let twice = 0;
  let held = 0;
  let lost = 0;
  const withDecision = new Set(f.answeredWithDecision ?? []);
  const withRun = new Set(f.answeredWithRun ?? []);
  for (const s of f.sent) {
    if (s.message_id === null || (s.status !== 200 && s.status !== 202)) continue;
    acked++;
    const inThread = (repliesTo.get(s.message_id) ?? []).filter((r) => r.author === s.seat && !r.files);
    const answers = inThread.filter((r) => !r.report).sort((a, b) => a.created_ms - b.created_ms);
    if (answers.length === 1) once++;
    else if (answers.length === 0 && withDecision.has(s.message_id) && inThread.some((r) => r.approval)) once++;
    else if (answers.length === 0 && withRun.has(s.message_id) && inThread.some((r) => r.report && !r.approval)) once++;
    else if (answers.length === 0) {
      // A kill after the acknowledgement, or a freeze still on at it (a frozen holder's
      // waiting pull takes the mail to a process that will never settle it).
      const killedSince = killFaults.some((x) => (x.healed_ms ?? x.at_ms) >= (s.acked_ms ?? 0));
      if (f.heldByBroker.has(s.message_id) && killedSince) held++;
      else {
        lost++;
        violations.push(`lost: ${s.key} (${s.message_id}) to ${s.seat}, acknowledged at ${s.acked_ms}, never answered${f.heldByBroker.has(s.message_id) ? " (ack-pending with no kill since)" : ""}`);
      }
    } else if (answers.length === 2 && kills.some((k) => k >= answers[0]!.created_ms - KILL_WINDOW_BEFORE_MS && k <= answers[1]!.created_ms)) twice++;
    else violations.push(`duplicate: ${s.key} (${s.message_id}) to ${s.seat} answered ${answers.length} times at ${answers.map((a) => a.created_ms).join(", ")}`);
  }

  // --- coding runs: none lost, none told twice ---------------------------------------------
  let runsTold = 0;
  for (const r of f.runs ?? []) {
    const told = f.runTold?.[r.id] ?? 0;
    const reports = (repliesTo.get(r.thread) ?? []).filter((x) => x.author === r.seat && x.report).length;
    const files = (repliesTo.get(r.thread) ?? []).filter((x) => x.author === r.seat && x.files).length;
    if (files > 1) violations.push(`run files: ${r.id} of ${r.seat} posted its files ${files} times in its thread`);
    if (r.state !== "done" || !r.reported) violations.push(`run lost: ${r.id} of ${r.seat} ended the run ${r.state}${r.reported ? "" : ", never told"}`);
    else if (told > 1) violations.push(`run told twice: ${r.id} of ${r.seat} (${told} results collected)`);
    else if (reports !== 1) violations.push(`run report: ${r.id} of ${r.seat} reported ${reports} times in its thread`);
    else runsTold++;
  }

  // --- approvals: each decided call settled, run at most once, its decision told once ------
  let approvalsSettled = 0;
  for (const a of f.approvals ?? []) {
    const told = (repliesTo.get(a.thread) ?? []).filter((x) => x.author === a.seat && x.approval).length;
    // A call whose holder died during it may or may not have landed: at most once, never twice.
    const allowed = a.state === "approved" ? (a.ran === "yes" ? [1] : a.ran === "unknown" ? [0, 1] : [0]) : [0];
    if (a.state === "pending" || a.stage !== "done") violations.push(`approval unsettled: ${a.id} of ${a.seat} ended ${a.state}, ${a.stage}`);
    else if (!allowed.includes(a.effects)) violations.push(`approval effect: ${a.id} of ${a.seat} (${a.state}, ran ${a.ran ?? "-"}) had ${a.effects} effects`);
    else if (told !== 1) violations.push(`approval told: ${a.id} of ${a.seat} told its decision ${told} times in its thread`);
    else approvalsSettled++;
  }

  // --- the leaf never changes the fleet's streams -----------------------------------------
  for (const [stream, n] of Object.entries(f.streamReplicas)) {
    if (n !== f.membersReplicas) violations.push(`streams: ${stream} ends at R${n}, the members configure R${f.membersReplicas}`);
  }
  for (const u of f.streamUpdates.filter((x) => x.node === f.leaf)) violations.push(`streams: the leaf ${u.node} changed ${u.stream}`);

  // --- the final probe -------------------------------------------------------------------
  const deaf = f.seats.filter((s) => !f.probeAnswered.has(s));
  for (const s of deaf) violations.push(`probe: ${s} did not answer a fresh message after the quiet period`);

  // --- probes are not mail ---------------------------------------------------------------
  if ((f.invalidTriggers ?? 0) > 0) violations.push(`probes: the agent's inbox handler was handed ${f.invalidTriggers} message(s) that are not triggers (inbox_trigger_invalid)`);
  const fences = fencesByTouch(f);
  // --- an election fences nobody at a TTL the config accepts (issue 34) ------------------
  const untouched = Object.values(fences.untouched).reduce((a, b) => a + b, 0);
  if (f.ttl_ms !== undefined && f.ttl_ms >= replicatedLeaseTtlFloorMs() && untouched > 0) {
    violations.push(`fences: ${untouched} seat(s) fenced on nodes no fault touched, at TTL ${f.ttl_ms / 1000} s (the config's floor is ${replicatedLeaseTtlFloorMs() / 1000} s): ${fences.where.slice(0, 8).join("; ")}`);
  }
  const deaf_alarms: Record<string, number> = {};
  for (const a of f.deafAlarms ?? []) deaf_alarms[a.reason] = (deaf_alarms[a.reason] ?? 0) + 1;

  // --- failover figures ------------------------------------------------------------------
  const failover: Record<string, number[]> = {};
  for (const x of f.faults) {
    const held = tenures.filter((t) => x.targets.includes(t.node) && t.start_ms <= x.at_ms && t.end_ms >= x.at_ms);
    if (held.length === 0) continue;
    let worst = 0;
    let complete = true;
    for (const t of held) {
      const next = tenures.find((n) => n.seat === t.seat && n.start_ms > x.at_ms && n.epoch > t.epoch);
      if (!next) {
        complete = false;
        break;
      }
      worst = Math.max(worst, next.start_ms - x.at_ms);
    }
    if (complete) (failover[x.kind] ??= []).push(worst);
  }
  const failover_ms = summarize(failover);
  // Fault → the first successful turn of each seat the target held, on a later epoch.
  const firstTurn: Record<string, number[]> = {};
  const completions = [...(f.completions ?? [])].sort((a, b) => a.ts - b.ts);
  for (const x of f.faults) {
    for (const t of tenures.filter((t) => x.targets.includes(t.node) && t.start_ms <= x.at_ms && t.end_ms >= x.at_ms)) {
      const first = completions.find((c) => c.seat === t.seat && c.epoch > t.epoch && c.ts >= x.at_ms);
      if (first) (firstTurn[x.kind] ??= []).push(first.ts - x.at_ms);
    }
  }
  const first_turn_ms = summarize(firstTurn);

  return {
    violations,
    tenures,
    figures: {
      tenures: tenures.length,
      acked,
      unacked: f.sent.length - acked,
      answered_once: once,
      answered_twice_in_kill_window: twice,
      held_by_broker: held,
      lost,
      frozen_exits_75: `${frozen75}/${frozen.length}`,
      probe: `${f.seats.length - deaf.length}/${f.seats.length}`,
      failover_ms,
      first_turn_ms,
      mailbox_probes: f.mailboxProbes ? `${f.mailboxProbes.heard}/${f.mailboxProbes.sent}` : "not gathered",
      deaf_alarms,
      fences_untouched: fences.untouched,
      fences_on_targets: fences.on_targets,
      unrenewed_max: unrenewedMax(f),
      unowned_ms_total: unowned_total,
      unowned_ms_max_seat: unowned_max,
      runs: `${runsTold}/${f.runs?.length ?? 0}`,
      approvals: `${approvalsSettled}/${f.approvals?.length ?? 0}`,
    },
  };
}

function summarize(samples: Record<string, number[]>): Record<string, { n: number; p50: number; p99: number; max: number }> {
  const out: Record<string, { n: number; p50: number; p99: number; max: number }> = {};
  for (const [kind, xs] of Object.entries(samples)) {
    const s = [...xs].sort((a, b) => a - b);
    out[kind] = { n: s.length, p50: percentile(s, 50), p99: percentile(s, 99), max: s[s.length - 1]! };
  }
  return out;
}

/** What Bun reports for a child ended by SIGKILL (128 + 9); -9 is the same death as a signal
 * number, as other runners spell it. */
const SIGKILL_EXITS = [137, -9];
/**
 * The exit codes each fault explains in the incarnation it hit. A kill -9 and a full
 * restart (kill -9 of every node) end a process with SIGKILL. A broker kill -9 leaves the
 * node to notice its sidecar's death and stop with 1 (EXIT_FAILURE), or SIGKILL when the
 * harness ends a node that outlived its sidecar. A freeze ends in the watchdog's 75. A
 * SIGTERM is a drain, which exits 0. A cut ends nothing: the node rides it out.
 */
export const EXPECTED_EXITS: Readonly<Record<FaultKind, readonly number[]>> = {
  kill9: SIGKILL_EXITS,
  broker_kill9: [1, ...SIGKILL_EXITS],
  sigstop: [75],
  sigterm: [0],
  full_restart: SIGKILL_EXITS,
  cut_member: [],
  cut_leaf: [],
};

/** A kill this long before the first answer still counts as its window: the answer's turn
 * began before the kill's victim wrote it (the answer is stamped when it is applied). A
 * turn with the scripted model takes well under a second; 10 s is generous on a loaded box. */
export const KILL_WINDOW_BEFORE_MS = 10_000;

/**
 * Fences split by whether a fault touched their node: a fault's window runs from its start
 * to the next fault's (recovery is awaited in between), and a fence on a node the fault
 * targeted in that window is the fault's doing. Any other fence is a healthy node giving
 * its seats up — what a lease-store election costs. Pure.
 */
export function fencesByTouch(f: Pick<ChaosFacts, "faults" | "fences" | "run_ended_ms">): { untouched: Record<string, number>; on_targets: number; where: string[] } {
  const untouched: Record<string, number> = {};
  const where: string[] = [];
  let on_targets = 0;
  for (const fence of f.fences ?? []) {
    const w = faultWindowAt(f, fence.ts);
    if (w && w.fault.targets.includes(fence.node)) on_targets++;
    else {
      untouched[fence.reason] = (untouched[fence.reason] ?? 0) + 1;
      where.push(`${fence.node} ${fence.seat} ${fence.reason} ${describeWindow(w, fence.ts)}`);
    }
  }
  return { untouched, on_targets, where };
}

/** The fault whose window holds `ts`: from its start to the next fault's (or the run's end). */
function faultWindowAt(f: Pick<ChaosFacts, "faults" | "run_ended_ms">, ts: number): { fault: FaultRecord; index: number } | null {
  const faults = [...f.faults].sort((a, b) => a.at_ms - b.at_ms);
  let i = -1;
  while (i + 1 < faults.length && faults[i + 1]!.at_ms <= ts) i++;
  const end = faults[i + 1]?.at_ms ?? f.run_ended_ms;
  return i >= 0 && ts < end ? { fault: faults[i]!, index: i } : null;
}

/** "12.3 s into fault 5 (cut_member c, healed at +43.8 s)", or "before any fault". */
function describeWindow(w: { fault: FaultRecord; index: number } | null, ts: number): string {
  if (!w) return "before any fault";
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const healed = w.fault.healed_ms !== null ? `, healed at +${s(w.fault.healed_ms - w.fault.at_ms)}` : "";
  return `${s(ts - w.fault.at_ms)} into fault ${w.index + 1} (${w.fault.kind} ${w.fault.targets.join(",")}${healed})`;
}

/** The longest a seat went unrenewed and still kept its lease, and in which fault's window. Pure. */
export function unrenewedMax(f: Pick<ChaosFacts, "faults" | "storeAnswering" | "run_ended_ms">): { ms: number; where: string } | null {
  let worst: { node: string; ts: number; unrenewed_ms: number } | null = null;
  for (const a of f.storeAnswering ?? []) if (!worst || a.unrenewed_ms > worst.unrenewed_ms) worst = a;
  return worst ? { ms: worst.unrenewed_ms, where: `node ${worst.node}, ${describeWindow(faultWindowAt(f, worst.ts), worst.ts)}` } : null;
}
