// The seat's side of its coding runs (spec: "Sandbox control is owner-routed", Fencing,
// "Establishing a seat"): the run_sandbox tool, the control subscription attached and
// detached with the inbox, the recovery step of the acquire hook, the answers a thread
// gives a parked run, and the result turned into a turn. Every run-record write is made
// under the grant this node holds on the seat (RunStore.mutate's fence), so whichever node
// holds the seat now is the one that collects, and a zombie's late write bounces.
import { createHash, randomUUID } from "node:crypto";
import { z } from "zod";
import type { Clock } from "../clock.ts";
import type { Company } from "../config/company.ts";
import type { SandboxProviderConfig, RoleSandbox } from "../config/sandbox.ts";
import { encodeSlotKey } from "../coord/bucket.ts";
import { CasConflict, StoreUnavailable } from "../coord/contract.ts";
import { RIDE_OUT_MS, rideOut } from "../coord/ride-out.ts";
import { MAX_MESSAGE_BYTES, truncateToBytes } from "../estate/records.ts";
import { GENERAL_CHANNEL_ID } from "../estate/seed.ts";
import type { Logger } from "../log.ts";
import { conversationRefs, conversationTarget, postInConversation } from "../agent/conversation-post.ts";
import type { FileStore } from "../objects/store.ts";
import { storeRunArtifacts } from "./artifacts.ts";
import { causeFloor, encodeTrigger, MAX_TRIGGER_TEXT_BYTES, type Trigger } from "../org/trigger.ts";
import { ack, defer, nak, type Attachment, type Delivery, type Outcome, type Queue } from "../queue/contract.ts";
import { mailbox } from "../queue/topics.ts";
import type { EventSink } from "../agent/events.ts";
import { defineTool, fail, ok, type Tool, type ToolContext } from "../agent/tools/contract.ts";
import type { EstatePort } from "../agent/tools/estate-port.ts";
import { decodeControl, type ControlEvent } from "./control.ts";
import { launchSupervisor, runDir, type SupervisorFile } from "./launch.ts";
import { QA_MAX_BYTES, runKey, RunFenced, RunNotFound, TASK_MAX_BYTES, isLive, type RunRecord, type RunStore, type RunWriter } from "./runs.ts";
import { failureNotice, resultWords, type SeatGrantLike } from "./words.ts";

/** A control delivery the store could not take is tried again after this (an R3 election),
 * doubling to CONTROL_RETRY_MAX_MS: its 25 deliveries then outlast hours of store outage
 * rather than two minutes, before the broker gives it to the dead letters. */
const CONTROL_RETRY_MS = 5_000;
const CONTROL_RETRY_MAX_MS = 10 * 60_000;
/** A run left `starting` this long had its node die between the record and the launch. */
export const STARTING_ABANDONED_MS = 60_000;

export interface BrokerAccess {
  servers: string[];
  user?: string;
  pass?: string;
}

export interface SeatRunsOptions {
  node_id: string;
  /** This process's incarnation: the owner every record write names. */
  owner: string;
  storeDir: string;
  store: RunStore;
  runs_bucket: string;
  queue: Pick<Queue, "attach" | "publish" | "resetMailbox">;
  estate: EstatePort;
  company: () => Company;
  /** How a supervisor reaches the broker (null: it cannot, and no run starts). */
  broker: () => BrokerAccess | null;
  /** Where a finished run's diff and output are kept as files (null: they are not). */
  files?: Pick<FileStore, "put"> | null;
  clock: Clock;
  log: Logger;
  events: EventSink;
  /** Starts a supervisor; src/sandbox/launch.ts unless a test says otherwise. */
  launch?: (dir: string, file: SupervisorFile) => number;
}

interface Held {
  epoch: number;
  control: Attachment | null;
}

export class SeatRuns {
  private readonly held = new Map<string, Held>();

  constructor(private readonly o: SeatRunsOptions) {}

  private sandboxOf(handle: string): { provider: SandboxProviderConfig; role: RoleSandbox } | null {
    const company = this.o.company();
    const provider = company.providers.sandbox;
    const role = company.roles.find((r) => r.handle === handle)?.sandbox;
    return provider && role ? { provider, role } : null;
  }

  /** Whether this seat may start coding runs under the company in force. */
  mayRun(handle: string): boolean {
    return this.sandboxOf(handle) !== null;
  }

  private writer(handle: string): RunWriter | null {
    const h = this.held.get(handle);
    return h ? { owner: this.o.owner, epoch: h.epoch } : null;
  }

