// The only source of time and timers in Crewlet. Everything that waits takes a Clock,
// so a simulated fleet of many nodes runs on a FakeClock in milliseconds of real time.

export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Wall-clock milliseconds since the epoch. */
  now(): number;
  setTimeout(fn: () => void, delay_ms: number): Timer;
  setInterval(fn: () => void, interval_ms: number): Timer;
  /** Resolves after delay_ms; rejects with the signal's reason when aborted first. */
  sleep(delay_ms: number, signal?: AbortSignal): Promise<void>;
}

function sleepOn(clock: Clock, delay_ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      timer.cancel();
      reject(signal?.reason);
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, delay_ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

class SystemClock implements Clock {
  now(): number {
    return Date.now();
  }
  setTimeout(fn: () => void, delay_ms: number): Timer {
    const handle = setTimeout(fn, Math.max(0, delay_ms));
    return { cancel: () => clearTimeout(handle) };
  }
  setInterval(fn: () => void, interval_ms: number): Timer {
    const handle = setInterval(fn, Math.max(1, interval_ms));
    return { cancel: () => clearInterval(handle) };
  }
  sleep(delay_ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, delay_ms, signal);
  }
}

export const systemClock: Clock = new SystemClock();

interface FakeTimer {
  id: number;
  due_ms: number;
  interval_ms: number | null;
  fn: () => void;
  cancelled: boolean;
}

/**
 * A clock that only moves when told to. Timers fire in due order (ties by creation
 * order) and the microtask queue is drained after each one, so async code driven by
 * the timers runs to its next wait before the next timer fires.
 */
export class FakeClock implements Clock {
  private now_ms: number;
  private next_id = 1;
  private timers: FakeTimer[] = [];

  constructor(start_ms = Date.UTC(2026, 0, 1)) {
    this.now_ms = start_ms;
  }

  now(): number {
    return this.now_ms;
  }

  setTimeout(fn: () => void, delay_ms: number): Timer {
    return this.add(fn, Math.max(0, delay_ms), null);
  }

  setInterval(fn: () => void, interval_ms: number): Timer {
    const every = Math.max(1, interval_ms);
    return this.add(fn, every, every);
  }

  sleep(delay_ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, delay_ms, signal);
  }

  /** Number of timers still waiting to fire. */
  get pending(): number {
    return this.timers.filter((t) => !t.cancelled).length;
  }

  /** Moves time forward by delta_ms, firing every timer that falls due on the way. */
  async advance(delta_ms: number): Promise<void> {
    const target_ms = this.now_ms + delta_ms;
    await settle();
    for (;;) {
      const next = this.earliest();
      if (!next || next.due_ms > target_ms) break;
      this.now_ms = Math.max(this.now_ms, next.due_ms);
      if (next.interval_ms === null) {
        next.cancelled = true;
      } else {
        next.due_ms += next.interval_ms;
      }
      next.fn();
      await settle();
    }
    this.now_ms = target_ms;
    this.timers = this.timers.filter((t) => !t.cancelled);
  }

  private earliest(): FakeTimer | undefined {
    let best: FakeTimer | undefined;
    for (const t of this.timers) {
      if (t.cancelled) continue;
      if (!best || t.due_ms < best.due_ms || (t.due_ms === best.due_ms && t.id < best.id)) best = t;
    }
    return best;
  }

  private add(fn: () => void, delay_ms: number, interval_ms: number | null): Timer {
    const timer: FakeTimer = {
      id: this.next_id++,
      due_ms: this.now_ms + delay_ms,
      interval_ms,
      fn,
      cancelled: false,
    };
    this.timers.push(timer);
    return { cancel: () => void (timer.cancelled = true) };
  }
}

/**
 * Lets pending promise chains run. A fixed number of macrotask turns bounds the wait:
 * in-memory backends resolve within a few microtask hops, and a bound keeps a runaway
 * chain from spinning the simulation forever.
 */
const SETTLE_TURNS = 4;
async function settle(): Promise<void> {
  for (let i = 0; i < SETTLE_TURNS; i++) {
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}
