// Where decisions are taken (a person's, or an expiry) and told to the seat as an
// `approval_decided` trigger on its inbox, so whichever node holds it resumes it; the first
// decision wins, and a retelling is harmless (message id, completion ledger).
import type { Clock } from "../clock.ts";
import { conversationRefs, postInConversation } from "../agent/conversation-post.ts";
import type { EstatePort } from "../agent/tools/estate-port.ts";
import type { Logger } from "../log.ts";
import { encodeTrigger, MAX_TRIGGER_TEXT_BYTES, type Trigger } from "../org/trigger.ts";
import { truncateToBytes } from "../estate/records.ts";
import { mailbox } from "../queue/topics.ts";
import type { ApprovalAudit } from "./gate.ts";
import { DECIDED_TRIGGER } from "./gate.ts";
import type { ApprovalRecord, ApprovalStore, Decision } from "./records.ts";
import { closedNotice, closedResult, expiredNotice } from "./words.ts";
import type { CompletionLedger } from "../agent/ledger.ts";

/** Runs one unit of a sweep; the caller may stamp a watchdog and bound it. */
export type SweepStep = <T>(what: string, unit: () => Promise<T>) => Promise<T>;

/** A decision written this long ago and still not told is told again by the sweep: longer
 *  than the deciding node's own retries (TELL_RETRY_MS). */
export const RETELL_AFTER_MS = 30_000;
/** The deciding node's retries of a tell the broker refused, doubling from the first: a
 *  member's election is over in 4–6.5 s (measured), so 1+2+4+8 s outlasts one, and the
 *  person's request is answered at once rather than held through it. */
export const TELL_RETRY_MS = [1_000, 2_000, 4_000, 8_000] as const;
/** A decision told but not settled this long is looked at again: past the broker's 2-minute
 *  duplicate window, and rare enough not to resend to a seat merely between holders. Its
 *  trigger lost (a dead letter, an older build's) → told again; its turn recorded over
 *  (the ledger would skip a copy) → closed, the person told. */
export const RETAKE_AFTER_MS = 10 * 60_000;
/** A settled request is kept this long for GET /approvals and the Today view, then deleted. */
export const APPROVAL_KEEP_MS = 7 * 24 * 3_600_000;
/** Who decides a request nobody decided. */
export const EXPIRY_ACTOR = "crewlet";

export interface DeskPublisher {
  publish(subject: string, data: Uint8Array, opts?: { msgId?: string }): Promise<unknown>;
}

export interface ApprovalDeskOptions {
  store: ApprovalStore;
  queue: DeskPublisher;
  estate: EstatePort;
  clock: Clock;
  log: Logger;
  audit?: (e: ApprovalAudit) => void;
  /** Whether a decision's turn is over (the sweep's close); without it, only retold. */
  ledger?: Pick<CompletionLedger, "check">;
}

/** The trigger that resumes the seat with a decision: one per request. Pure. */
export function decidedTrigger(r: ApprovalRecord, now: number): Trigger {
  const d = r.decision!;
  return {
    type: DECIDED_TRIGGER,
    event_id: `approval.${r.id}.decided`,
    seat: r.seat,
    conversation: r.conversation,
    from: d.by,
    text: truncateToBytes(`Request ${r.id} to call ${r.tool}: ${d.verdict} by ${d.by}.`, MAX_TRIGGER_TEXT_BYTES),
    refs: conversationRefs(r.conversation),
    created_at: now,
  };
}

/** What one sweep did, counted per request. */
export interface SweepDone {
  expired: number;
  retold: number;
  /** Decisions whose turn was recorded over without settling them (RETAKE_AFTER_MS). */
  closed: number;
  forgotten: number;
}

export class ApprovalDesk {
  constructor(private readonly o: ApprovalDeskOptions) {}

  /** A person's decision. `decided` false: someone (or the expiry) decided first. */
  async decide(r: ApprovalRecord, d: Decision): Promise<{ record: ApprovalRecord; decided: boolean }> {
    const out = await this.o.store.decide(r.seat, r.id, d);
    if (out.decided) this.o.audit?.({ action: d.verdict === "approved" ? "approval.approve" : d.verdict === "rejected" ? "approval.reject" : "approval.expire", id: r.id, detail: `${d.by}: ${d.reason}` });
    if (out.record.told || out.record.decision === null) return out;
    try {
      return { record: await this.tell(out.record), decided: out.decided };
    } catch (err) {
      // The decision stands (it is written, and the first one wins): this node tries again
      // in the background, and the approvals duty's sweep retells whatever is still untold.
      // A broker mid-election is not the person's problem.
      this.o.log.warn("approval_tell_deferred", { seat: r.seat, id: r.id, error: (err as Error).message });
      void this.retellSoon(out.record);
      return out;
    }
  }

