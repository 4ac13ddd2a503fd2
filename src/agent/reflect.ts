// The holder's reflection dispatcher: the acquire hook attaches the seat's reflection
// subject after hydration (a pass reads what the seat already knows), the release hook
// detaches it before the last flush (nothing new writes the seat's memory here after it).
// A wake published while the seat is between holders waits on the subject for the next.
// One pass is one model call; what it learned becomes diary notes (source "reflection")
// and its note on the counterparty, flushed when the pass ends.
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import { applyLearning, LearningWakeInvalid } from "../memory/learning-apply.ts";
import { decodeLearningDue, wakeType } from "../memory/learning-due.ts";
import { MemoryRowInvalid } from "../memory/records.ts";
import { decodeReflectionDue, parseReflection, reflectionPrompt } from "../memory/reflection.ts";
import type { MemoryStore } from "../memory/store.ts";
import type { MemorySync } from "../memory/sync.ts";
import type { Org, Seat } from "../org/org.ts";
import { ack, nak, type Attachment, type Delivery, type Outcome, type Queue } from "../queue/contract.ts";
import { mailbox } from "../queue/topics.ts";
import { FAILED_DELIVERIES_MAX, redeliveryDelayMs } from "./classify.ts";
import type { EventSink } from "./events.ts";
import { systemPrompt } from "./prompt.ts";
import { ProviderError, type Provider, type Usage } from "./providers/contract.ts";
import type { FailureClass } from "./providers/failure.ts";
import type { SpendGate } from "./turn.ts";

/** Diary notes a reflection pass is shown, so it does not write them again. */
export const REFLECTION_DIARY_NOTES = 10;
/** Trigger type the scripted provider's rules match a reflection pass by. */
export const REFLECTION_TRIGGER = "reflection";

/**
 * What a failed reflection call does next. A reflection is the seat's own summary of a turn
 * that already answered, so nobody waits on it: a failure asking again cannot heal (a wrong
 * key, a prompt over the context) drops the pass, and a passing failure waits the turns'
 * growing redelivery delay, given up after as many deliveries as a turn gets — never
 * straight back, which made a 401 cost 25 model calls in a second (and a dead letter).
 * `failure` null: not the provider's (a defect); treated as passing.
 */
export function afterFailedReflection(failure: FailureClass | null, delivery_count: number): Outcome {
  if (failure === "permanent" || failure === "context_too_long") return ack();
  if (failure === "cancelled") return nak(); // a drain stopped it: the next holder runs it
  if (delivery_count >= FAILED_DELIVERIES_MAX) return ack();
  return nak(redeliveryDelayMs(delivery_count));
}

export interface ReflectOptions {
  queue: Queue;
  store: MemoryStore;
  sync: MemorySync;
  org: () => Org;
  providerFor: (seat: Seat) => Provider | undefined;
  clock: Clock;
  log: Logger;
  /** Spend control: a reflection is a model call like a turn's round — checked and charged. */
  spend?: SpendGate | null;
  /** Where a skill's lifecycle move is told (CREWLET_EVENTS on a node); absent: the log only. */
  events?: EventSink;
}

export class ReflectDispatcher {
  private readonly attachments = new Map<string, Attachment>();

  constructor(private readonly o: ReflectOptions) {}

  async attach(handle: string): Promise<void> {
    if (this.attachments.has(handle)) return;
    const mb = mailbox(handle, "reflect");
    const att = await this.o.queue.attach(mb.subject, mb.group, (d) => this.handle(handle, d));
    this.attachments.set(handle, att);
  }

  /** Lets the subject go; a pass still running is not waited for (the spec's bounded loss). */
  async detach(handle: string): Promise<void> {
    const att = this.attachments.get(handle);
    this.attachments.delete(handle);
    await att?.detach();
  }

  async detachAll(): Promise<void> {
    await Promise.all([...this.attachments.keys()].map((h) => this.detach(h)));
  }

