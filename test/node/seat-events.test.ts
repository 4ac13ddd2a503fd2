// The seat host's claims and releases are republished as events with the node's id; other
// log lines are not. Failovers are told from those events (FailoverWatch).
import { expect, test } from "bun:test";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { observedLogger } from "../../src/metrics/observed-logger.ts";
import { silentLogger } from "../../src/log.ts";
import { FAILOVER_SEATS_MAX, FailoverWatch, seatEventTap } from "../../src/node/seat-events.ts";

test("claims, releases, orphan releases and stops reaching a turn become events naming the node; nothing else does (pauses are mirrored by every node)", () => {
  const sink = new MemoryEventSink();
  const log = observedLogger(silentLogger, seatEventTap(sink, "node-b")).child({ component: "seat" });
  log.info("seat_claimed", { seat: "cto", epoch: 7 });
  log.info("seat_detached", { seat: "pm", epoch: 3, reason: "drain", mode: "voluntary" });
  log.info("seat_orphan_released", { seat: "ceo", epoch: 2 });
  log.info("turn_stop_requested", { seat: "cto", by: "token:ops", turns: ["t1"] });
  log.info("seat_paused", { seat: "cto", by: "token:ops" });
  log.info("seat_sweep", { held: 4 });
  log.warn("seat_renew_unknown", { seat: "cto", epoch: 7 });
  expect(sink.events).toEqual([
    { name: "seat_claimed", fields: { seat: "cto", epoch: 7, node: "node-b" } },
    { name: "seat_detached", fields: { seat: "pm", epoch: 3, node: "node-b", reason: "drain", mode: "voluntary" } },
    { name: "seat_orphan_released", fields: { seat: "ceo", epoch: 2, node: "node-b" } },
    { name: "turn_stop_requested", fields: { seat: "cto", node: "node-b", by: "token:ops", turns: ["t1"] } },
  ]);
});

test("a failover is a claim by another node while the last claimant never let the seat go (a table, in stream order)", () => {
  const w = new FailoverWatch();
  const claimed = (seat: string, node: string) => w.see("seat_claimed", { seat, node, epoch: 1 });
  // A first claim seen: nobody known before it.
  expect(claimed("cto", "a")).toBeNull();
  // a dies without a word; b claims: a failover from a.
  expect(claimed("cto", "b")).toEqual({ seat: "cto", node: "b", from: "a" });
  // b lets it go (a drain), c claims: a handover, not a failover.
  expect(w.see("seat_detached", { seat: "cto", node: "b", reason: "drain", mode: "voluntary" })).toBeNull();
  expect(claimed("cto", "c")).toBeNull();
  // A release by some other node says nothing about c's tenure.
  w.see("seat_detached", { seat: "cto", node: "b", reason: "drain", mode: "voluntary" });
  expect(claimed("cto", "d")).toEqual({ seat: "cto", node: "d", from: "c" });
  // A fenced detach is a lease lost, not given up: still a failover.
  w.see("seat_detached", { seat: "cto", node: "d", reason: "lease_lost", mode: "fenced" });
  expect(claimed("cto", "e")).toEqual({ seat: "cto", node: "e", from: "d" });
  expect(claimed("cto", "d")).toEqual({ seat: "cto", node: "d", from: "e" });
  // An orphan's release counts as letting go; a re-claim by the same node is no failover.
  w.see("seat_orphan_released", { seat: "cto", node: "d" });
  expect(claimed("cto", "a")).toBeNull();
  expect(claimed("cto", "a")).toBeNull();
  // Seats are judged apart; malformed events change nothing.
  expect(claimed("pm", "b")).toBeNull();
  expect(w.see("seat_claimed", { seat: "cto", node: 7 })).toBeNull();
  expect(w.see("seat_claimed", { node: "b" })).toBeNull();
  expect(claimed("cto", "b")).toEqual({ seat: "cto", node: "b", from: "a" });
});

test("the watch remembers a bounded number of seats, forgetting the least recently claimed", () => {
  const w = new FailoverWatch();
  for (let i = 0; i <= FAILOVER_SEATS_MAX; i++) w.see("seat_claimed", { seat: `s${i}`, node: "a" });
  // s0 was forgotten: its next claim elsewhere is not judged; s1 still is.
  expect(w.see("seat_claimed", { seat: "s1", node: "b" })).toEqual({ seat: "s1", node: "b", from: "a" });
  expect(w.see("seat_claimed", { seat: "s0", node: "b" })).toBeNull();
});
