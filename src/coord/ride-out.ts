// A write that records an effect already shipped (a turn's completion, an approved call's
// result) must outlast a store election rather than fail with it: lost, the effect would
// run again or stay unsettled for good.
import type { Clock } from "../clock.ts";

/**
 * How long such a write keeps trying. An R3 election takes ~0.3–4 s (4–6.5 s when the
 * lease bucket's leader died, measured in issue 34); 15 s rides out a few back to back and
 * still keeps a turn's settle short.
 */
export const RIDE_OUT_MS = 15_000;
/** Between attempts: a fraction of an election. */
export const RIDE_OUT_EVERY_MS = 250;

/**
 * Runs `write` until it resolves, trying again while `retryable(err)` and the clock is
 * before `until_ms`; the last error is thrown. `attempts` counts the tries it took.
 */
export async function rideOut<T>(
  clock: Clock,
  until_ms: number,
  write: () => Promise<T>,
  retryable: (err: unknown) => boolean = () => true,
): Promise<{ value: T; attempts: number }> {
  for (let attempts = 1; ; attempts++) {
    try {
      return { value: await write(), attempts };
    } catch (err) {
      if (!retryable(err) || clock.now() + RIDE_OUT_EVERY_MS >= until_ms) throw err;
      await clock.sleep(RIDE_OUT_EVERY_MS);
    }
  }
}
