// Partitioning a drained batch by conversation, by table: a conversation's triggers run in
// the order their records were written (state-log position), whatever order the wake feed
// delivered them in; without a position on every one, in batch order.
import { describe, expect, test } from "bun:test";
import { partitionByConversation } from "../../src/agent/partition.ts";
import { causeFloor, type Trigger } from "../../src/org/trigger.ts";
import { mentionTrigger } from "./support.ts";

/** A message `id` in the thread `conversation`, written at `position` (none: no position). */
function msg(id: string, conversation: string, position?: number): Trigger {
  const t = mentionTrigger("cto", "general", `${id}aaaaaaaa`, id);
  return { ...t, conversation, refs: { ...t.refs, ...(position === undefined ? {} : { position }) } };
}

describe("partitionByConversation: each conversation oldest written first", () => {
  const d1 = msg("d1", "dm", 7);
  const d2 = msg("d2", "dm", 8);
  const d3 = msg("d3", "dm", 9);
  const t1 = msg("t1", "thread", 6);
  const x = msg("x", "dm");
  test.each([
    // batch (delivery order), want: [conversation, triggers] in first-appearance order
    ["in order", [d1, d2, d3], [["dm", ["d1", "d2", "d3"]]]],
    // The first message handed back by one data node, published after its replies by another.
    ["first written, delivered last", [d2, d3, d1], [["dm", ["d1", "d2", "d3"]]]],
    ["two conversations interleaved", [d3, t1, d1, d2], [["dm", ["d1", "d2", "d3"]], ["thread", ["t1"]]]],
    ["a redelivered copy counts once", [d2, d1, d2], [["dm", ["d1", "d2"]]]],
    // Not every trigger has a position (an a2a exchange, an external event): batch order.
    ["one without a position", [d2, x, d1], [["dm", ["d2", "x", "d1"]]]],
  ] as const)("%s", (_name, batch, want) => {
    const parts = partitionByConversation([...batch], (t) => t);
    expect(parts.map((p) => [p.conversation, p.triggers.map((t) => t.text)])).toEqual(want.map(([c, ts]) => [c, [...ts]]));
    expect(parts.reduce((n, p) => n + p.items.length, 0)).toBe(batch.length);
  });
});

describe("causeFloor: the positions a reader of a batch's causes must see", () => {
  const work = (key: string, position?: number): Trigger => ({ ...msg("w", `work:${key}`), refs: { work_key: key, ...(position === undefined ? {} : { position }) } });
  test.each([
    ["nothing", [], {}],
    ["one message", [msg("a", "dm", 7)], { chat: 7 }],
    ["the highest of a thread's messages, in any order", [msg("b", "dm", 9), msg("a", "dm", 7)], { chat: 9 }],
    ["a work item's comment is on the tracker's log", [work("ENG-1", 4)], { tracker: 4 }],
    ["both domains", [work("ENG-1", 4), msg("a", "dm", 7)], { chat: 7, tracker: 4 }],
    ["no position: no floor", [msg("x", "dm"), work("ENG-2")], {}],
  ] as const)("%s", (_name, batch, want) => {
    expect(causeFloor(...batch)).toEqual(want);
  });
});
