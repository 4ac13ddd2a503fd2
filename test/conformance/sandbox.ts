// ONE conformance suite for the sandbox box contract (src/sandbox/contract.ts): what a run's
// engine does and how the box reports it. Run against the local box (real bwrap, git and
// processes: test/sandbox/local.test.ts) and the in-process twin on a FakeClock
// (test/sandbox/twin.test.ts). Each scenario is written once as engine steps — the language
// test/support/fake-coding-cli.sh and the twin share — and the harness says how its
// provider runs them. Behaviour only: every wait is generous and no assertion is on time.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Box, BoxProvider, Question, RunLimits, RunResult, RunSpec } from "../../src/sandbox/contract.ts";

export interface SandboxHarness {
  provider: BoxProvider;
  /** The engine command that runs the steps of the task (`{task}` is where they go). */
  engine(steps: string[]): { command: string[]; task: string };
  /** A fresh box directory (not yet made). */
  dir(): string;
  /** Lets `ms` of the box's time go by: real boxes wait, the twin advances its FakeClock. */
  pass(ms: number): Promise<void>;
  /** Processes of this run still alive (the twin has none). */
  processes(run_id: string): number;
  teardown(): Promise<void>;
}

/** Generous limits: a scenario hits only the one it is about. */
export const ROOMY_LIMITS: RunLimits = { wall_seconds: 60, cpu_seconds: 30, memory_mb: 2048, disk_mb: 64, output_bytes: 64 * 1024 };

/** A step of box time between checks, and how long a scenario may wait for anything: far
 *  past what any of them needs, so a slow machine never fails the suite. */
const STEP_MS = 50;
const PATIENCE_MS = 45_000;
const TEST_TIMEOUT_MS = 60_000;

let runs = 0;

export function spec(h: SandboxHarness, steps: string[], over: Partial<RunSpec> = {}): RunSpec {
  runs += 1;
  return {
    run_id: `run-${process.pid}-${runs}-${Math.random().toString(36).slice(2, 8)}`,
    env: {},
    network: false,
    isolation: "bwrap",
    limits: ROOMY_LIMITS,
    ...h.engine(steps),
    ...over,
  };
}

/** Waits (in box time) until `probe` gives a value. */
export async function until<T>(h: SandboxHarness, what: string, probe: () => T | undefined): Promise<T> {
  for (let waited = 0; waited <= PATIENCE_MS; waited += STEP_MS) {
    const v = probe();
    if (v !== undefined) return v;
    await h.pass(STEP_MS);
  }
  throw new Error(`gave up waiting for ${what}`);
}

export async function settle(h: SandboxHarness, box: Box): Promise<RunResult> {
  let result: RunResult | undefined;
  void box.done.then((r) => (result = r));
  return until(h, "the run to end", () => result);
}

/** Collects the box's questions as they come. */
export function questions(box: Box): Question[] {
  const seen: Question[] = [];
  box.onQuestion((q) => seen.push(q));
  return seen;
}

