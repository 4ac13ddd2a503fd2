// The one bounded pool: work over many items (seats, mailboxes, lease calls) with at most
// a fixed number under way at once, so a node with thousands of seats never puts thousands
// of requests on its broker in one burst.

/** `fn` over every item, at most `concurrency` at once, started in the items' order. */
export async function eachInFlight<T>(items: readonly T[], concurrency: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, worker));
}
