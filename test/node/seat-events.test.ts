// The seat host's claims and releases are republished as events with the node's id; other
// log lines are not.
import { expect, test } from "bun:test";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { observedLogger } from "../../src/metrics/observed-logger.ts";
import { silentLogger } from "../../src/log.ts";
import { seatEventTap } from "../../src/node/seat-events.ts";

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
