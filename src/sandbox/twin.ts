// The in-process twin of a box, for simulations: no processes, no files, no git — a tiny
// script stands in for the engine, every wait is on the Clock (a FakeClock drives it), and
// the result has the local box's shape and wording (the same OutputTail, QuestionBoard and
// classify). test/conformance/sandbox.ts holds it to the local box's behaviour.
//
// The engine is `["twin", ...scripts]`; each script (after `{task}` is replaced by the task)
// is steps separated by ';' — the language of test/support/fake-coding-cli.sh, so one task
// runs on both providers:
//
//   print:TEXT  ask:QUESTION  write:FILE=TEXT  commit:MESSAGE  sleep:SECONDS  exit:N
//   spin (the CPU limit, after cpu_seconds of clock time)  fill:MB  env:VAR  envnames
//   bg:SECONDS (nothing: no processes)  net:PORT  touch:PATH
//
// $ANSWER in print and write is the last answer. Files and commits are synthetic but
// consistent: the diff is a new-file diff per file written, in git's format.
import { createHash } from "node:crypto";
import { join } from "node:path";
import { systemClock, type Clock, type Timer } from "../clock.ts";
import { engineArgv } from "./box-argv.ts";
import { DIFF_BYTES_MAX } from "./box-git.ts";
import { classify, type EngineEnd, type EnforcedLimit } from "./box-outcome.ts";
import { lastLine, OutputTail } from "./box-output.ts";
import { QuestionBoard, QUESTIONS_MAX } from "./box-questions.ts";
import type { Box, BoxProvider, Question, RunResult, RunSpec } from "./contract.ts";

/** A twin script is a test's or a simulation's few steps; a runaway generated one stops here. */
export const TWIN_STEPS_MAX = 10_000;

const MIB = 1024 * 1024;

export interface TwinBoxOptions {
  clock?: Clock;
}

export class TwinBoxProvider implements BoxProvider {
  readonly kind = "twin" as const;
  private readonly clock: Clock;

  constructor(opts: TwinBoxOptions = {}) {
    this.clock = opts.clock ?? systemClock;
  }

  async open(spec: RunSpec, dir: string): Promise<Box> {
    const [engine, ...scripts] = engineArgv(spec.command, spec.task);
    if (engine !== "twin") throw new Error(`the twin box runs only twin scripts: the command must start with "twin", not "${engine ?? ""}"`);
    const steps = scripts.flatMap((s) => s.split(";")).filter((s) => s !== "");
    if (steps.length > TWIN_STEPS_MAX) throw new Error(`a twin script has at most ${TWIN_STEPS_MAX} steps`);
    return new TwinBox(spec, join(dir, "work"), steps, this.clock);
  }
}

/** Thrown inside the script when a limit or a cancel ends it. */
class Stopped extends Error {}

interface TwinFile {
  text: string | null;
  bytes: number;
}

class TwinBox implements Box {
  readonly run_id: string;
  readonly done: Promise<RunResult>;
  private resolveDone!: (r: RunResult) => void;
  private readonly output: OutputTail;
  private readonly board = new QuestionBoard();
  private readonly waiting = new Map<number, (text: string) => void>();
  private readonly abort = new AbortController();
  private readonly files = new Map<string, TwinFile>();
  private readonly commits: string[] = [];
  private readonly wall: Timer;
  private cancelled: string | null = null;
  private enforced: EnforcedLimit | null = null;
  private finished = false;
  private seq = 0;
  /** 1-based number of the step running: names fill files as the fake CLI does. */
  private step_no = 0;
  private answer_text = "";

  constructor(
    private readonly spec: RunSpec,
    readonly work_dir: string,
    private readonly steps: string[],
    private readonly clock: Clock,
  ) {
    this.run_id = spec.run_id;
    this.done = new Promise((r) => (this.resolveDone = r));
    this.output = new OutputTail(spec.limits.output_bytes);
    this.wall = clock.setTimeout(() => this.stop({ kind: "wall" }, null), spec.limits.wall_seconds * 1000);
    queueMicrotask(() => void this.run());
  }

  onQuestion(cb: (q: Question) => void): void {
    this.board.listen(cb);
  }

  answer(seq: number, text: string): void {
    if (this.finished || !this.board.take(seq)) return;
    const wake = this.waiting.get(seq);
    this.waiting.delete(seq);
    wake?.(text);
  }

  cancel(reason: string): void {
    this.stop(null, reason);
  }

  private stop(limit: EnforcedLimit | null, cancel_reason: string | null): void {
    if (this.finished || this.abort.signal.aborted) return;
    this.enforced = limit;
    this.cancelled = cancel_reason;
    this.abort.abort(new Stopped());
  }

  private async run(): Promise<void> {
    let end: EngineEnd = { kind: "exited", code: 0, signal: null };
    try {
      for (const step of this.steps) {
        if (this.abort.signal.aborted) throw new Stopped();
        this.step_no += 1;
        const code = await this.step(step);
        if (code !== null) {
          end = { kind: "exited", code, signal: null };
          break;
        }
      }
    } catch {
      // A stop: the tree is "killed", as the local box's is by SIGTERM.
      end = { kind: "exited", code: null, signal: "SIGTERM" };
    }
    this.finish(end);
  }

