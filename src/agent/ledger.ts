// The completion ledger (spec: Seat Ownership § "The completion ledger"): what finished,
// read before the next turn starts, in the fleet's coordination store (crewlet_ledger) so
// a redelivery that lands on a peer finds it. Keyed on each constituent event id, and on
// the chat messages a turn answered without being woken for them. No in-progress state,
// no expiry of its own (the bucket's 7-day age is garbage collection), and it fails open
// both ways: an unreadable ledger runs the turn, an unwritable one cannot un-ship effects.
import { createHash } from "node:crypto";
import { z } from "zod";
import type { Clock } from "../clock.ts";
import type { KvSlot } from "../coord/contract.ts";
import { RIDE_OUT_MS, rideOut } from "../coord/ride-out.ts";
import type { Logger } from "../log.ts";
import type { Trigger, TriggerType } from "../org/trigger.ts";

/**
 * The closed set of trigger types that run a turn and are ledgered (the spec's
 * inbox.Ledgered: task_assigned, external_notification — which here arrives as its chat
 * forms chat_mention and chat_direct — a2a_request and a2a_message), plus task_comment,
 * which runs a turn whose reply is a write exactly like task_assigned's, and schedule: the
 * fire claim (crewlet_fires) makes the publish once per instant, and the ledger makes the
 * turn once per delivery — a redelivered fire (a NAK after the turn acted) runs nothing
 * twice. And sandbox_run: a run's result is told once, and its redelivery (the
 * collecting node died before the ack) is skipped; so is approval_decided, a decision's
 * resume. A type outside the set contributes nothing to the work key and is never recorded.
 */
export const LEDGERED_TYPES: ReadonlySet<TriggerType> = new Set<TriggerType>([
  "task_assigned",
  "task_comment",
  "external_notification",
  "chat_mention",
  "chat_direct",
  "a2a_request",
  "a2a_message",
  "schedule",
  "sandbox_run",
  "approval_decided",
]);

export function isLedgered(t: Pick<Trigger, "type">): boolean {
  return LEDGERED_TYPES.has(t.type);
}

/**
 * A ledger key: the identity hashed into one KV token (event ids hold ':' which a KV key
 * may not). `ev.` for a trigger's event id, `chat.` for a message's identity on its chat
 * backend: two namespaces, so an event id never collides with a message id.
 */
export function eventKey(event_id: string): string {
  return `ev.${digest(event_id)}`;
}
/** A message answered by one seat: per seat, because one message can mention several, and
 * each seat's answer is its own (keyed on the message alone, one seat's answer skipped the
 * others still waiting for a turn slot). */
export function chatMessageKey(seat: string, message_id: string): string {
  return `chat.${digest(`${seat}\n${message_id}`)}`;
}
/** The key an earlier build wrote for a message, whichever seat answered: it counts only
 * for the seat its record names. */
export function legacyChatMessageKey(message_id: string): string {
  return `chat.${digest(message_id)}`;
}

/** The notice a failed turn posted for this trigger (notice.ts): one per message. */
export function noticeKey(event_id: string): string {
  return `notice.${digest(event_id)}`;
}

export interface NoticeRecord {
  seat: string;
  turn_id: string;
  node: string;
  event_id: string;
}

function digest(s: string): string {
  // 128 bits: collision-free at any ledger size a 7-day window holds.
  return createHash("sha256").update(s, "utf8").digest("hex").slice(0, 32);
}

/**
 * The work key of a turn: derived from its ledgered constituent event ids (sorted, so the
 * same set in any order is the same work), null when it has none — an unkeyed turn, which
 * the episode index never dedupes (spec: "Keying a write on the work").
 */
export function workKeyOf(triggers: readonly Pick<Trigger, "type" | "event_id">[]): string | null {
  const ids = [...new Set(triggers.filter(isLedgered).map((t) => t.event_id))].sort();
  if (ids.length === 0) return null;
  return createHash("sha256").update(ids.join("\n"), "utf8").digest("hex").slice(0, 32);
}

/** A turn's reply whose write answered "unknown": owed until a post under its op id (which
 *  lands once however often it is sent) is confirmed. */
export const owedReplySchema = z.object({
  channel: z.string(),
  thread_parent: z.string().nullable(),
  body: z.string(),
  mentions: z.array(z.string()),
  op_id: z.string(),
});
export type OwedReply = z.infer<typeof owedReplySchema>;

export const ledgerRecordSchema = z.object({
  seat: z.string(),
  turn_id: z.string(),
  node: z.string(),
  outcome: z.string(),
  at: z.number(),
  /** Why it is here: the turn's own trigger, or a waiting message its thread showed it. */
  as: z.enum(["trigger", "answered_in_thread"]),
  /** A failed turn's notice to the person: a redelivery that finds it untold tells it. */
  notice: z.string().optional(),
  /** The turn's reply, when its write was not confirmed: a redelivery that finds it posts it again. */
  reply: owedReplySchema.optional(),
});
export type LedgerRecord = z.infer<typeof ledgerRecordSchema>;

export interface LedgerHit {
  key: string;
  record: LedgerRecord | null;
}

export interface LedgerCheck {
  /** Triggers already recorded (dropped: turn_trigger_skipped). */
  skip: { trigger: Trigger; hit: LedgerHit }[];
  /** Triggers to run (ledgered and unrecorded, or outside the ledgered set). */
  run: Trigger[];
  /** Whether the ledger could be read for every key (false: failed open). */
  readable: boolean;
}

