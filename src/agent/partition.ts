// Partitioning a drained inbox by conversation (chat thread, work item, a2a exchange):
// one turn per partition, carrying its constituent event ids. Pure.
import type { Trigger } from "../org/trigger.ts";

export interface Partition<T> {
  conversation: string;
  /** Distinct triggers (a redelivered copy in one batch counts once), oldest first. */
  triggers: Trigger[];
  /** Every item of the batch this partition settles, duplicates included. */
  items: T[];
}

/** Groups in order of each conversation's first appearance; within one, batch order. */
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
  return out;
}
