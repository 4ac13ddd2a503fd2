import { describe, expect, test } from "bun:test";
import { FakeClock } from "../src/clock.ts";

describe("FakeClock", () => {
  test("fires timers in due order and only when advanced past them", async () => {
    const clock = new FakeClock(0);
    const fired: string[] = [];
    clock.setTimeout(() => fired.push("b"), 20);
    clock.setTimeout(() => fired.push("a"), 10);
    await clock.advance(15);
    expect(fired).toEqual(["a"]);
    await clock.advance(5);
    expect(fired).toEqual(["a", "b"]);
    expect(clock.now()).toBe(20);
  });

  test("intervals repeat and cancel", async () => {
    const clock = new FakeClock(0);
    let n = 0;
    const t = clock.setInterval(() => n++, 5);
    await clock.advance(26);
    expect(n).toBe(5);
    t.cancel();
    await clock.advance(100);
    expect(n).toBe(5);
  });

  test("sleep resolves on advance and async chains run between timers", async () => {
    const clock = new FakeClock(0);
    const seen: number[] = [];
    const loop = (async () => {
      for (let i = 0; i < 3; i++) {
        await clock.sleep(10);
        seen.push(clock.now());
      }
    })();
    await clock.advance(30);
    await loop;
    expect(seen).toEqual([10, 20, 30]);
  });

  test("sleep rejects when aborted", async () => {
    const clock = new FakeClock(0);
    const ac = new AbortController();
    const p = clock.sleep(100, ac.signal);
    ac.abort(new Error("stop"));
    await expect(p).rejects.toThrow("stop");
  });
});