  /** Acquire step: take over the seat's runs under this grant, then attach the control
   *  subject (a seat with no sandbox has neither). */
  async prepare(grant: SeatGrantLike): Promise<void> {
    this.held.set(grant.handle, { epoch: grant.epoch, control: null });
    if (!this.sandboxOf(grant.handle)) return;
    await this.recover(grant.handle);
    await this.reclaimControl(grant);
    await this.ensureControl(grant);
  }

  /**
   * A result the broker handed to the last holder's pull just before that holder died waits
   * ack-pending for the 30-minute ack wait. The lease says that holder is gone, so the control
   * mailbox is reset to its ack floor before it attaches here (as the inbox is, node.ts).
   */
  private async reclaimControl(grant: SeatGrantLike): Promise<void> {
    const mb = mailbox(grant.handle, "control");
    try {
      if (await this.o.queue.resetMailbox(mb.subject, mb.group)) this.o.log.debug("sandbox_control_reclaimed", { seat: grant.handle, epoch: grant.epoch });
    } catch (err) {
      // No mailbox yet (the seat's first acquisition makes it), or the broker did not answer:
      // the attach below creates it, and a stranded result is the waiter's to end.
      this.o.log.debug("sandbox_control_reclaim_skipped", { seat: grant.handle, error: (err as Error).message });
    }
  }

  /**
   * Attaches the seat's control subject under this grant, unless it is already. Also the
   * way in for a seat whose sandbox arrived with a company apply after it was acquired: its
   * first run attaches it, before the run's result could be published to nobody (an
   * interest stream drops a message no consumer wants).
   */
  private async ensureControl(grant: SeatGrantLike): Promise<boolean> {
    const held = this.held.get(grant.handle);
    if (!held || held.epoch !== grant.epoch) return false;
    if (held.control) return true;
    const mb = mailbox(grant.handle, "control");
    const control = await this.o.queue.attach(mb.subject, mb.group, (d) => this.onControl(grant.handle, d));
    const h = this.held.get(grant.handle);
    if (h === held && !h.control) {
      h.control = control;
      return true;
    }
    await control.detach();
    return h === held;
  }

  /** Release step: the control subject goes with the seat. */
  async release(handle: string): Promise<void> {
    const h = this.held.get(handle);
    this.held.delete(handle);
    await h?.control?.detach();
  }

  /**
   * The interrupted-run recovery (spec: an acquire-hook step). Every run the seat still
   * has is taken over at this grant's epoch, so its last holder's late writes bounce; a
   * result the last holder took and never told the seat is told now; a question it never
   * posted is posted; a run whose node died before launching it is failed and told.
   */
  private async recover(handle: string): Promise<void> {
    const writer = this.writer(handle)!;
    const { runs, invalid } = await this.o.store.list(handle);
    for (const bad of invalid) this.o.log.error("sandbox_run_record_invalid", { seat: handle, key: bad.key, error: bad.error });
    for (const r of runs.filter(isLive)) {
      let rec = await this.o.store.mutate(handle, r.id, writer, (cur) => ({ ...cur }));
      if (rec.state === "starting" && this.o.clock.now() - rec.created_at >= STARTING_ABANDONED_MS) {
        rec = await this.o.store.mutate(handle, r.id, writer, (cur) => (cur.state === "starting" ? { ...cur, state: "done", result: abandonedResult() } : null));
      }
      if (rec.state === "parked" && rec.question && !rec.question.posted) await this.postQuestion(rec, writer);
      if (rec.state === "done" && !rec.reported) await this.report(rec, writer);
      this.o.log.info("sandbox_run_recovered", { seat: handle, run: r.id, state: rec.state, epoch: writer.epoch });
    }
  }

  private async onControl(handle: string, d: Delivery): Promise<Outcome> {
    const decoded = decodeControl(d.data);
    if (!decoded.ok) {
      this.o.log.error("sandbox_control_invalid", { seat: handle, seq: d.streamSeq, error: decoded.error });
      return ack();
    }
    const e = decoded.value;
    if (e.seat !== handle) {
      this.o.log.error("sandbox_control_misrouted", { seat: handle, event_seat: e.seat, run: e.run_id });
      return ack();
    }
    const writer = this.writer(handle);
    if (!writer) return defer(`seat ${handle} is not held here`);
    try {
      if (e.kind === "question") await this.onQuestion(e, writer);
      else await this.onFinished(e, writer);
      return ack();
    } catch (err) {
      if (err instanceof RunFenced) return defer(`run ${e.run_id} is owned at a later epoch: ${err.message}`);
      if (err instanceof RunNotFound) {
        this.o.log.warn("sandbox_control_for_unknown_run", { seat: handle, run: e.run_id, kind: e.kind });
        return ack();
      }
      this.o.log.warn("sandbox_control_failed", { seat: handle, run: e.run_id, kind: e.kind, error: (err as Error).message });
      return nak(Math.min(CONTROL_RETRY_MAX_MS, CONTROL_RETRY_MS * 2 ** Math.max(0, d.deliveryCount - 1)));
    }
  }