  private async handle(handle: string, d: Delivery): Promise<Outcome> {
    if (wakeType(d.data) === "learning_due") return this.learn(handle, d);
    const decoded = decodeReflectionDue(d.data);
    if (!decoded.ok) {
      this.o.log.error("memory_reflection_wake_invalid", { seat: handle, seq: d.streamSeq, error: decoded.error });
      return ack();
    }
    const due = decoded.due;
    const org = this.o.org();
    const seat = org.agentSeat(handle);
    const provider = seat ? this.o.providerFor(seat) : undefined;
    if (!seat || !provider || due.seat !== handle) {
      this.o.log.warn("memory_reflection_skipped", { seat: handle, turn_id: due.turn_id, reason: !seat ? "not an agent seat" : !provider ? "no model provider" : "wake for another seat" });
      return ack();
    }
    // Over a hard cap the pass is skipped (the turn it reflects on already ran); spend that
    // cannot be read waits (unknown is not under the cap): the wake comes back later.
    const refused = (await this.o.spend?.check(handle, provider.name)) ?? null;
    if (typeof refused === "string") {
      this.o.log.info("memory_reflection_skipped", { seat: handle, turn_id: due.turn_id, reason: "budget_exhausted" });
      return ack();
    }
    if (refused !== null) {
      this.o.log.warn("memory_reflection_failed", { seat: handle, turn_id: due.turn_id, error: refused.unknown, retry: true, delivery_count: d.deliveryCount });
      return nak(redeliveryDelayMs(d.deliveryCount));
    }
    const store = this.o.store;
    const cp = due.counterparty ? store.counterparty(handle, due.counterparty) : null;
    const diary = store.recentDiary(handle, REFLECTION_DIARY_NOTES);
    let text: string;
    let usage: Usage;
    try {
      const answer = await provider.complete({
        system: systemPrompt(org, seat),
        messages: [{ role: "user", content: reflectionPrompt(due, diary, cp) }],
        tools: [],
        facts: {
          seat: handle,
          trigger_type: REFLECTION_TRIGGER,
          vars: {
            text: due.asked,
            seat: handle,
            author: due.counterparty ?? "",
            work_key: due.work_key ?? "",
            summary: due.summary,
            outcome: due.outcome,
            conversation: due.conversation,
            trigger: REFLECTION_TRIGGER,
            diary: diary[0]?.content ?? "",
            company: org.company_name,
          },
        },
      });
      text = answer.text;
      usage = answer.usage;
    } catch (err) {
      const next = afterFailedReflection(err instanceof ProviderError ? err.failure : null, d.deliveryCount);
      this.o.log.warn("memory_reflection_failed", { seat: handle, turn_id: due.turn_id, error: err as Error, retry: next.kind === "nak", delivery_count: d.deliveryCount });
      return next;
    }
    await this.o.spend?.charge(handle, provider.name, usage);
    const r = parseReflection(text);
    let notes = 0;
    try {
      for (const content of r.notes) if (store.writeDiary({ handle, content, source: "reflection", turn_id: due.turn_id, work_key: due.work_key }).inserted) notes += 1;
      if (r.counterparty_note !== null && due.counterparty) store.setCounterpartyNote(handle, due.counterparty, r.counterparty_note);
    } catch (err) {
      if (!(err instanceof MemoryRowInvalid)) throw err;
      this.o.log.warn("memory_reflection_row_invalid", { seat: handle, turn_id: due.turn_id, error: err.message });
    }
    await this.o.sync.flushQuietly(handle, "reflection");
    this.o.log.info("memory_reflected", { seat: handle, turn_id: due.turn_id, notes, counterparty_note: r.counterparty_note !== null });
    return ack();
  }

  /**
   * The learning duty's decisions for this seat, written here because this node holds it.
   * No model call: the duty decided; this applies, flushes, and tells each state move. A
   * wake no schema accepts, or one for another seat, is acked and named: redelivering it
   * cannot make it valid, and the duty's next tick decides again from the changelog.
   */
  private async learn(handle: string, d: Delivery): Promise<Outcome> {
    const decoded = decodeLearningDue(d.data);
    if (!decoded.ok || decoded.due.seat !== handle) {
      this.o.log.error("memory_learning_wake_invalid", { seat: handle, seq: d.streamSeq, error: decoded.ok ? `wake for ${decoded.due.seat}` : decoded.error });
      return ack();
    }
    let applied;
    try {
      applied = applyLearning(this.o.store, decoded.due, this.o.clock.now());
    } catch (err) {
      if (!(err instanceof LearningWakeInvalid) && !(err instanceof MemoryRowInvalid)) throw err;
      this.o.log.error("memory_learning_wake_invalid", { seat: handle, seq: d.streamSeq, error: err.message });
      return ack();
    }
    // One lifecycle event per move (spec: "the curator publishes a lifecycle event per transition").
    for (const m of applied.moves) {
      const fields = { seat: handle, skill: m.skill, name: m.name, from: m.from, to: m.to };
      if (this.o.events) this.o.events.emit("skill_state_changed", fields);
      else this.o.log.info("skill_state_changed", fields);
    }
    await this.o.sync.flushQuietly(handle, "learning");
    this.o.log.info("memory_learning_applied", { seat: handle, versions: applied.versions, versions_dropped: applied.versions_dropped, skills: applied.skills, episodes_compacted: applied.compacted });
    return ack();
  }
}
