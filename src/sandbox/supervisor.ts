// The supervisor of one run: the small process (`crewlet sandbox-supervise`, started in a
// session of its own) that outlives the node which launched it. It carries the box's
// questions and its result to the seat's control subject, retrying each publish until the
// broker acknowledges it, and carries back what the seat's holder writes on the run record:
// an answer, a cancel, or the record's deletion (a retirement). It never writes the record:
// it holds no seat, so it has no epoch to be fenced by.
import type { Clock } from "../clock.ts";
import { noRedaction, type Redact } from "../agent/providers/redact.ts";
import type { Logger } from "../log.ts";
import type { Box, RunResult } from "./contract.ts";
import { controlMsgId, encodeControl, type ControlEvent } from "./control.ts";
import { RECORD_COMMITS_MAX, RECORD_DIFF_MAX_BYTES, RECORD_TAIL_MAX_BYTES, type RecordedResult, type RunRecord } from "./runs.ts";

/** First retry of a publish the broker did not acknowledge: a member restart is ~1 s. */
const PUBLISH_RETRY_FIRST_MS = 250;
/** Retries back off to this: a broker down for hours is asked twice a minute, not hammered. */
const PUBLISH_RETRY_MAX_MS = 30_000;
/** A result is offered for a day, then given up on (logged): a broker gone that long has
 * lost the fleet, and the result is still in the run's own log for a person to read. */
export const REPORT_GIVE_UP_MS = 24 * 60 * 60 * 1000;
/** Between tries to start the record's watch: a member restart is seconds. */
const WATCH_RETRY_MS = 2_000;

export interface SupervisorPorts {
  /** Publishes with the broker's de-duplication id; throws when not acknowledged. */
  publish(subject: string, data: Uint8Array, msgId: string): Promise<void>;
  /** Every value of the run's record from now on (the current one first); null: deleted. */
  watchRun(onRecord: (r: RunRecord | null) => void): Promise<{ stop(): void }>;
}

export interface SupervisedRun {
  seat: string;
  run_id: string;
  /** The seat's control subject (queue/topics.ts mailbox(seat, "control")). */
  control_subject: string;
}

/**
 * A box's result cut to what a run record holds, each cut said in the text, and every
 * secret the run was given (the seat's CLI key) taken out: the result is posted in a
 * thread, and a CLI that quotes the key it was refused would otherwise post it there.
 */
export function boundResult(r: RunResult, redact: Redact = noRedaction): RecordedResult {
  return {
    outcome: r.outcome,
    exit_code: r.exit_code,
    reason: cutBytes(redact(r.reason), 4096),
    output_tail: tailBytes(redact(r.output_tail), RECORD_TAIL_MAX_BYTES),
    output_bytes: r.output_bytes,
    diff: cutBytes(redact(r.diff), RECORD_DIFF_MAX_BYTES, "\n… (diff cut: it is longer than a run record keeps)"),
    commits: r.commits.slice(0, RECORD_COMMITS_MAX).map((c) => redact(c).slice(0, 512)),
    summary: cutBytes(redact(r.summary), 4096),
  };
}

function cutBytes(s: string, max: number, note = "…"): string {
  const b = Buffer.from(s, "utf8");
  if (b.length <= max) return s;
  const room = max - Buffer.byteLength(note, "utf8");
  return b.subarray(0, Math.max(0, room)).toString("utf8").replace(/\uFFFD+$/, "") + note;
}

function tailBytes(s: string, max: number): string {
  const b = Buffer.from(s, "utf8");
  if (b.length <= max) return s;
  return b.subarray(b.length - max).toString("utf8").replace(/^\uFFFD+/, "");
}

export class Supervisor {
  private asked = new Set<number>();
  private answered = new Set<number>();
  private cancelled = false;

  constructor(
    private readonly run: SupervisedRun,
    private readonly box: Box,
    private readonly ports: SupervisorPorts,
    private readonly clock: Clock,
    private readonly log: Logger,
    /** Takes the run's secrets (its env's values) out of what it tells the seat. */
    private readonly redact: Redact = noRedaction,
  ) {}

  /** Runs to the end: the result published (reported), or given up on after a day. */
  async supervise(): Promise<{ result: RunResult; reported: boolean }> {
    this.box.onQuestion((q) => {
      this.asked.add(q.seq);
      this.log.info("sandbox_run_parked", { run: this.run.run_id, seat: this.run.seat, seq: q.seq });
      void this.offer({ kind: "question", run_id: this.run.run_id, seat: this.run.seat, seq: q.seq, text: cutBytes(this.redact(q.text), 8 * 1024) });
    });
    const watch = this.watchUntilDone();
    const result = await this.box.done;
    (await watch)?.stop();
    this.log.info("sandbox_run_exited", { run: this.run.run_id, seat: this.run.seat, outcome: result.outcome, exit_code: result.exit_code });
    const reported = await this.offer({ kind: "finished", run_id: this.run.run_id, seat: this.run.seat, result: boundResult(result, this.redact) });
    if (!reported) this.log.error("sandbox_run_report_abandoned", { run: this.run.run_id, seat: this.run.seat, after_ms: REPORT_GIVE_UP_MS });
    return { result, reported };
  }

  /**
   * The record's watch, retried until it starts or the box is done: a broker that is away
   * at the start (its node killed just after the launch) must not end the supervisor, or
   * the run's result would never be told.
   */
  private async watchUntilDone(): Promise<{ stop(): void } | null> {
    let finished = false;
    void this.box.done.then(() => (finished = true));
    for (let attempt = 0; !finished; attempt++) {
      try {
        return await this.ports.watchRun((r) => this.onRecord(r));
      } catch (err) {
        if (attempt % 10 === 0) this.log.warn("sandbox_run_watch_retry", { run: this.run.run_id, attempt, error: (err as Error).message });
        await this.clock.sleep(WATCH_RETRY_MS);
      }
    }
    return null;
  }

  /** What the seat's holder wrote: an answer to hand over, a cancel, or the record gone. */
  private onRecord(r: RunRecord | null): void {
    if (r === null) return this.cancel("the run's record was deleted (its seat was removed, or an operator ended it)");
    if (r.cancel) return this.cancel(r.cancel.reason);
    const a = r.answer;
    if (a && this.asked.has(a.seq) && !this.answered.has(a.seq)) {
      this.answered.add(a.seq);
      this.log.info("sandbox_run_resumed", { run: this.run.run_id, seat: this.run.seat, seq: a.seq, by: a.by });
      this.box.answer(a.seq, a.text);
    }
  }

  private cancel(reason: string): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.log.info("sandbox_run_cancelled", { run: this.run.run_id, seat: this.run.seat, reason });
    this.box.cancel(reason);
  }

  /** Publishes until acknowledged, backing off with full jitter; false after a day. */
  private async offer(e: ControlEvent): Promise<boolean> {
    const data = encodeControl(e);
    const msgId = controlMsgId(e);
    const start = this.clock.now();
    for (let attempt = 0; ; attempt++) {
      try {
        await this.ports.publish(this.run.control_subject, data, msgId);
        return true;
      } catch (err) {
        if (this.clock.now() - start >= REPORT_GIVE_UP_MS) return false;
        const wait = Math.floor(Math.random() * Math.min(PUBLISH_RETRY_MAX_MS, PUBLISH_RETRY_FIRST_MS * 2 ** Math.min(attempt, 10)));
        if (attempt % 10 === 0) this.log.warn("sandbox_run_report_retry", { run: this.run.run_id, kind: e.kind, attempt, error: (err as Error).message });
        await this.clock.sleep(wait);
      }
    }
  }
}
