// Bounded concurrency, in its two shapes: a pool over a known list of items (seats,
// mailboxes) and a limit that calls made from anywhere queue for (lease calls), so a node
// with thousands of seats never puts thousands of requests on its broker in one burst.

/** `fn` over every item, at most `concurrency` at once, started in the items' order. */
export async function eachInFlight<T>(items: readonly T[], concurrency: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, worker));
}

/** At most `max` calls running; the rest wait in order. A waiter that gives up never runs. */
export class InFlightLimit {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly max: number) {}

  async run<T>(fn: () => Promise<T>, signal: AbortSignal): Promise<T> {
    if (signal.aborted) throw new Error("gave up waiting for a turn");
    if (this.running < this.max) this.running++;
    else {
      // A finishing call hands its slot straight over (`running` stays counted).
      await new Promise<void>((resolve, reject) => {
        const go = () => {
          signal.removeEventListener("abort", giveUp);
          resolve();
        };
        const giveUp = () => {
          this.waiting.splice(this.waiting.indexOf(go), 1);
          reject(new Error("gave up waiting for a turn"));
        };
        signal.addEventListener("abort", giveUp, { once: true });
        this.waiting.push(go);
      });
    }
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}
