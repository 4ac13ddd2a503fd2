// The seat host's claims and releases are republished as events with the node's id; other
// log lines are not. Failovers are told from those events (FailoverWatch).
import { expect, test } from "bun:test";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { observedLogger } from "../../src/metrics/observed-logger.ts";
import { silentLogger } from "../../src/log.ts";
import { FAILOVER_GRACE_MS, FAILOVER_SEATS_MAX, FailoverWatch, seatEventTap, type Failover } from "../../src/node/seat-events.ts";

test("claims, releases, orphan releases and stops reaching a turn become events naming the node; nothing else does (pauses are mirrored by every node)", () => {
  const sink = new MemoryEventSink();
  const log = observedLogger(silentLogger, seatEventTap(sink, "node-b")).child({ component: "seat" });
  log.info("seat_claimed", { seat: "cto", epoch: 7 });
  log.info("seat_detached", { seat: "pm", epoch: 3, reason: "drain", mode: "voluntary" });
  log.info("seat_orphan_released", { seat: "ceo", epoch: 2 });
  log.info("seat_failover", { seat: "cto", from: "node-a", epoch: 8 });
  log.info("turn_stop_requested", { seat: "cto", by: "token:ops", turns: ["t1"] });
  log.info("seat_paused", { seat: "cto", by: "token:ops" });
  log.info("seat_sweep", { held: 4 });
  log.warn("seat_renew_unknown", { seat: "cto", epoch: 7 });
  expect(sink.events).toEqual([
    { name: "seat_claimed", fields: { seat: "cto", epoch: 7, node: "node-b" } },
    { name: "seat_detached", fields: { seat: "pm", epoch: 3, node: "node-b", reason: "drain", mode: "voluntary" } },
    { name: "seat_orphan_released", fields: { seat: "ceo", epoch: 2, node: "node-b" } },
    { name: "seat_failover", fields: { seat: "cto", epoch: 8, from: "node-a", node: "node-b" } },
    { name: "turn_stop_requested", fields: { seat: "cto", node: "node-b", by: "token:ops", turns: ["t1"] } },
  ]);
});

/** Feeds the watch at a time and answers what it judged once every grace has passed. */
function judge(w: FailoverWatch, feed: (see: (event: string, fields: Record<string, unknown>) => void) => void): Failover[] {
  let now = 1_000;
  feed((event, fields) => w.see(event, fields, (now += 10)));
  return w.due(now + FAILOVER_GRACE_MS);
}

test("a failover is a claim by another node while the last claimant never let the seat go (a table, in arrival order)", () => {
  const w = new FailoverWatch();
  let epoch = 0;
  const claimed = (see: (e: string, f: Record<string, unknown>) => void, seat: string, node: string) => see("seat_claimed", { seat, node, epoch: ++epoch });
  // A first claim seen: nobody known before it.
  expect(judge(w, (see) => claimed(see, "cto", "a"))).toEqual([]);
  // a dies without a word; b claims: a failover from a.
  expect(judge(w, (see) => claimed(see, "cto", "b"))).toEqual([{ seat: "cto", node: "b", from: "a", epoch: 2 }]);
  // b lets it go (a drain), c claims: a handover, not a failover.
  expect(judge(w, (see) => (see("seat_detached", { seat: "cto", node: "b", epoch: 2, reason: "drain", mode: "voluntary" }), claimed(see, "cto", "c")))).toEqual([]);
  // A release by some other node says nothing about c's tenure.
  expect(judge(w, (see) => (see("seat_detached", { seat: "cto", node: "b", epoch: 2, reason: "drain", mode: "voluntary" }), claimed(see, "cto", "d")))).toEqual([{ seat: "cto", node: "d", from: "c", epoch: 4 }]);
  // A fenced detach is a lease lost, not given up: still a failover.
  expect(judge(w, (see) => (see("seat_detached", { seat: "cto", node: "d", epoch: 4, reason: "lease_lost", mode: "fenced" }), claimed(see, "cto", "e")))).toEqual([{ seat: "cto", node: "e", from: "d", epoch: 5 }]);
  // An orphan's release counts as letting go; a re-claim by the same node is no failover.
  expect(judge(w, (see) => (claimed(see, "cto", "d"), see("seat_orphan_released", { seat: "cto", node: "d", epoch: 6 }), claimed(see, "cto", "a"), claimed(see, "cto", "a")))).toEqual([{ seat: "cto", node: "d", from: "e", epoch: 6 }]);
  // Seats are judged apart; malformed events change nothing.
  expect(judge(w, (see) => (claimed(see, "pm", "b"), see("seat_claimed", { seat: "cto", node: 7 }), see("seat_claimed", { node: "b" })))).toEqual([]);
  expect(judge(w, (see) => claimed(see, "cto", "b"))).toEqual([{ seat: "cto", node: "b", from: "a", epoch: 10 }]);
});

test("a release heard after the claim that replaced it, within the grace, makes that claim a handover", () => {
  const w = new FailoverWatch();
  w.see("seat_claimed", { seat: "cto", node: "c", epoch: 4 }, 0);
  // a's claim comes through a's own server; c's release through c's route, a moment later.
  w.see("seat_claimed", { seat: "cto", node: "a", epoch: 5 }, 10_000);
  expect(w.due(10_000 + FAILOVER_GRACE_MS - 1)).toEqual([]);
  w.see("seat_detached", { seat: "cto", node: "c", epoch: 4, reason: "drain", mode: "voluntary" }, 10_000 + FAILOVER_GRACE_MS - 1);
  expect(w.due(10_000 + 10 * FAILOVER_GRACE_MS)).toEqual([]);
  // A release of another tenure of c's does not excuse this one; past the grace it is told, once.
  w.see("seat_claimed", { seat: "pm", node: "c", epoch: 7 }, 20_000);
  w.see("seat_claimed", { seat: "pm", node: "a", epoch: 8 }, 30_000);
  w.see("seat_detached", { seat: "pm", node: "c", epoch: 6, reason: "drain", mode: "voluntary" }, 30_001);
  expect(w.due(30_000 + FAILOVER_GRACE_MS)).toEqual([{ seat: "pm", node: "a", from: "c", epoch: 8 }]);
  w.see("seat_detached", { seat: "pm", node: "c", epoch: 7, reason: "drain", mode: "voluntary" }, 30_000 + FAILOVER_GRACE_MS + 1);
  expect(w.due(30_000 + 10 * FAILOVER_GRACE_MS)).toEqual([]);
});

test("the watch remembers a bounded number of seats, forgetting the least recently claimed", () => {
  const w = new FailoverWatch();
  for (let i = 0; i <= FAILOVER_SEATS_MAX; i++) w.see("seat_claimed", { seat: `s${i}`, node: "a" }, 0);
  // s0 was forgotten: its next claim elsewhere is not judged; s1 still is.
  w.see("seat_claimed", { seat: "s1", node: "b" }, 0);
  w.see("seat_claimed", { seat: "s0", node: "b" }, 0);
  expect(w.due(FAILOVER_GRACE_MS)).toEqual([{ seat: "s1", node: "b", from: "a", epoch: undefined }]);
});
