// KeyedOrder: in order per key, at once across keys, a failure holding nobody up.
import { expect, test } from "bun:test";
import { KeyedOrder } from "../../src/estate/keyed-order.ts";

/** A task the test finishes by hand, recording when it started. */
function gate(log: string[], name: string) {
  let open!: () => void;
  let fail!: (e: Error) => void;
  const done = new Promise<void>((res, rej) => {
    open = res;
    fail = rej;
  });
  return {
    task: () => {
      log.push(`start ${name}`);
      return done;
    },
    open: () => open(),
    fail: (e: Error) => fail(e),
  };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

test("tasks on one key run one after another, in the order queued", async () => {
  const order = new KeyedOrder();
  const log: string[] = [];
  const a = gate(log, "a1");
  const b = gate(log, "a2");
  const p1 = order.run(["a"], a.task);
  const p2 = order.run(["a"], b.task);
  await tick();
  expect(log).toEqual(["start a1"]);
  a.open();
  await p1;
  await tick();
  expect(log).toEqual(["start a1", "start a2"]);
  b.open();
  await p2;
  await order.idle();
  expect(order.keys).toBe(0);
});

test("tasks on different keys overlap", async () => {
  const order = new KeyedOrder();
  const log: string[] = [];
  const a = gate(log, "a");
  const b = gate(log, "b");
  order.run(["a"], a.task);
  order.run(["b"], b.task);
  await tick();
  expect(log).toEqual(["start a", "start b"]);
  a.open();
  b.open();
  await order.idle();
  expect(order.keys).toBe(0);
});

test("a task on two keys waits for both, and what follows on either waits for it", async () => {
  const order = new KeyedOrder();
  const log: string[] = [];
  const a = gate(log, "a");
  const b = gate(log, "b");
  const ab = gate(log, "ab");
  const after = gate(log, "b-after");
  order.run(["a"], a.task);
  order.run(["b"], b.task);
  order.run(["a", "b", "b"], ab.task);
  order.run(["b"], after.task);
  await tick();
  a.open();
  await tick();
  expect(log).toEqual(["start a", "start b"]);
  b.open();
  await tick();
  await tick();
  expect(log).toEqual(["start a", "start b", "start ab"]);
  ab.open();
  await tick();
  await tick();
  expect(log).toEqual(["start a", "start b", "start ab", "start b-after"]);
  after.open();
  await order.idle();
});

test("a failed task rejects its own caller and does not hold up the next on its key", async () => {
  const order = new KeyedOrder();
  const log: string[] = [];
  const bad = gate(log, "bad");
  const next = gate(log, "next");
  const p1 = order.run(["a"], bad.task);
  const p2 = order.run(["a"], next.task);
  bad.fail(new Error("publish failed"));
  await expect(p1).rejects.toThrow("publish failed");
  await tick();
  expect(log).toEqual(["start bad", "start next"]);
  next.open();
  await p2;
  await order.idle();
  expect(order.keys).toBe(0);
});

test("a task with no keys runs at once; idle waits for what is running", async () => {
  const order = new KeyedOrder();
  const log: string[] = [];
  const g = gate(log, "free");
  let idle = false;
  order.run([], g.task);
  const waiting = order.idle().then(() => (idle = true));
  await tick();
  expect(log).toEqual(["start free"]);
  expect(idle).toBe(false);
  g.open();
  await waiting;
  expect(idle).toBe(true);
});