  private async onQuestion(e: Extract<ControlEvent, { kind: "question" }>, writer: RunWriter): Promise<void> {
    const rec = await this.o.store.mutate(e.seat, e.run_id, writer, (r) =>
      r.state === "done" || (r.question !== null && r.question.seq >= e.seq) ? null : { ...r, state: "parked", question: { seq: e.seq, text: e.text, posted: false, asked_at: this.o.clock.now() } },
    );
    if (rec.state === "parked" && rec.question?.seq === e.seq && !rec.question.posted) await this.postQuestion(rec, writer);
  }

  private async onFinished(e: Extract<ControlEvent, { kind: "finished" }>, writer: RunWriter): Promise<void> {
    const rec = await this.o.store.mutate(e.seat, e.run_id, writer, (r) => (r.state === "done" ? null : { ...r, state: "done", result: e.result }));
    if (!rec.reported) await this.report(rec, writer);
  }

  /**
   * Posts a parked run's question where the work came from, once (its op id is derived):
   * the work's thread or item, or — for work that came from no thread (a colleague's ask, a
   * schedule) — a new thread in #general. Where it landed is kept on the question: a reply
   * there is its answer.
   */
  private async postQuestion(rec: RunRecord, writer: RunWriter): Promise<void> {
    const q = rec.question!;
    const op_id = `run-${rec.id}-q${q.seq}`;
    const here = conversationTarget(rec.conversation) !== null;
    const asked = here ? "" : ` (for work in ${rec.conversation})`;
    const body = truncateToBytes(`❓ My coding run ${rec.id}${asked} asks: ${q.text}\n\nReply here mentioning @${rec.seat} and I will pass your answer on.`, MAX_MESSAGE_BYTES);
    const where = here ? rec.conversation : `chat:${GENERAL_CHANNEL_ID}:${op_id}`;
    if (!(await this.postTo(rec, body, op_id, where))) {
      this.o.log.warn("sandbox_question_not_posted", { seat: rec.seat, run: rec.id, conversation: rec.conversation });
      return;
    }
    await this.o.store.mutate(rec.seat, rec.id, writer, (r) => (r.question?.seq === q.seq && !r.question.posted ? { ...r, question: { ...r.question, posted: true, where } } : null));
    this.o.events.emit("sandbox_run_parked", { seat: rec.seat, run: rec.id, seq: q.seq, node: this.o.node_id });
  }

  /** Posts once (op_id) where the run's work came from, or in `conversation` (a question
   *  asked about work from no thread); false when there is nowhere to say it. */
  private postTo(rec: RunRecord, body: string, op_id: string, conversation = rec.conversation): Promise<boolean> {
    return postInConversation(this.o, { seat: rec.seat, conversation, body, op_id });
  }

  /** The result as a turn: a ledgered trigger on the seat's inbox, then the record says so. */
  private async report(rec: RunRecord, writer: RunWriter): Promise<void> {
    const notice = failureNotice(rec);
    if (notice !== null) await this.postTo(rec, truncateToBytes(notice, MAX_MESSAGE_BYTES), `run-${rec.id}-failed`);
    const trigger = runTrigger(rec, this.o.clock.now());
    await this.o.queue.publish(mailbox(rec.seat, "inbox").subject, encodeTrigger(trigger), { msgId: trigger.event_id });
    await this.o.store.mutate(rec.seat, rec.id, writer, (r) => (r.reported ? null : { ...r, reported: true }));
    // After the seat is told: keeping the files must not widen the window in which a seat
    // move could tell a result twice. A holder that dies here leaves them unkept.
    if (this.o.files) await storeRunArtifacts({ files: this.o.files, estate: this.o.estate, log: this.o.log }, rec);
    const failed = rec.result?.outcome !== "succeeded";
    this.o.events.emit(failed ? "sandbox_run_failed" : "sandbox_run_finished", {
      seat: rec.seat,
      run: rec.id,
      node: this.o.node_id,
      outcome: rec.result?.outcome ?? null,
      reason: rec.result?.reason ?? null,
    });
  }

