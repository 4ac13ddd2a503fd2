// The seat host's bounded lease store: every call answers within its time bound, and no
// more than its in-flight bound reach the store at once (a burst of renewals is what made
// nats-server drop its whole API queue at 10,000 seats).
import { expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import type { LeaseStore, RenewResult } from "../../src/coord/contract.ts";
import { BoundedLeaseStore } from "../../src/seat/bounded-store.ts";

const BOUND_MS = 1_000;

/** A store whose renewals answer only when the test says so. */
function heldStore() {
  const started: string[] = [];
  const answers = new Map<string, (r: RenewResult) => void>();
  let running = 0;
  let peak = 0;
  const store = {
    renew: (key: string) => {
      started.push(key);
      running++;
      peak = Math.max(peak, running);
      return new Promise<RenewResult>((resolve) =>
        answers.set(key, (r) => {
          running--;
          resolve(r);
        }),
      );
    },
  } as unknown as LeaseStore;
  const answer = (key: string) => answers.get(key)!({ status: "lost" });
  return { store, started, answer, peak: () => peak };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

test("at most the in-flight bound reach the store; the rest start in order as slots free", async () => {
  const clock = new FakeClock();
  const s = heldStore();
  const bounded = new BoundedLeaseStore(s.store, clock, () => BOUND_MS, 3);
  const keys = Array.from({ length: 10 }, (_, i) => `seat:${i}`);
  const results = keys.map((k) => bounded.renew(k, "o", 1));
  await tick();
  expect(s.started).toEqual(keys.slice(0, 3));
  for (const k of keys) {
    s.answer(k);
    await tick();
    await tick();
  }
  expect((await Promise.all(results)).map((r) => r.status)).toEqual(keys.map(() => "lost"));
  expect(s.started).toEqual(keys);
  expect(s.peak()).toBe(3);
});

test("a call still waiting for a slot at its bound answers unknown and is never sent", async () => {
  const clock = new FakeClock();
  const s = heldStore();
  const bounded = new BoundedLeaseStore(s.store, clock, () => BOUND_MS, 1);
  const first = bounded.renew("seat:a", "o", 1);
  const second = bounded.renew("seat:b", "o", 1);
  await tick();
  await clock.advance(BOUND_MS);
  // Both past the bound: the first hangs at the store, the second never got a slot.
  expect(await first).toMatchObject({ status: "unknown" });
  expect(await second).toMatchObject({ status: "unknown" });
  // The hung call keeps its slot until the store answers it: a third waits behind it.
  const third = bounded.renew("seat:c", "o", 1);
  await tick();
  expect(s.started).toEqual(["seat:a"]);
  s.answer("seat:a");
  await tick();
  await tick();
  expect(s.started).toEqual(["seat:a", "seat:c"]);
  s.answer("seat:c");
  expect(await third).toEqual({ status: "lost" });
  expect(s.peak()).toBe(1);
});
