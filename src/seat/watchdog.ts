// The wedged-node watchdog (spec: Seat Ownership § The wedged node, and why it leaves).
// Every duty loop stamps a beat as it turns; a separate timer compares, and ends the
// process with exit code 75 once a live duty has been stuck in one turn for longer than
// the lease TTL in force. Past that the node is provably not the owner of anything it
// leased, while a wedged loop may still hold fetched mail, MCP children and credentials,
// and still answer /health so nothing restarts it. Leaving is the only unilateral move.
//
// The node watches one more "duty" from the first moment of its boot: the process itself,
// a beat that only ever rests (src/node/node.ts). Resting is never stuck, so a long
// legitimate boot wait (quorum, a broker election) raises no alarm; but while it is
// watched the watchdog never stands down, so a process frozen past the TTL in any phase —
// booting, before its seat host or duties run, as well as serving — leaves on waking.
import { writeSync } from "node:fs";
import type { Clock, Timer } from "../clock.ts";

/** Distinct from any ordinary failure, so a supervisor's restart log says what happened. */
export const WATCHDOG_EXIT_CODE = 75;
/** Polls per threshold: the poll interval is a ceiling derived from the threshold (a
 * poll slower than it would let a wedge run past the TTL unnoticed), and four polls
 * notice a wedge within 1.25 × TTL. */
export const WATCHDOG_POLLS_PER_THRESHOLD = 4;

export interface WatchdogOptions {
  clock: Clock;
  /** The lease TTL in force, read at every check: it may be one adopted from a peer's
   * bucket rather than the shipped 45 s, and the threshold is that same number. */
  threshold_ms: () => number;
  /** Ends the process. Injectable so tests can watch it fire; the default is
   * process.exit, which runs no deferred work (the duty that stalled would have to run
   * any graceful shutdown, so trying is how a watchdog ends up wedged too). */
  exit?: (code: number) => void;
  /** Where the notice goes: straight to stderr (fd 2), never through the logger, whose
   * sinks may batch, format or ship lines elsewhere — more machinery than a wedged
   * process has earned. */
  notice?: (line: string) => void;
}

/** One watched duty loop. */
export interface DutyBeat {
  /** At the top of each turn: the loop is turning, and has been since now. */
  beat(): void;
  /** Between turns, waiting on a clock timer: resting is not wedged. */
  rest(): void;
  /** The loop has ended: a duty that is gone holds nothing and is not watched. */
  done(): void;
}

interface Duty {
  name: string;
  /** When the current turn began; null while resting. */
  turning_since: number | null;
  live: boolean;
}

export class Watchdog {
  private readonly duties = new Set<Duty>();
  private timer: Timer | null = null;
  private last_check_ms: number | null = null;
  private fired = false;
  private readonly exit: (code: number) => void;
  private readonly notice: (line: string) => void;

  constructor(private readonly opts: WatchdogOptions) {
    this.exit = opts.exit ?? ((code) => process.exit(code));
    this.notice = opts.notice ?? ((line) => void writeSync(2, line + "\n"));
  }

  watch(name: string): DutyBeat {
    const duty: Duty = { name, turning_since: null, live: true };
    this.duties.add(duty);
    return {
      beat: () => {
        if (duty.live) duty.turning_since = this.opts.clock.now();
      },
      rest: () => {
        duty.turning_since = null;
      },
      done: () => {
        duty.live = false;
        this.duties.delete(duty);
      },
    };
  }

  get armed(): boolean {
    return this.timer !== null;
  }

  /** Names of the duties still watched. */
  get watching(): string[] {
    return [...this.duties].map((d) => d.name);
  }

  arm(): void {
    if (this.timer || this.fired) return;
    this.last_check_ms = this.opts.clock.now();
    this.schedule();
  }

  /** For the whole of a normal shutdown: teardown legitimately blocks loops, and exiting
   * through the middle of it would abandon the seat release that makes a drain graceful. */
  disarm(): void {
    this.timer?.cancel();
    this.timer = null;
    this.last_check_ms = null;
  }

  /** One comparison; the timer calls it, tests may too. True when it fired. */
  check(): boolean {
    if (this.fired) return true;
    if (!this.timer) return false;
    const now = this.opts.clock.now();
    const threshold = this.opts.threshold_ms();
    const last = this.last_check_ms;
    this.last_check_ms = now;
    // Stand down when nothing watched is live: from here a finished duty and a wedged one
    // look alike, and a finished one took its work with it. A node's resting process beat
    // keeps one live for its whole life (see the head of this file).
    if (this.duties.size === 0) return false;
    // This timer is a loop too. Finding itself late by more than the threshold means the
    // whole process stopped turning (SIGSTOP, a blocked event loop): every duty's beat is
    // as stale as that, even one stamped by a timer that happened to fire first on wake.
    if (last !== null && now - last > threshold) {
      return this.fire(`process stopped turning for ${now - last} ms`, threshold);
    }
    for (const d of this.duties) {
      if (d.turning_since !== null && now - d.turning_since > threshold) {
        return this.fire(`duty ${d.name} stuck in one turn for ${now - d.turning_since} ms`, threshold);
      }
    }
    return false;
  }

  private schedule(): void {
    const every = Math.max(1, Math.floor(this.opts.threshold_ms() / WATCHDOG_POLLS_PER_THRESHOLD));
    this.timer = this.opts.clock.setTimeout(() => {
      if (!this.timer) return;
      if (!this.check()) this.schedule();
    }, every);
  }

  private fire(why: string, threshold: number): boolean {
    this.fired = true;
    this.timer?.cancel();
    this.timer = null;
    this.notice(`crewlet watchdog: ${why}, past the lease TTL of ${threshold} ms; exiting with code ${WATCHDOG_EXIT_CODE}`);
    this.exit(WATCHDOG_EXIT_CODE);
    return true;
  }
}