  /** Runs one step; a number is the engine's exit code. */
  private async step(step: string): Promise<number | null> {
    const colon = step.indexOf(":");
    const op = colon < 0 ? step : step.slice(0, colon);
    const arg = colon < 0 ? "" : step.slice(colon + 1);
    switch (op) {
      case "print":
        this.print(this.subst(arg));
        return null;
      case "ask":
        this.answer_text = await this.ask(arg);
        return null;
      case "write": {
        const eq = arg.indexOf("=");
        const text = `${this.subst(eq < 0 ? "" : arg.slice(eq + 1))}\n`;
        return this.put(eq < 0 ? arg : arg.slice(0, eq), { text, bytes: Buffer.byteLength(text) });
      }
      case "commit":
        this.commits.push(`${sha(`${this.run_id}\n${this.commits.length}\n${arg}`).slice(0, 7)} ${arg}`);
        return null;
      case "sleep":
        await this.clock.sleep(Number(arg) * 1000, this.abort.signal);
        return null;
      case "exit":
        return Number.parseInt(arg, 10) || 0;
      case "spin":
        // Spinning spends CPU as fast as the clock runs: the CPU limit, unless something first.
        await this.clock.sleep(this.spec.limits.cpu_seconds * 1000, this.abort.signal);
        this.stop({ kind: "cpu" }, null);
        throw new Stopped();
      case "fill":
        return this.put(`fill-${this.step_no}.bin`, { text: null, bytes: Number(arg) * MIB });
      case "env": {
        const value = this.spec.env[arg];
        this.print(value === undefined ? `${arg} is unset` : `${arg}=${value}`);
        return null;
      }
      case "envnames":
        this.print([...new Set(["HOME", "LANG", "TMPDIR", "PATH", "CREWLET_RUN_ID", "CREWLET_CONTROL", ...Object.keys(this.spec.env)])].sort().join(","));
        return null;
      case "bg":
        return null;
      case "net":
        this.print(this.spec.network ? "net ok" : "net blocked");
        return null;
      case "touch":
        this.print(arg.startsWith("/") ? `cannot write ${arg}` : `wrote ${arg}`);
        if (!arg.startsWith("/")) return this.put(arg, { text: "", bytes: 0 });
        return null;
      default:
        this.print(`twin: unknown step: ${step}`);
        return 2;
    }
  }

  private print(line: string): void {
    this.output.push(new TextEncoder().encode(`${line}\n`));
  }

  private subst(text: string): string {
    return text.split("$ANSWER").join(this.answer_text);
  }

  /** Writes a file, held to the disk limit as the local box holds it (one file: RLIMIT_FSIZE;
   *  all of them: the size check). */
  private put(name: string, file: TwinFile): number | null {
    const limit_bytes = this.spec.limits.disk_mb * MIB;
    this.files.set(name, { text: file.text, bytes: Math.min(file.bytes, limit_bytes) });
    const total = [...this.files.values()].reduce((n, f) => n + f.bytes, 0);
    if (file.bytes > limit_bytes || total > limit_bytes) {
      this.stop({ kind: "disk", used_mb: Math.ceil(total / MIB) }, null);
      throw new Stopped();
    }
    return null;
  }

  private ask(text: string): Promise<string> {
    if (this.seq >= QUESTIONS_MAX) return Promise.reject(new Stopped());
    this.seq += 1;
    const seq = this.seq;
    return new Promise((resolve, reject) => {
      const onAbort = () => reject(this.abort.signal.reason);
      if (this.abort.signal.aborted) return onAbort();
      this.abort.signal.addEventListener("abort", onAbort, { once: true });
      this.waiting.set(seq, (answer) => {
        this.abort.signal.removeEventListener("abort", onAbort);
        resolve(answer);
      });
      this.board.ask({ seq, text });
    });
  }

  private finish(end: EngineEnd): void {
    if (this.finished) return;
    this.finished = true;
    this.wall.cancel();
    const tail = this.output.text();
    const last = lastLine(tail);
    const verdict = classify({ cancelled: this.cancelled, enforced: this.enforced, end, last_line: last, limits: this.spec.limits });
    this.resolveDone({ ...verdict, output_tail: tail, output_bytes: this.output.total, diff: this.diff(), commits: [...this.commits], summary: last });
  }

  /** git's new-file diff for each file written (the twin's start is empty), bounded as the
   *  local box bounds its diff. */
  private diff(): string {
    let out = "";
    for (const name of [...this.files.keys()].sort()) {
      const f = this.files.get(name);
      if (!f) continue;
      out += `diff --git a/${name} b/${name}\nnew file mode 100644\n`;
      if (f.text === null) {
        out += `Binary files /dev/null and b/${name} differ\n`;
      } else if (f.text !== "") {
        const lines = f.text.replace(/\n$/, "").split("\n");
        out += `--- /dev/null\n+++ b/${name}\n@@ -0,0 +1${lines.length === 1 ? "" : `,${lines.length}`} @@\n${lines.map((l) => `+${l}\n`).join("")}`;
      }
      if (out.length > DIFF_BYTES_MAX) return `${out.slice(0, DIFF_BYTES_MAX)}\n… diff cut at ${DIFF_BYTES_MAX} bytes\n`;
    }
    return out;
  }
}

function sha(text: string): string {
  return createHash("sha1").update(text).digest("hex");
}
