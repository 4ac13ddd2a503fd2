import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { FakeClock, type Clock, type Timer } from "../../src/clock.ts";
import { Watchdog, WATCHDOG_EXIT_CODE } from "../../src/seat/watchdog.ts";

function harness(threshold = 3_000, clock: Clock = new FakeClock(0)) {
  const exits: number[] = [];
  const notices: string[] = [];
  let ttl = threshold;
  const dog = new Watchdog({ clock, threshold_ms: () => ttl, exit: (c) => exits.push(c), notice: (l) => notices.push(l) });
  return { dog, exits, notices, setTtl: (v: number) => (ttl = v) };
}

describe("watchdog", () => {
  test("a duty stuck in one turn past the TTL exits the process with 75 and a notice", async () => {
    const clock = new FakeClock(0);
    const { dog, exits, notices } = harness(3_000, clock);
    const hb = dog.watch("seat-heartbeat");
    dog.arm();
    hb.beat();
    await clock.advance(3_000);
    expect(exits).toEqual([]);
    await clock.advance(1_000);
    expect(exits).toEqual([WATCHDOG_EXIT_CODE]);
    expect(notices[0]).toContain("seat-heartbeat");
    expect(dog.armed).toBe(false);
    await clock.advance(10_000);
    expect(exits).toHaveLength(1);
  });

  test("a duty that turns and rests on time is never judged wedged", async () => {
    const clock = new FakeClock(0);
    const { dog, exits } = harness(3_000, clock);
    const sweep = dog.watch("seat-sweep");
    dog.arm();
    // Turns every 5 s — slower than the 3 s threshold — each lasting 100 ms.
    for (let i = 0; i < 20; i++) {
      sweep.beat();
      await clock.advance(100);
      sweep.rest();
      await clock.advance(4_900);
    }
    expect(exits).toEqual([]);
  });

  test("disarmed for a normal shutdown, it never fires", async () => {
    const clock = new FakeClock(0);
    const { dog, exits } = harness(3_000, clock);
    dog.watch("seat-heartbeat").beat();
    dog.arm();
    dog.disarm();
    await clock.advance(60_000);
    expect(exits).toEqual([]);
    expect(dog.check()).toBe(false);
  });

  test("it stands down when no watched duty is live", async () => {
    const clock = new FakeClock(0);
    const { dog, exits } = harness(3_000, clock);
    const d = dog.watch("seat-heartbeat");
    dog.arm();
    d.beat();
    d.done();
    await clock.advance(60_000);
    expect(exits).toEqual([]);
    expect(dog.watching).toEqual([]);
  });

  test("the threshold follows the lease TTL in force", async () => {
    const clock = new FakeClock(0);
    const { dog, exits, setTtl } = harness(45_000, clock);
    const d = dog.watch("seat-heartbeat");
    dog.arm();
    setTtl(2_000);
    d.beat();
    await clock.advance(20_000);
    expect(exits).toEqual([WATCHDOG_EXIT_CODE]);
  });

  test("a process that stopped turning as a whole exits even when a beat was stamped on wake", () => {
    // A clock whose timers never fire on their own: the test moves time and calls check,
    // the way a SIGSTOPped process finds the world on SIGCONT.
    let now = 0;
    const still: Clock = {
      now: () => now,
      setTimeout: (): Timer => ({ cancel() {} }),
      setInterval: (): Timer => ({ cancel() {} }),
      sleep: () => new Promise(() => {}),
    };
    const { dog, exits } = harness(3_000, still);
    const d = dog.watch("seat-heartbeat");
    dog.arm();
    now = 10_000;
    d.beat();
    expect(dog.check()).toBe(true);
    expect(exits).toEqual([WATCHDOG_EXIT_CODE]);
  });
});

