// The boot walk's one retry round: a create that fails in a burst is tried once more before
// the walk fails; one that keeps failing still fails it. The in-memory queue with a fault
// injected in front of ensureMailbox (the real walk, the real twin behind it).
import { expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { memoryLogger } from "../../src/log.ts";
import { ensureSeatMailboxes } from "../../src/queue/mailboxes.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";

async function faulty(failuresPerBox: number) {
  const { log, sink } = memoryLogger();
  const queue = new MemoryQueue({ clock: new FakeClock(), log });
  await queue.ensureStreams();
  const tries = new Map<string, number>();
  const real = queue.ensureMailbox.bind(queue);
  queue.ensureMailbox = async (subject: string, group: string) => {
    const n = (tries.get(group) ?? 0) + 1;
    tries.set(group, n);
    if (n <= failuresPerBox && group.endsWith("-reflect")) throw new Error("TIMEOUT");
    return real(subject, group);
  };
  return { queue, log, sink };
}

test("a create that timed out once is retried, and the walk succeeds", async () => {
  const { queue, log, sink } = await faulty(1);
  const res = await ensureSeatMailboxes(queue, ["a", "b", "c"], new FakeClock(), log, 4);
  expect(res.count).toBe(9);
  expect(sink.events("seat_mailbox_create_retrying")[0]!.fields.failed).toBe(3);
  expect((await queue.listMailboxes()).length).toBe(9);
});

test("a create that fails twice fails the walk, naming it", async () => {
  const { queue, log } = await faulty(2);
  await expect(ensureSeatMailboxes(queue, ["a", "b"], new FakeClock(), log, 4)).rejects.toThrow(/2 of 6 failed/);
});