  /**
   * The triggers among `triggers` that answer a parked run of this seat: a reply in the
   * run's thread (or on its work item) after the question was posted. Each answer is
   * written to the run record under the turn's grant; the supervisor hands it to the box.
   * Returns the event ids taken (their turn is the answer; the ledger records them).
   */
  async takeAnswers(seat: string, epoch: number, triggers: readonly Trigger[]): Promise<{ event_id: string; run: string }[]> {
    if (!this.sandboxOf(seat)) return [];
    const candidates = triggers.filter((t) => ANSWER_TYPES.has(t.type));
    if (candidates.length === 0) return [];
    const { runs } = await this.o.store.list(seat);
    const writer = { owner: this.o.owner, epoch };
    const taken: { event_id: string; run: string }[] = [];
    for (const t of candidates) {
      const run = runs.find((r) => r.state === "parked" && r.question?.posted && (r.question.where ?? r.conversation) === t.conversation && !taken.some((x) => x.run === r.id) && answerFits(r, t));
      if (!run) continue;
      const q = run.question!;
      const text = await this.answerText(seat, t);
      const rec = await this.o.store.mutate(seat, run.id, writer, (r) =>
        r.state === "parked" && r.question?.seq === q.seq && r.answer?.seq !== q.seq
          ? { ...r, state: "running", answer: { seq: q.seq, text: truncateToBytes(text, QA_MAX_BYTES), by: t.from, message_id: t.refs.message_id ?? t.refs.comment_id ?? null } }
          : null,
      );
      if (rec.answer?.seq !== q.seq) continue;
      taken.push({ event_id: t.event_id, run: run.id });
      this.o.events.emit("sandbox_answer_given", { seat, run: run.id, seq: q.seq, by: t.from, event_id: t.event_id, node: this.o.node_id });
    }
    return taken;
  }

  /** The reply's own words: a chat message's body without the leading @mention of the
   *  seat (the trigger's text is a summary for the model: "ana in #general: …"). */
  private async answerText(seat: string, t: Trigger): Promise<string> {
    if (t.refs.message_id === undefined) return t.text;
    const m = await this.o.estate.read({ q: "chat.message", id: t.refs.message_id }, { atLeast: causeFloor(t) }).catch(() => null);
    if (!m) return t.text;
    return m.body.replace(new RegExp(`^\\s*@${seat}\\b[\\s,:]*`), "").trim() || m.body;
  }

  /** The run_sandbox tool: starts a run and returns at once; its result comes back as a turn. */
  tool(): Tool {
    return defineTool({
      name: "run_sandbox",
      description:
        "Start a coding run in a sandbox: an engine (a coding CLI or a script) works on the task in its own clone of the repository. Returns at once with the run id; its result (diff, commits, output) comes back to you later as a new turn. If the engine asks a question, it is posted in this thread and the reply is passed on.",
      input: z.strictObject({
        task: z.string().min(1).refine((s) => Buffer.byteLength(s, "utf8") <= TASK_MAX_BYTES, `is over ${TASK_MAX_BYTES} bytes`).describe("What the engine should do"),
        engine: z.string().min(1).optional().describe("Engine name (default: the first this seat may run)"),
      }),
      annotations: { readOnly: false, openWorld: true, estateWrite: false },
      run: (a, ctx) => this.start(a, ctx),
    });
  }

  /** A run's first record, through a store election: a retry refused because the record
   *  exists found the first attempt landed (start() looked for the id just before, and only
   *  this seat's holder starts its runs), so no run is started twice and none is left
   *  `starting` on a live holder. */
  private async createOnce(rec: RunRecord): Promise<void> {
    let attempts = 0;
    const create = async () => {
      attempts += 1;
      try {
        await this.o.store.create(rec);
      } catch (err) {
        if (!(attempts > 1 && err instanceof CasConflict)) throw err;
      }
    };
    await rideOut(this.o.clock, this.o.clock.now() + RIDE_OUT_MS, create, isUnavailable);
  }