export interface TurnRecord {
  seat: string;
  turn_id: string;
  node: string;
  outcome: string;
  /** The turn's constituent triggers (only the ledgered ones are written). */
  triggers: readonly Trigger[];
  /** Chat messages the turn answered in their thread without being woken for them. */
  answered_messages: readonly string[];
  /** The notice this turn owes the person, when it failed for good. */
  notice?: string;
  /** The reply this turn owes, when its write was not confirmed. */
  reply?: OwedReply;
}

/**
 * A ledger write that fails is tried again for this long before the turn's delivery is
 * acked: the record is what stops a redelivery (an ack lost with a dying consumer leader)
 * from running the turn twice, and it fails in the same election that loses the ack (seen:
 * one message answered twice, 30 minutes apart, after a 503 here).
 */
export const LEDGER_WRITE_RETRY_MS_MAX = RIDE_OUT_MS;

export class CompletionLedger {
  constructor(
    private readonly slot: KvSlot,
    private readonly clock: Clock,
    private readonly log: Logger,
    /** LEDGER_WRITE_RETRY_MS_MAX; tests of a store that stays down pass less. */
    private readonly writeRetry_ms = LEDGER_WRITE_RETRY_MS_MAX,
  ) {}

  /** Reads every ledgered trigger's keys. Fails open: a key it cannot read is "not done". */
  async check(triggers: readonly Trigger[]): Promise<LedgerCheck> {
    const out: LedgerCheck = { skip: [], run: [], readable: true };
    for (const t of triggers) {
      if (!isLedgered(t)) {
        out.run.push(t);
        continue;
      }
      const keys = [{ key: eventKey(t.event_id), anySeat: true }];
      if (t.refs.message_id !== undefined) {
        keys.push({ key: chatMessageKey(t.seat, t.refs.message_id), anySeat: true }, { key: legacyChatMessageKey(t.refs.message_id), anySeat: false });
      }
      let hit: LedgerHit | null = null;
      for (const { key, anySeat } of keys) {
        try {
          const entry = await this.slot.get(key);
          if (entry && entry.operation === "put") {
            const parsed = ledgerRecordSchema.safeParse(safeJson(entry.value));
            if (!anySeat && (!parsed.success || parsed.data.seat !== t.seat)) continue;
            hit = { key, record: parsed.success ? parsed.data : null };
            break;
          }
        } catch (err) {
          out.readable = false;
          this.log.warn("ledger_read_failed", { seat: t.seat, event_id: t.event_id, key, error: (err as Error).message });
        }
      }
      if (hit) out.skip.push({ trigger: t, hit });
      else out.run.push(t);
    }
    return out;
  }

  /** Whether a failure notice was posted for this trigger. Fails open (false): a second
   * notice is a smaller harm than none. */
  async noticed(event_id: string): Promise<boolean> {
    const key = noticeKey(event_id);
    try {
      const entry = await this.slot.get(key);
      return entry !== null && entry.operation === "put";
    } catch (err) {
      this.log.warn("ledger_read_failed", { event_id, key, error: (err as Error).message });
      return false;
    }
  }

  /** Records a posted notice. Fails open: logged, never thrown. */
  async recordNotice(r: NoticeRecord): Promise<void> {
    const key = noticeKey(r.event_id);
    try {
      await this.slot.put(key, new TextEncoder().encode(JSON.stringify({ ...r, at: this.clock.now() })));
    } catch (err) {
      this.log.warn("ledger_write_failed", { seat: r.seat, turn_id: r.turn_id, key, error: (err as Error).message });
    }
  }

  /**
   * Records a turn whose effects shipped. Fails open: an error is logged, never thrown —
   * the effects are out, and a missed record costs at most one re-run.
   */
  async record(r: TurnRecord): Promise<{ written: number; failed: number }> {
    const at = this.clock.now();
    const base = { seat: r.seat, turn_id: r.turn_id, node: r.node, outcome: r.outcome, at };
    const owed = { ...(r.notice !== undefined ? { notice: r.notice } : {}), ...(r.reply !== undefined ? { reply: r.reply } : {}) };
    const writes: { key: string; value: LedgerRecord }[] = [];
    for (const t of r.triggers) {
      if (!isLedgered(t)) continue;
      writes.push({ key: eventKey(t.event_id), value: { ...base, as: "trigger", ...owed } });
      if (t.refs.message_id !== undefined) writes.push({ key: chatMessageKey(r.seat, t.refs.message_id), value: { ...base, as: "trigger", ...owed } });
    }
    for (const m of r.answered_messages) writes.push({ key: chatMessageKey(r.seat, m), value: { ...base, as: "answered_in_thread" } });
    let written = 0;
    let failed = 0;
    // One budget for the whole record: its writes fail together in one election.
    const until = this.clock.now() + this.writeRetry_ms;
    for (const w of writes) {
      try {
        // put, not create: done does not lapse, and a second record of done is still done.
        const { attempts } = await rideOut(this.clock, until, () => this.slot.put(w.key, new TextEncoder().encode(JSON.stringify(w.value))));
        written += 1;
        if (attempts > 1) this.log.info("ledger_write_retried", { seat: r.seat, turn_id: r.turn_id, key: w.key, attempts });
      } catch (err) {
        failed += 1;
        this.log.warn("ledger_write_failed", { seat: r.seat, turn_id: r.turn_id, key: w.key, error: (err as Error).message });
      }
    }
    return { written, failed };
  }
}

function safeJson(data: Uint8Array): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(data));
  } catch {
    return null;
  }
}
