// Partitioning a drained inbox by conversation (chat thread, work item, a2a exchange):
// one turn per partition, carrying its constituent event ids. Pure.
import type { Trigger } from "../org/trigger.ts";

export interface Partition<T> {
  conversation: string;
  /** Distinct triggers (a redelivered copy in one batch counts once), oldest written first. */
  triggers: Trigger[];
  /** Every item of the batch this partition settles, duplicates included. */
  items: T[];
}

/**
 * A conversation's triggers in the order their records were written: by state-log position
 * when every one has it (a chat thread is one log, a work item another), else batch order.
 * Batch order is not the order posted: the wake feed hands each record to any data node,
 * and one handed back (not applied there yet) reaches the mailbox after later ones — seen
 * as a DM's first message arriving 6 s after its two replies.
 */
function inWrittenOrder(triggers: Trigger[]): Trigger[] {
  if (!triggers.every((t) => typeof t.refs.position === "number")) return triggers;
  return [...triggers].sort((a, b) => a.refs.position! - b.refs.position!);
}

/** Groups in order of each conversation's first appearance; within one, the order written. */
export function partitionByConversation<T>(items: readonly T[], triggerOf: (item: T) => Trigger): Partition<T>[] {
  const out: Partition<T>[] = [];
  const index = new Map<string, Partition<T>>();
  for (const item of items) {
    const t = triggerOf(item);
    let p = index.get(t.conversation);
    if (!p) {
      p = { conversation: t.conversation, triggers: [], items: [] };
      index.set(t.conversation, p);
      out.push(p);
    }
    p.items.push(item);
    if (!p.triggers.some((x) => x.event_id === t.event_id)) p.triggers.push(t);
  }
  for (const p of out) p.triggers = inWrittenOrder(p.triggers);
  return out;
}