export function sandboxConformance(name: string, make: () => Promise<SandboxHarness>): void {
  describe(`sandbox box conformance: ${name}`, () => {
    let h: SandboxHarness;
    beforeAll(async () => {
      h = await make();
    });
    afterAll(async () => {
      await h.teardown();
    });

    test("a run that edits and commits succeeds: commits listed, diff names the files, summary is the last line", async () => {
      const box = await h.provider.open(
        spec(h, ["print:starting", "write:notes.txt=hello notes", "commit:add notes", "write:draft.txt=not committed", "print:all done"]),
        h.dir(),
      );
      const r = await settle(h, box);
      expect(r.outcome).toBe("succeeded");
      expect(r.exit_code).toBe(0);
      expect(r.reason).toBe("");
      expect(r.commits).toHaveLength(1);
      expect(r.commits[0]).toMatch(/^[0-9a-f]{7,} add notes$/);
      expect(r.diff).toContain("b/notes.txt");
      expect(r.diff).toContain("+hello notes");
      expect(r.diff).toContain("b/draft.txt");
      expect(r.summary).toBe("all done");
      expect(r.output_tail).toBe("starting\nall done\n");
      // Settled once: a late cancel changes nothing.
      box.cancel("too late");
      expect(await box.done).toEqual(r);
    }, TEST_TIMEOUT_MS);

    test("a question asked and answered: the engine carries on with the answer", async () => {
      const box = await h.provider.open(spec(h, ["ask:Which colour?", "write:colour.txt=$ANSWER", "print:painted it $ANSWER"]), h.dir());
      const asked = questions(box);
      const q = await until(h, "the question", () => asked[0]);
      expect(q).toEqual({ seq: 1, text: "Which colour?" });
      box.answer(1, "teal");
      const r = await settle(h, box);
      expect(r.outcome).toBe("succeeded");
      expect(r.diff).toContain("b/colour.txt");
      expect(r.diff).toContain("+teal");
      expect(r.summary).toBe("painted it teal");
      expect(asked).toHaveLength(1);
    }, TEST_TIMEOUT_MS);

    test("two questions come in order, each answered in turn", async () => {
      const box = await h.provider.open(
        spec(h, ["ask:First name?", "write:first.txt=$ANSWER", "ask:Second name?", "write:second.txt=$ANSWER", "print:both"]),
        h.dir(),
      );
      const asked = questions(box);
      await until(h, "the first question", () => asked[0]);
      // The second is not asked before the first is answered.
      expect(asked).toEqual([{ seq: 1, text: "First name?" }]);
      box.answer(1, "ada");
      await until(h, "the second question", () => asked[1]);
      expect(asked).toEqual([
        { seq: 1, text: "First name?" },
        { seq: 2, text: "Second name?" },
      ]);
      box.answer(2, "grace");
      const r = await settle(h, box);
      expect(r.outcome).toBe("succeeded");
      expect(r.diff).toContain("+ada");
      expect(r.diff).toContain("+grace");
    }, TEST_TIMEOUT_MS);

    test("a non-zero exit fails with the code and the last line", async () => {
      const box = await h.provider.open(spec(h, ["print:trying", "print:giving up on it", "exit:3"]), h.dir());
      const r = await settle(h, box);
      expect(r.outcome).toBe("failed");
      expect(r.exit_code).toBe(3);
      expect(r.reason).toContain("the engine exited with code 3");
      expect(r.reason).toContain("giving up on it");
      expect(r.summary).toBe("giving up on it");
    }, TEST_TIMEOUT_MS);

    test("the wall limit ends the run, naming wall_seconds", async () => {
      const box = await h.provider.open(spec(h, ["print:working", "sleep:600", "print:never"], { limits: { ...ROOMY_LIMITS, wall_seconds: 1 } }), h.dir());
      const r = await settle(h, box);
      expect(r.outcome).toBe("limit");
      expect(r.exit_code).toBeNull();
      expect(r.reason).toContain("providers.sandbox.limits.wall_seconds");
      expect(r.reason).toContain("1 s");
      expect(r.output_tail).toBe("working\n");
      expect(h.processes(box.run_id)).toBe(0);
    }, TEST_TIMEOUT_MS);

    test("output is bounded: the tail is kept and every byte counted", async () => {
      const lines = Array.from({ length: 20 }, (_, i) => `line-${String(i).padStart(2, "0")}`); // 8 bytes each with its newline
      const box = await h.provider.open(spec(h, lines.map((l) => `print:${l}`), { limits: { ...ROOMY_LIMITS, output_bytes: 64 } }), h.dir());
      const r = await settle(h, box);
      expect(r.outcome).toBe("succeeded");
      expect(r.output_bytes).toBe(20 * 8);
      expect(r.output_tail).toBe(lines.slice(-8).map((l) => `${l}\n`).join(""));
      expect(r.summary).toBe("line-19");
    }, TEST_TIMEOUT_MS);

    test("cancel while parked on a question: cancelled with the reason, nothing left running", async () => {
      const box = await h.provider.open(spec(h, ["print:need to know", "ask:Proceed?", "write:after.txt=$ANSWER"]), h.dir());
      const asked = questions(box);
      await until(h, "the question", () => asked[0]);
      box.cancel("seat_removed");
      box.cancel("a second reason is not kept");
      const r = await settle(h, box);
      expect(r.outcome).toBe("cancelled");
      expect(r.reason).toBe("seat_removed");
      expect(r.exit_code).toBeNull();
      expect(r.diff).not.toContain("after.txt");
      expect(h.processes(box.run_id)).toBe(0);
      // An answer after the end goes nowhere and throws nothing.
      box.answer(1, "yes");
    }, TEST_TIMEOUT_MS);

    test("an answer to an unknown seq, or a second answer to one seq, is ignored", async () => {
      // The pause makes sure the first answer comes before the question.
      const box = await h.provider.open(spec(h, ["sleep:1", "ask:Pick one", "write:pick.txt=$ANSWER", "print:picked $ANSWER"]), h.dir());
      const asked = questions(box);
      box.answer(1, "before it was asked");
      await until(h, "the question", () => asked[0]);
      box.answer(2, "never asked");
      box.answer(1, "first");
      box.answer(1, "second");
      const r = await settle(h, box);
      expect(r.outcome).toBe("succeeded");
      expect(r.summary).toBe("picked first");
      expect(r.diff).toContain("+first");
      expect(r.diff).not.toContain("second");
      expect(r.diff).not.toContain("never asked");
      expect(asked).toEqual([{ seq: 1, text: "Pick one" }]);
    }, TEST_TIMEOUT_MS);
  });
}
