// One broker or store call inside a duty tick, bounded. A tick stamps the watchdog between
// units of work, and the watchdog's threshold is the seat lease TTL; a call left to its
// client's own timeout (JetStream's can be several seconds, across a leader election) could
// hold one unit past that threshold and end a healthy process. Bounded, the call is an
// error the tick handles (retry next tick), which is what an unanswered call means anyway.
import type { Clock } from "../clock.ts";

export class CallBoundExceeded extends Error {
  constructor(what: string, bound_ms: number) {
    super(`${what}: no answer within ${bound_ms} ms`);
    this.name = "CallBoundExceeded";
  }
}

/** `p`, or a CallBoundExceeded after bound_ms. The call itself is not withdrawn: a late
 *  answer is dropped, so every call bounded here must be safe to land late (idempotent, or
 *  guarded by a compare-and-set or a message id). */
export async function bounded<T>(p: Promise<T>, bound_ms: number, clock: Clock, what: string): Promise<T> {
  const stop = new AbortController();
  const timeout = clock.sleep(bound_ms, stop.signal).then(
    () => {
      throw new CallBoundExceeded(what, bound_ms);
    },
    () => undefined as never,
  );
  try {
    return await Promise.race([p, timeout]);
  } finally {
    stop.abort();
    p.catch(() => undefined);
  }
}
