// The seat host's claims and releases are republished as events with the node's id; other
// log lines are not.
import { expect, test } from "bun:test";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { observedLogger } from "../../src/metrics/observed-logger.ts";
import { silentLogger } from "../../src/log.ts";
import { seatEventTap } from "../../src/node/seat-events.ts";

test("claims, releases and orphan releases become events naming the node; nothing else does", () => {
  const sink = new MemoryEventSink();
  const log = observedLogger(silentLogger, seatEventTap(sink, "node-b")).child({ component: "seat" });
  log.info("seat_claimed", { seat: "cto", epoch: 7 });
  log.info("seat_detached", { seat: "pm", epoch: 3, reason: "drain", mode: "voluntary" });
  log.info("seat_orphan_released", { seat: "ceo", epoch: 2 });
  log.info("seat_sweep", { held: 4 });
  log.warn("seat_renew_unknown", { seat: "cto", epoch: 7 });
  expect(sink.events).toEqual([
    { name: "seat_claimed", fields: { seat: "cto", epoch: 7, node: "node-b" } },
    { name: "seat_detached", fields: { seat: "pm", epoch: 3, node: "node-b", reason: "drain", mode: "voluntary" } },
    { name: "seat_orphan_released", fields: { seat: "ceo", epoch: 2, node: "node-b" } },
  ]);
});
