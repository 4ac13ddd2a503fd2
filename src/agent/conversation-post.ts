// Where a conversation key says the seat speaks, and the one way to speak there once: a
// parked run's question, a run's failure, an approval's request are all posted by the
// seat in the thread or on the work item the work came from, under an op id derived from
// their cause, so a retry (on any node) is the same write.
import type { Trigger } from "../org/trigger.ts";
import type { Logger } from "../log.ts";
import type { EstatePort } from "./tools/estate-port.ts";

export type ConversationTarget = { kind: "chat"; channel: string; root: string } | { kind: "work"; key: string };

/** Where a conversation key says to post: `chat:{channel}:{root}` or `work:{key}`. Pure. */
export function conversationTarget(conversation: string): ConversationTarget | null {
  const chat = /^chat:([^:]+):(.+)$/.exec(conversation);
  if (chat) return { kind: "chat", channel: chat[1]!, root: chat[2]! };
  const work = /^work:(.+)$/.exec(conversation);
  return work ? { kind: "work", key: work[1]! } : null;
}

/** A trigger's refs for a turn told in `conversation` that no message in it caused (a run's
 *  result, an approval's decision): its reply goes into that thread or onto that item. Pure. */
export function conversationRefs(conversation: string): Trigger["refs"] {
  const target = conversationTarget(conversation);
  return target?.kind === "chat" ? { channel: target.channel, thread_root: target.root } : target?.kind === "work" ? { work_key: target.key } : {};
}

/**
 * Posts `body` as `seat`, once (op_id), in the chat thread or on the work item `conversation`
 * names (a chat key whose root is op_id itself starts a new thread). False: there is
 * nowhere to post, or the estate refused it for good (the item or channel is gone). Throws
 * when the outcome is unknown, so the caller tries again.
 */
export async function postInConversation(
  o: { estate: EstatePort; log: Logger },
  p: { seat: string; conversation: string; body: string; op_id: string },
): Promise<boolean> {
  const target = conversationTarget(p.conversation);
  if (!target) return false;
  const out =
    target.kind === "chat"
      ? await o.estate.write("chat", { op: "chat.post", channel: target.channel, author: p.seat, body: p.body, thread_parent: target.root === p.op_id ? null : target.root, mentions: [], dm: null }, { op_id: p.op_id })
      : await o.estate.write("tracker", { op: "work.comment", key: target.key, author: p.seat, body: p.body }, { op_id: p.op_id });
  if (out.status === "applied" && !out.outcome.ok) {
    o.log.warn("conversation_post_refused", { seat: p.seat, conversation: p.conversation, op_id: p.op_id, outcome: out.outcome });
    return false;
  }
  if (out.status === "unknown") throw new Error(`the post's outcome is unknown: ${out.error}`);
  return true;
}
