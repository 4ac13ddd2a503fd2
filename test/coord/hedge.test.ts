// Hedged consumer starts (src/coord/hedge.ts) on a FakeClock: a start that never answers
// gets company after hedge_ms, the first answer wins, a late answer is discarded, a failure
// starts the next at once, and the number of starts is bounded.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { hedged } from "../../src/coord/hedge.ts";

/** A start the test answers by hand. */
function starts() {
  const made: { resolve: (v: string) => void; reject: (e: Error) => void }[] = [];
  const start = () =>
    new Promise<string>((resolve, reject) => {
      made.push({ resolve, reject });
    });
  return { made, start };
}

describe("hedged starts", () => {
  test("an answered start wins alone: no second start is made", async () => {
    const clock = new FakeClock();
    const { made, start } = starts();
    const p = hedged(start, () => undefined, { attempts: 5, hedge_ms: 300, clock });
    await clock.advance(1);
    expect(made).toHaveLength(1);
    made[0]!.resolve("first");
    expect(await p).toBe("first");
    await clock.advance(10_000);
    expect(made).toHaveLength(1);
  });

  test("a start with no answer gets a second after hedge_ms; the first answer wins and a late one is discarded", async () => {
    const clock = new FakeClock();
    const { made, start } = starts();
    const discarded: string[] = [];
    const p = hedged(start, (late) => discarded.push(late), { attempts: 5, hedge_ms: 300, clock });
    await clock.advance(299);
    expect(made).toHaveLength(1);
    await clock.advance(1);
    expect(made).toHaveLength(2);
    made[1]!.resolve("second");
    expect(await p).toBe("second");
    made[0]!.resolve("first, late");
    await clock.advance(1);
    expect(discarded).toEqual(["first, late"]);
    await clock.advance(10_000);
    expect(made).toHaveLength(2);
  });

  test("a failure starts the next at once; starts are bounded and the last error is the answer when all fail", async () => {
    const clock = new FakeClock();
    const { made, start } = starts();
    const p = hedged(start, () => undefined, { attempts: 3, hedge_ms: 300, clock });
    let err: unknown = null;
    p.catch((e) => (err = e));
    await clock.advance(1);
    made[0]!.reject(new Error("one"));
    await clock.advance(1);
    expect(made).toHaveLength(2);
    await clock.advance(300);
    expect(made).toHaveLength(3);
    await clock.advance(10_000);
    expect(made).toHaveLength(3);
    made[2]!.reject(new Error("three"));
    await clock.advance(1);
    expect(err).toBeNull();
    made[1]!.reject(new Error("two"));
    await clock.advance(1);
    expect((err as Error | null)?.message).toBe("two");
  });

  test("a start still out when the others failed can still win", async () => {
    const clock = new FakeClock();
    const { made, start } = starts();
    const p = hedged(start, () => undefined, { attempts: 2, hedge_ms: 300, clock });
    await clock.advance(300);
    made[1]!.reject(new Error("placed on a dead member"));
    await clock.advance(1);
    made[0]!.resolve("slow but alive");
    expect(await p).toBe("slow but alive");
  });
});