describe("watchdog with a resting process beat (a node from the start of its boot)", () => {
  /** A clock whose timers never fire on their own, as a SIGSTOPped process's do not: the
   * test moves time and calls check, the way the process finds the world on SIGCONT. */
  function stillClock() {
    let now = 0;
    const clock: Clock = {
      now: () => now,
      setTimeout: (): Timer => ({ cancel() {} }),
      setInterval: (): Timer => ({ cancel() {} }),
      sleep: () => new Promise(() => {}),
    };
    return { clock, move: (ms: number) => (now += ms) };
  }

  test("a process frozen past the TTL before any duty runs exits 75 on waking", () => {
    const { clock, move } = stillClock();
    const { dog, exits, notices } = harness(6_000, clock);
    dog.watch("process");
    dog.arm();
    move(13_000);
    expect(dog.check()).toBe(true);
    expect(exits).toEqual([WATCHDOG_EXIT_CODE]);
    expect(notices[0]).toContain("stopped turning");
  });

  test("without it, the same freeze is not noticed: nothing watched, the watchdog stands down", () => {
    const { clock, move } = stillClock();
    const { dog, exits } = harness(6_000, clock);
    dog.arm();
    move(13_000);
    expect(dog.check()).toBe(false);
    expect(exits).toEqual([]);
  });

  test("a long boot wait on a turning process raises no alarm, and seat duties are still judged after it", async () => {
    const clock = new FakeClock(0);
    const { dog, exits, notices } = harness(6_000, clock);
    dog.watch("process");
    dog.arm();
    // Ten minutes waiting for quorum, the event loop turning all along.
    await clock.advance(10 * 60_000);
    expect(exits).toEqual([]);
    // Then the seat host starts and one of its loops wedges: judged as before.
    const hb = dog.watch("seat_heartbeat");
    hb.beat();
    await clock.advance(7_500);
    expect(exits).toEqual([WATCHDOG_EXIT_CODE]);
    expect(notices[0]).toContain("duty seat_heartbeat stuck");
  });

  test("a finished duty leaves the process beat watched, so a later freeze is still noticed", async () => {
    const clock = new FakeClock(0);
    const { dog, exits } = harness(6_000, clock);
    dog.watch("process");
    dog.arm();
    const d = dog.watch("seat_sweep");
    d.beat();
    d.rest();
    d.done();
    await clock.advance(60_000);
    expect(exits).toEqual([]);
    expect(dog.watching).toEqual(["process"]);
  });

  test("disarmed for a shutdown, a freeze during it does not fire", () => {
    const { clock, move } = stillClock();
    const { dog, exits } = harness(6_000, clock);
    dog.watch("process");
    dog.arm();
    dog.disarm();
    move(13_000);
    expect(dog.check()).toBe(false);
    expect(exits).toEqual([]);
  });
});

describe("watchdog in a real process", () => {
  const children: ReturnType<typeof Bun.spawn>[] = [];
  afterAll(() => {
    for (const c of children) c.kill("SIGKILL");
  });
  const fixture = join(import.meta.dir, "fixtures", "wedge.ts");

  async function spawn(mode: string) {
    const child = Bun.spawn([process.execPath, fixture, mode, "300"], { stdout: "pipe", stderr: "pipe" });
    children.push(child);
    const reader = child.stdout.getReader();
    const { value } = await reader.read();
    expect(new TextDecoder().decode(value)).toContain("ready");
    return child;
  }

  test("a wedged duty ends the process with exit code 75 and a line on stderr", async () => {
    const child = await spawn("wedge");
    const code = await child.exited;
    expect(code).toBe(WATCHDOG_EXIT_CODE);
    expect(await new Response(child.stderr).text()).toContain("duty heartbeat stuck");
  }, 15_000);

  test("SIGSTOP past the TTL, then SIGCONT: the process exits 75", async () => {
    const child = await spawn("idle");
    child.kill("SIGSTOP");
    await Bun.sleep(800);
    child.kill("SIGCONT");
    const code = await child.exited;
    expect(code).toBe(WATCHDOG_EXIT_CODE);
    expect(await new Response(child.stderr).text()).toContain("stopped turning");
  }, 15_000);
});
