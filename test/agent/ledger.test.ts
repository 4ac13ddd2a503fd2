import { describe, expect, test } from "bun:test";
import { CompletionLedger, legacyChatMessageKey, workKeyOf } from "../../src/agent/ledger.ts";
import { systemClock } from "../../src/clock.ts";
import { encodedSlot } from "../../src/coord/bucket.ts";
import { MemoryBucket } from "../../src/coord/local.ts";
import { silentLogger } from "../../src/log.ts";
import { mentionTrigger } from "./support.ts";

describe("the completion ledger's work key", () => {
  test("the work key is the constituents' identity, order-free, ledgered types only", () => {
    const a = { type: "chat_mention" as const, event_id: "a" };
    const b = { type: "task_assigned" as const, event_id: "b" };
    const s = { type: "schedule" as const, event_id: "s" };
    expect(workKeyOf([a, b])).toBe(workKeyOf([b, a])!);
    expect(workKeyOf([a])).not.toBe(workKeyOf([a, b]));
    // A schedule fire is ledgered: its instant's event id is its work.
    expect(workKeyOf([s])).not.toBeNull();
    expect(workKeyOf([a, b, s])).not.toBe(workKeyOf([a, b])!);
    expect(workKeyOf([])).toBeNull();
  });
});

describe("a message that mentions several seats", () => {
  const slot = () => encodedSlot(new MemoryBucket("crewlet_ledger", 0, systemClock));
  const mention = (seat: string) => mentionTrigger(seat, "general", "m-shared", "ana: @cto @pm please");
  test("one seat's answer skips only that seat's copy; the other seat still runs", async () => {
    const ledger = new CompletionLedger(slot(), systemClock, silentLogger);
    await ledger.record({ seat: "cto", turn_id: "t1", node: "n", outcome: "completed", triggers: [mention("cto")], answered_messages: [] });
    const check = await ledger.check([mention("pm"), mention("cto")]);
    expect(check.run.map((t) => t.seat)).toEqual(["pm"]);
    expect(check.skip.map((s) => s.trigger.seat)).toEqual(["cto"]);
  });

  test("a message answered in a thread is skipped for the seat that answered it, not for another", async () => {
    const ledger = new CompletionLedger(slot(), systemClock, silentLogger);
    await ledger.record({ seat: "cto", turn_id: "t1", node: "n", outcome: "completed", triggers: [], answered_messages: ["m-shared"] });
    const check = await ledger.check([{ ...mention("cto"), event_id: "e-cto" }, { ...mention("pm"), event_id: "e-pm" }]);
    expect(check.skip.map((s) => [s.trigger.seat, s.hit.record?.as])).toEqual([["cto", "answered_in_thread"]]);
  });

  test("a record an earlier build wrote under the message alone counts for the seat it names only", async () => {
    const s = slot();
    await s.put(legacyChatMessageKey("m-shared"), new TextEncoder().encode(JSON.stringify({ seat: "cto", turn_id: "t0", node: "old", outcome: "completed", at: 1, as: "trigger" })));
    const check = await new CompletionLedger(s, systemClock, silentLogger).check([mention("pm"), mention("cto")]);
    expect(check.run.map((t) => t.seat)).toEqual(["pm"]);
    expect(check.skip.map((x) => x.trigger.seat)).toEqual(["cto"]);
  });
});
