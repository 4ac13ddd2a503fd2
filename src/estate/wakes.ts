// Which seats an applied record wakes, and with what. Pure: the record, its outcome and a
// few facts read from the copy after it was applied in; triggers out. The wake feed
// (wake.ts) does the reading and the publishing.
//
// A seat is woken by a chat message that mentions it or is posted in a DM it is part of, by
// a work item assigned to it, and by somebody else's comment on a work item it is assigned.
// Nobody is woken by their own act, and a person (a human seat) is never woken.
import { createHash } from "node:crypto";
import type { Trigger } from "../org/trigger.ts";
import type { Outcome } from "./apply.ts";
import type { StateRecord } from "./records.ts";

/** The part of a cause quoted in a trigger; the agent reads the rest through refs. */
const MAX_QUOTE_BYTES = 8 * 1024;

export interface WakeFacts {
  /** agent | human for a seat in the company, null for anybody else. */
  seatKind(handle: string): "agent" | "human" | null;
  /** The record's outcome in this copy's ledger. */
  outcome: Outcome;
  /** A channel's kind and a DM's participants (neither changes once the channel exists). */
  channel(id: string): { kind: string; members: string[] } | null;
}

function quote(s: string): string {
  if (Buffer.byteLength(s, "utf8") <= MAX_QUOTE_BYTES) return s;
  const cut = Buffer.from(s, "utf8").subarray(0, MAX_QUOTE_BYTES).toString("utf8").replace(/\uFFFD+$/, "");
  return cut + "…";
}

/**
 * Posts the engine makes by itself: a turn's automatic reply, a failure notice, a budget
 * alert. Their op ids say so (derived from what they answer, so a retry is the same write),
 * and they wake no agent by DM membership: two agents in a DM would otherwise answer each
 * other's automatic replies for ever (seen: an over-cap seat's notice to its manager, the
 * manager's reply waking the seat, refused again, notified again — 7 turns in 20 s). Their
 * mentions of agents are dropped at the source (turn.ts) for the same reason. A person is
 * never woken anyway; an agent that means to reach a colleague posts with a tool.
 */
export type AutomaticPost = "reply" | "notice" | "alert";
const AUTOMATIC_PREFIXES: readonly string[] = ["reply-", "notice-", "alert-"];

/** The op id of an automatic post, derived from `seed` (what it answers). */
export function automaticOpId(kind: AutomaticPost, seed: string): string {
  return `${kind}-${createHash("sha256").update(seed).digest("hex").slice(0, 40)}`;
}

export function isAutomaticPost(op_id: string): boolean {
  return AUTOMATIC_PREFIXES.some((p) => op_id.startsWith(p));
}

/** The trigger's id, inbox message id and claim key: one per (record, seat). */
export function wakeEventId(domain: string, op_id: string, seat: string): string {
  return `wake.${domain}.${op_id}.${seat}`;
}

export function deriveTriggers(record: StateRecord, position: number, facts: WakeFacts): Trigger[] {
  if (!facts.outcome.ok) return [];
  const out: Trigger[] = [];
  const wake = (seat: string, t: Omit<Trigger, "seat" | "event_id" | "created_at">) => {
    if (facts.seatKind(seat) !== "agent") return;
    if (out.some((x) => x.seat === seat)) return;
    out.push({ ...t, seat, event_id: wakeEventId(record.domain, record.op_id, seat), created_at: record.at });
  };
  const b = record.body;
  switch (b.op) {
    case "chat.post": {
      const channel = facts.channel(b.channel);
      if (!channel) return [];
      const conversation = `chat:${b.channel}:${b.thread_parent ?? record.op_id}`;
      const refs = { channel: b.channel, message_id: record.op_id, position };
      const direct = channel.kind === "dm" && !isAutomaticPost(record.op_id) ? channel.members : [];
      for (const seat of direct) {
        if (seat === b.author) continue;
        wake(seat, { type: "chat_direct", conversation, from: b.author, text: `${b.author} (direct): ${quote(b.body)}`, refs });
      }
      for (const seat of b.mentions) {
        if (seat === b.author) continue;
        wake(seat, { type: "chat_mention", conversation, from: b.author, text: `${b.author} in #${b.channel}: ${quote(b.body)}`, refs });
      }
      return out;
    }
    case "work.create": {
      const key = facts.outcome.key;
      if (b.assignee === null || b.assignee === b.reporter || typeof key !== "string") return [];
      wake(b.assignee, {
        type: "task_assigned",
        conversation: `work:${key}`,
        from: b.reporter,
        text: `${key} assigned to you by ${b.reporter}: ${b.title}`,
        refs: { work_key: key, position },
      });
      return out;
    }
    case "work.update": {
      const changed = facts.outcome.changed;
      const assignee = b.patch.assignee;
      if (!Array.isArray(changed) || !changed.includes("assignee") || !assignee || assignee === b.actor) return [];
      const title = typeof facts.outcome.title === "string" ? facts.outcome.title : "";
      wake(assignee, {
        type: "task_assigned",
        conversation: `work:${b.key}`,
        from: b.actor,
        text: `${b.key} assigned to you by ${b.actor}: ${title}`,
        refs: { work_key: b.key, position },
      });
      return out;
    }
    case "work.comment": {
      const assignee = facts.outcome.assignee;
      const title = typeof facts.outcome.title === "string" ? facts.outcome.title : "";
      if (typeof assignee !== "string" || assignee === b.author) return [];
      wake(assignee, {
        type: "task_comment",
        conversation: `work:${b.key}`,
        from: b.author,
        text: `${b.author} commented on ${b.key} (${title}): ${quote(b.body)}`,
        refs: { work_key: b.key, comment_id: record.op_id, position },
      });
      return out;
    }
    default:
      // Seeds, edits, deletes and pages wake nobody: an edit re-waking every mentioned seat
      // would turn a typo fix into a second round of work.
      return [];
  }
}
