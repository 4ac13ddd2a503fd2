// A duty loop: runs its body at a fixed rate on the Clock, can be woken early, stamps a
// watchdog beat for each turn and rests between turns. One turn at a time, always: a
// slow turn delays the next instead of overlapping it.
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import type { DutyBeat, Watchdog } from "./watchdog.ts";

export class DutyLoop {
  private stopped = false;
  private wake: AbortController | null = null;
  private poked = false;
  private running: Promise<void> | null = null;
  private beat: DutyBeat | null = null;
  private turn: Promise<void> | null = null;

  constructor(
    readonly name: string,
    private readonly clock: Clock,
    private readonly interval_ms: () => number,
    private readonly body: () => Promise<void>,
    private readonly log: Logger,
    private readonly watchdog?: Watchdog,
  ) {}

  start(): void {
    if (this.running || this.stopped) return;
    this.beat = this.watchdog?.watch(this.name) ?? null;
    this.running = this.run();
  }

  /** Run a turn now (or right after the one under way) instead of at the next tick. */
  poke(): void {
    this.poked = true;
    this.wake?.abort();
  }

  /** The turn under way, if any (resolves when it ends). */
  get current(): Promise<void> | null {
    return this.turn;
  }

  /** Ends the loop after the turn under way (awaited, so a graceful stop never tears a
   * turn in half); `wait: false` walks away from it, as a dying process does. */
  async stop(wait = true): Promise<void> {
    this.stopped = true;
    this.wake?.abort();
    this.beat?.done();
    if (wait) await this.running;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const started = this.clock.now();
      this.poked = false;
      this.beat?.beat();
      this.turn = this.body().catch((err) => this.log.error(`${this.name}_failed`, { error: err as Error }));
      await this.turn;
      this.turn = null;
      this.beat?.rest();
      if (this.stopped || this.poked) continue;
      // Fixed rate: the next turn is due one interval after this one began.
      const wait = Math.max(0, started + this.interval_ms() - this.clock.now());
      this.wake = new AbortController();
      try {
        await this.clock.sleep(wait, this.wake.signal);
      } catch {
        // woken early (poke) or stopped
      }
      this.wake = null;
    }
  }
}
