// Work that must stay in order per key and may overlap across keys: the wake feed's
// publishes (a seat's triggers reach its inbox in record order, while different seats'
// triggers go out at once). Pure scheduling, no I/O and no clock.

export class KeyedOrder {
  /** The last task queued for each key; removed once it settles and nothing followed it. */
  private tails = new Map<string, Promise<unknown>>();
  private running = new Set<Promise<unknown>>();

  /**
   * Runs `task` once every task queued earlier for any of `keys` has settled (fulfilled or
   * not: an earlier failure is its own caller's to handle), and returns its result. A task
   * with no keys runs at once.
   */
  run<T>(keys: readonly string[], task: () => Promise<T>): Promise<T> {
    const before = [...new Set(keys)].map((k) => this.tails.get(k)).filter((p): p is Promise<unknown> => p !== undefined);
    const result = Promise.allSettled(before).then(task);
    const settled = result.then(
      () => undefined,
      () => undefined,
    );
    for (const k of new Set(keys)) this.tails.set(k, settled);
    this.running.add(settled);
    void settled.then(() => {
      this.running.delete(settled);
      for (const k of new Set(keys)) if (this.tails.get(k) === settled) this.tails.delete(k);
    });
    return result;
  }

  /** Keys with a task queued or running (how much the map holds). */
  get keys(): number {
    return this.tails.size;
  }

  /** Resolves once every task queued so far has settled. */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }
}