  private async start(a: { task: string; engine?: string }, ctx: ToolContext) {
    const sb = this.sandboxOf(ctx.seat);
    if (!sb) return fail("this seat may not start coding runs (set roles[].sandbox and providers.sandbox in the company file)");
    const allowed = sb.role.engines ?? Object.keys(sb.provider.engines);
    const engineName = a.engine ?? allowed[0]!;
    if (!allowed.includes(engineName)) return fail(`engine "${engineName}" is not one this seat may run (${allowed.join(", ")})`);
    const broker = this.o.broker();
    if (!broker) return fail("this node cannot start coding runs: its broker has no credential for a run's supervisor");
    if (!(await this.ensureControl({ handle: ctx.seat, epoch: ctx.epoch }))) return fail("this seat is not held here any more; the run was not started");
    // Keyed on what the turn answers, as a reply's op id is: a turn that runs again (its
    // holder died before its record landed) asking for the same run gets the one it
    // started, not a second.
    const id = ctx.cause !== undefined ? runIdFor(ctx.seat, ctx.cause, engineName, a.task) : randomUUID();
    if (ctx.cause !== undefined) {
      const started = await this.o.store.get(ctx.seat, id);
      if (started) return { ...ok({ run_id: id, status: started.state, engine: engineName, already_started: true }), reached: true };
    }
    const live = (await this.o.store.list(ctx.seat)).runs.filter((r) => r.state !== "done");
    if (live.length >= sb.role.max_runs) return fail(`this seat already has ${live.length} runs going (roles[].sandbox.max_runs is ${sb.role.max_runs}); wait for one to finish`);
    const writer = { owner: this.o.owner, epoch: ctx.epoch };
    const now = this.o.clock.now();
    const rec: RunRecord = {
      v: 1, id, seat: ctx.seat, engine: engineName, task: a.task, conversation: ctx.conversation ?? `seat:${ctx.seat}`, from: ctx.from ?? ctx.seat,
      owner: writer.owner, owner_epoch: writer.epoch, node: this.o.node_id, pid: null, state: "starting",
      question: null, answer: null, cancel: null, result: null, reported: false, created_at: now, updated_at: now,
    };
    await this.createOnce(rec);
    const engine = sb.provider.engines[engineName]!;
    const dir = runDir(this.o.storeDir, id);
    let pid: number;
    try {
      pid = (this.o.launch ?? launchSupervisor)(dir, {
        v: 1, seat: ctx.seat, run_id: id, control_subject: mailbox(ctx.seat, "control").subject,
        record_key: encodeSlotKey(runKey(ctx.seat, id)), runs_bucket: this.o.runs_bucket, nats: broker,
        spec: {
          run_id: id, command: engine.command, env: { ...engine.env, ...sb.role.env }, task: a.task, repo: sb.provider.repo,
          network: sb.role.network ?? sb.provider.network, isolation: sb.provider.isolation, limits: sb.provider.limits, hide: [this.o.storeDir],
        },
      });
    } catch (err) {
      const reason = `the run could not be started: ${(err as Error).message}`;
      await this.o.store.mutate(ctx.seat, id, writer, (r) => ({ ...r, state: "done", reported: true, result: { ...abandonedResult(), reason } }));
      return fail(reason);
    }
    const until = this.o.clock.now() + RIDE_OUT_MS;
    await rideOut(this.o.clock, until, () => this.o.store.mutate(ctx.seat, id, writer, (r) => (r.state === "starting" ? { ...r, state: "running", pid } : { ...r, pid })), isUnavailable);
    this.o.events.emit("sandbox_run_started", { seat: ctx.seat, run: id, engine: engineName, node: this.o.node_id, pid, epoch: ctx.epoch });
    return { ...ok({ run_id: id, status: "running", engine: engineName }), reached: true };
  }
}

const isUnavailable = (err: unknown) => err instanceof StoreUnavailable;

/** A run's id from the trigger its turn answers, the engine and the task: UUID-shaped, like
 *  a fresh one, so every place that names a run reads it the same. Pure. */
export function runIdFor(seat: string, cause: string, engine: string, task: string): string {
  const h = createHash("sha256").update(`${seat}\n${cause}\n${engine}\n${task}`).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** Reply kinds that can answer a parked run's question. */
const ANSWER_TYPES = new Set<Trigger["type"]>(["chat_mention", "chat_direct", "task_comment"]);

/** An answer is a reply written after the question was posted (not the message that started the run). */
function answerFits(r: RunRecord, t: Trigger): boolean {
  return r.question !== null && t.created_at >= r.question.asked_at;
}

function abandonedResult() {
  return { outcome: "failed" as const, exit_code: null, reason: "the node that started the run stopped before the run began", output_tail: "", output_bytes: 0, diff: "", commits: [], summary: "" };
}

/** The trigger that tells the seat a run's result: one per run (its event id is the
 * inbox message id and the ledger key), in the run's own conversation. Pure. */
export function runTrigger(rec: RunRecord, now: number): Trigger {
  return {
    type: "sandbox_run",
    event_id: `run.${rec.id}.done`,
    seat: rec.seat,
    conversation: rec.conversation,
    from: `run:${rec.id}`,
    text: truncateToBytes(resultWords(rec), MAX_TRIGGER_TEXT_BYTES),
    refs: conversationRefs(rec.conversation),
    created_at: now,
  };
}
