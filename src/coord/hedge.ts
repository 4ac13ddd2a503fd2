// Hedged starts for calls that, on a cluster missing a member, sometimes never answer.
// nats-server places an ephemeral consumer (a watch, a listing) on a member of the stream's
// peer set, and may pick one that was killed and is not yet known to be offline; that
// creation never answers while the others answer in milliseconds. 2.9.10 kept doing so for
// as long as the member was down (one start in three); 2.15.2 only in the first seconds
// after the loss (bench/server-quirks.ts). Waiting out a
// whole call budget before asking again cost a claim its lease TTL (a 2 s budget against
// a 2 s TTL); asking again a little later while the first ask is still out does not.
import type { Clock, Timer } from "../clock.ts";

export interface HedgeOptions {
  /** Starts in all, the first included: the bound on what one call may leave out. */
  attempts: number;
  /** Wait this long for an answer before starting the next one alongside. */
  hedge_ms: number;
  clock: Clock;
}

/**
 * Starts `start()`, and another each `hedge_ms` without an answer (or at once when one
 * fails), up to `attempts` in all. The first success wins; a success that comes later is
 * handed to `discard` (so a consumer it made is stopped). Fails with the last error once
 * every start has failed.
 */
export function hedged<T>(start: () => Promise<T>, discard: (late: T) => void, opts: HedgeOptions): Promise<T> {
  if (!Number.isInteger(opts.attempts) || opts.attempts < 1) throw new RangeError(`attempts must be a positive integer, got ${opts.attempts}`);
  return new Promise<T>((resolve, reject) => {
    let launched = 0;
    let failed = 0;
    let settled = false;
    let timer: Timer | null = null;
    const launch = () => {
      launched += 1;
      timer?.cancel();
      timer = launched < opts.attempts ? opts.clock.setTimeout(() => !settled && launch(), opts.hedge_ms) : null;
      Promise.resolve()
        .then(start)
        .then(
          (value) => {
            if (settled) {
              try {
                discard(value);
              } catch {
                // a late start that cannot be stopped is the server's to time out
              }
              return;
            }
            settled = true;
            timer?.cancel();
            resolve(value);
          },
          (err: unknown) => {
            failed += 1;
            if (settled) return;
            if (launched < opts.attempts) return launch();
            if (failed === launched) {
              settled = true;
              reject(err);
            }
          },
        );
    };
    launch();
  });
}