  private async retellSoon(r: ApprovalRecord): Promise<void> {
    for (const wait of TELL_RETRY_MS) {
      await this.o.clock.sleep(wait);
      try {
        const cur = await this.o.store.get(r.seat, r.id);
        if (!cur || cur.told) return;
        await this.tell(cur);
        return;
      } catch (err) {
        this.o.log.debug("approval_tell_retry", { seat: r.seat, id: r.id, after_ms: wait, error: (err as Error).message });
      }
    }
  }

  /** Publishes the decision to the seat's inbox, then marks it told. */
  async tell(r: ApprovalRecord): Promise<ApprovalRecord> {
    const t = decidedTrigger(r, this.o.clock.now());
    await this.o.queue.publish(mailbox(r.seat, "inbox").subject, encodeTrigger(t), { msgId: t.event_id });
    this.o.log.info("approval_decision_told", { seat: r.seat, id: r.id, verdict: r.decision?.verdict ?? null });
    return this.o.store.markTold(r.seat, r.id);
  }

  /**
   * One sweep (the approvals duty): expires requests past their time — the person is told
   * in the thread, and the seat by its trigger — retells decisions not yet told, and
   * forgets settled requests older than APPROVAL_KEEP_MS. Returns what it did. `step` runs
   * each unit (the listing, then one request's work), where the duty stamps its watchdog.
   */
  async sweep(step: SweepStep = (_what, unit) => unit()): Promise<SweepDone> {
    const now = this.o.clock.now();
    const { approvals, invalid } = await step("approvals listing", () => this.o.store.list());
    for (const bad of invalid) this.o.log.error("approval_record_invalid", { key: bad.key, error: bad.error });
    const done: SweepDone = { expired: 0, retold: 0, closed: 0, forgotten: 0 };
    for (const r of approvals) {
      const outcome = await step(`approval ${r.id}`, () => this.sweepOne(r, now));
      if (outcome) done[outcome]++;
    }
    return done;
  }

  private async sweepOne(r: ApprovalRecord, now: number): Promise<keyof SweepDone | null> {
    if (r.decision === null && now >= r.expires_at) {
      const out = await this.decide(r, { verdict: "expired", by: EXPIRY_ACTOR, reason: "no decision before it expired" });
      if (!out.decided) return null;
      await this.tellExpired(out.record);
      return "expired";
    }
    if (r.decision !== null && !r.told && now - r.decision.at >= RETELL_AFTER_MS) {
      await this.tell(r);
      return "retold";
    }
    if ((r.state === "decided" || r.state === "running") && r.told && now - r.updated_at >= RETAKE_AFTER_MS) {
      const outcome = await this.turnOutcome(r, now);
      if (outcome !== null) return (await this.close(r, outcome)) ? "closed" : null;
      await this.tell(r);
      await this.o.store.touch(r.seat, r.id);
      return "retold";
    }
    if (r.state === "done" && now - r.updated_at >= APPROVAL_KEEP_MS && (await this.o.store.forget(r.seat, r.id))) return "forgotten";
    return null;
  }

  /** The recorded outcome of the turn that ran this decision's trigger, or null: none is
   *  recorded (or the ledger cannot say, when telling again is the harmless answer). */
  private async turnOutcome(r: ApprovalRecord, now: number): Promise<string | null> {
    if (!this.o.ledger) return null;
    const { skip } = await this.o.ledger.check([decidedTrigger(r, now)]);
    return skip.length === 0 ? null : (skip[0]!.hit.record?.outcome ?? "recorded");
  }

  /** Settles a request its recorded turn left unsettled, and tells the person what it means. */
  private async close(r: ApprovalRecord, outcome: string): Promise<boolean> {
    const { record, closed } = await this.o.store.close(r.seat, r.id, (cur) => closedResult(cur, outcome));
    if (!closed) return false;
    this.o.log.warn("approval_closed", { seat: r.seat, id: r.id, was: r.state, ran: record.result?.ran ?? null, turn_outcome: outcome });
    if (record.result === null) return true;
    try {
      await postInConversation(this.o, { seat: r.seat, conversation: r.conversation, body: closedNotice(record, record.result), op_id: `approval-${r.id}-closed` });
    } catch (err) {
      this.o.log.warn("approval_close_not_posted", { seat: r.seat, id: r.id, error: (err as Error).message });
    }
    return true;
  }

  private async tellExpired(r: ApprovalRecord): Promise<void> {
    try {
      await postInConversation(this.o, { seat: r.seat, conversation: r.conversation, body: expiredNotice(r), op_id: `approval-${r.id}-expired` });
    } catch (err) {
      this.o.log.warn("approval_expiry_not_posted", { seat: r.seat, id: r.id, error: (err as Error).message });
    }
  }
}
