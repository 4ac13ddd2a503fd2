// The local box provider: one coding run as a real process tree on this machine, in its own
// directory, under bubblewrap (or, when the operator said so, a plain process group), held
// to its limits, its questions carried through files, its result read with git.
//
//   <dir>/            0700, the caller's to keep or delete after `done`
//     work/           the clone or the empty repository: the engine's cwd
//     home/           the engine's HOME
//     control/bin/    crewlet-ask (read-only inside)
//     control/questions/  <seq>.q, <seq>.a (the engine's to write)
//     control/scratch/    git's scratch index while the result is read
//
// The argv, env, outcome and output rules are pure (box-argv.ts, box-outcome.ts,
// box-output.ts); this file is the I/O around them.
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { systemClock, type Clock, type Timer } from "../clock.ts";
import {
  boxEnv,
  bwrapArgv,
  controlPaths,
  engineArgv,
  commandFilesUnderTmp,
  engineMounts,
  limitArgv,
  MERGE_STDERR,
  resultMounts,
  type BoxPaths,
  type BwrapFeatures,
} from "./box-argv.ts";
import { killGroup, runBounded } from "./box-exec.ts";
import { GIT_STEP_TIMEOUT_MS, prepareWork, readResult, type BoxedRunner, type GitHost, type WorkResult } from "./box-git.ts";
import { classify, type EngineEnd, type EnforcedLimit } from "./box-outcome.ts";
import { lastLine, OutputTail } from "./box-output.ts";
import { ASK_SCRIPT, QUESTION_POLL_MS, QuestionBoard, QuestionFiles } from "./box-questions.ts";
import type { Box, BoxProvider, Question, RunResult, RunSpec } from "./contract.ts";

/** After SIGTERM the tree gets this long to exit before SIGKILL: enough for a CLI to flush
 *  a line saying it was stopped, short enough that a cancel is felt as immediate. */
export const KILL_GRACE_MS = 3000;

/** How often the box's size is measured against disk_mb. du's cost grows with the file
 *  count, so not more often than this; a run writes at most a few seconds' worth of disk
 *  past the limit (and never one file past it: RLIMIT_FSIZE holds that). */
export const DISK_CHECK_INTERVAL_MS = 5000;

/** One du that takes longer is abandoned (a tree of millions of files): the check is skipped
 *  that round, and the file-size limit and wall time still hold. */
const DU_TIMEOUT_MS = 30_000;

/** After the engine exits, its pipes get this long to close once its tree is killed. */
const PIPE_CLOSE_WAIT_MS = 2000;

/** bwrap's probe and --help answer at once; a bwrap that does not is as good as missing. */
const BWRAP_PROBE_TIMEOUT_MS = 10_000;
const BWRAP_HELP_BYTES_MAX = 64 * 1024;

export interface LocalBoxOptions {
  clock?: Clock;
  /** bwrap to use: a name looked up on `path`, or a path. */
  bwrap?: string;
  prlimit?: string;
  git?: string;
  du?: string;
  /** Where tools are looked up, and the engine's PATH when the seat's env has none.
   *  Default: this process's PATH (a path list, not a secret). */
  path?: string;
  disk_check_interval_ms?: number;
}

function which(cmd: string, path: string | undefined): string | null {
  if (cmd.includes("/")) return existsSync(cmd) ? cmd : null;
  return Bun.which(cmd, { PATH: path ?? "" });
}

function isolationError(why: string): Error {
  return new Error(
    `providers.sandbox.isolation is "bwrap" but bubblewrap cannot isolate a run on this machine (${why}). ` +
      `Install bubblewrap (apt-get install bubblewrap) and allow user namespaces, ` +
      `or set providers.sandbox.isolation: none to run engines without isolation.`,
  );
}

export class LocalBoxProvider implements BoxProvider {
  readonly kind = "local" as const;
  private readonly clock: Clock;
  private readonly path: string | undefined;
  /** bwrap's features once a probe has worked: a failure is not cached, so an operator who
   *  installs bubblewrap needs no restart. */
  private bwrap_ready: { bwrap: string; features: BwrapFeatures } | null = null;

  constructor(private readonly opts: LocalBoxOptions = {}) {
    this.clock = opts.clock ?? systemClock;
    this.path = opts.path ?? process.env.PATH;
  }

  async open(spec: RunSpec, dir: string): Promise<Box> {
    if (spec.command.length === 0) throw new Error("the run's command is empty: set the engine's command");
    const bwrap = spec.isolation === "bwrap" ? await this.bwrap() : null;
    const prlimit = which(this.opts.prlimit ?? "prlimit", this.path);
    if (!prlimit) throw new Error("prlimit (util-linux) is not installed: it holds a run to providers.sandbox.limits");
    const git = which(this.opts.git ?? "git", this.path);
    if (!git) throw new Error("git is not installed: a run's work dir is a git repository");

    const root = resolve(dir);
    const paths: BoxPaths = { dir: root, work: join(root, "work"), control: join(root, "control"), home: join(root, "home") };
    mkdirSync(root, { recursive: true, mode: 0o700 });
    chmodSync(root, 0o700);
    if (readdirSync(root).length > 0) throw new Error(`the box directory ${root} is not empty`);
    const c = controlPaths(paths);
    for (const d of [paths.control, c.bin, c.questions, paths.home]) mkdirSync(d, { recursive: true, mode: 0o700 });
    writeFileSync(join(c.bin, "crewlet-ask"), ASK_SCRIPT, { mode: 0o755 });

    const host: GitHost = { git, paths, host_path: this.path, clock: this.clock };
    const start = await prepareWork(host, spec.run_id, spec.repo);

    const inner = [...MERGE_STDERR, ...limitArgv(prlimit, spec.limits), ...engineArgv(spec.command, spec.task)];
    const commandFiles = commandFilesUnderTmp(spec.command, (f) => statSync(f, { throwIfNoEntry: false })?.isFile() ?? false);
    const argv = bwrap ? [...bwrapArgv(bwrap.bwrap, spec, engineMounts(paths, commandFiles), bwrap.features), ...inner] : inner;
    const runGit: BoxedRunner = (git_argv, env, stdout_bytes_max) =>
      runBounded(bwrap ? [...bwrapArgv(bwrap.bwrap, { network: false, limits: spec.limits, hide: spec.hide }, resultMounts(paths), bwrap.features), ...git_argv] : git_argv, {
        env,
        cwd: paths.work,
        timeout_ms: GIT_STEP_TIMEOUT_MS,
        stdout_bytes_max,
        clock: this.clock,
      });
    return new LocalBox(spec, paths, argv, boxEnv(spec, paths, this.path), {
      clock: this.clock,
      du: which(this.opts.du ?? "du", this.path),
      disk_check_interval_ms: this.opts.disk_check_interval_ms ?? DISK_CHECK_INTERVAL_MS,
      readResult: () => readResult(host, start, runGit),
    });
  }

  /** bwrap found, its features read, and one empty box made and run. */
  private async bwrap(): Promise<{ bwrap: string; features: BwrapFeatures }> {
    if (this.bwrap_ready) return this.bwrap_ready;
    const name = this.opts.bwrap ?? "bwrap";
    const bwrap = which(name, this.path);
    if (!bwrap) throw isolationError(`${name} was not found`);
    const env = { PATH: this.path ?? "/usr/bin:/bin" };
    const help = await runBounded([bwrap, "--help"], { env, timeout_ms: BWRAP_PROBE_TIMEOUT_MS, stdout_bytes_max: BWRAP_HELP_BYTES_MAX, clock: this.clock });
    const text = help.stdout + help.stderr;
    const features: BwrapFeatures = { cap_drop: text.includes("--cap-drop"), tmpfs_size: text.includes("--size") };
    const probe = await runBounded(
      [bwrap, "--die-with-parent", "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--", "/bin/sh", "-c", ":"],
      { env, timeout_ms: BWRAP_PROBE_TIMEOUT_MS, stdout_bytes_max: BWRAP_HELP_BYTES_MAX, clock: this.clock },
    );
    if (probe.code !== 0) {
      const why = probe.spawn_error ?? (probe.timed_out ? "it did not answer" : lastLine(probe.stderr) || `it exited with code ${probe.code}`);
      throw isolationError(`${bwrap}: ${why}`);
    }
    this.bwrap_ready = { bwrap, features };
    return this.bwrap_ready;
  }
}

interface LocalBoxDeps {
  clock: Clock;
  du: string | null;
  disk_check_interval_ms: number;
  readResult: () => Promise<WorkResult>;
}

class LocalBox implements Box {
  readonly run_id: string;
  readonly work_dir: string;
  readonly done: Promise<RunResult>;
  private resolveDone!: (r: RunResult) => void;
  private readonly output: OutputTail;
  private readonly board = new QuestionBoard();
  private readonly files: QuestionFiles;
  private readonly child: ChildProcess;
  private readonly timers: Timer[] = [];
  private cancelled: string | null = null;
  private enforced: EnforcedLimit | null = null;
  /** The engine's end once seen: from then on nothing changes the outcome. */
  private end: EngineEnd | null = null;
  private stopping = false;
  private measuring = false;

  constructor(
    private readonly spec: RunSpec,
    private readonly paths: BoxPaths,
    argv: string[],
    env: Record<string, string>,
    private readonly deps: LocalBoxDeps,
  ) {
    this.run_id = spec.run_id;
    this.work_dir = paths.work;
    this.done = new Promise((r) => (this.resolveDone = r));
    this.output = new OutputTail(spec.limits.output_bytes);
    this.files = new QuestionFiles(controlPaths(paths).questions);
    const [cmd, ...args] = argv;
    // Its own process group (setsid): the whole tree is signalled at once.
    this.child = spawn(cmd ?? "", args, { env, cwd: paths.work, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    this.child.stdout?.on("data", (d: Buffer) => this.output.push(d));
    this.child.stderr?.on("data", (d: Buffer) => this.output.push(d));
    this.child.on("error", (err) => this.ended({ kind: "not_started", error: err.message }));
    this.child.on("exit", (code, signal) => this.ended({ kind: "exited", code, signal }));
    const { clock } = deps;
    this.timers.push(clock.setTimeout(() => this.stop({ kind: "wall" }, null), spec.limits.wall_seconds * 1000));
    this.timers.push(clock.setInterval(() => this.pollQuestions(), QUESTION_POLL_MS));
    if (deps.du) this.timers.push(clock.setInterval(() => void this.measureDisk(), deps.disk_check_interval_ms));
  }

  onQuestion(cb: (q: Question) => void): void {
    this.board.listen(cb);
  }

  answer(seq: number, text: string): void {
    if (this.end) return;
    if (!this.board.take(seq)) return;
    try {
      this.files.answer(seq, text);
    } catch {
      // The box is going away: the run ends without the answer, as it would have anyway.
    }
  }

  cancel(reason: string): void {
    this.stop(null, reason);
  }

  /** Ends the tree for a limit or a cancel; the first of them is the one reported. */
  private stop(limit: EnforcedLimit | null, cancel_reason: string | null): void {
    if (this.end || this.stopping) return;
    this.stopping = true;
    this.enforced = limit;
    this.cancelled = cancel_reason;
    killGroup(this.child.pid, "SIGTERM");
    this.timers.push(this.deps.clock.setTimeout(() => killGroup(this.child.pid, "SIGKILL"), KILL_GRACE_MS));
  }

  private pollQuestions(): void {
    if (this.end) return;
    try {
      for (const q of this.files.poll()) this.board.ask(q);
    } catch {
      // An unreadable question file is skipped this round and tried again on the next.
    }
  }

  private async measureDisk(): Promise<void> {
    if (this.end || this.measuring || !this.deps.du) return;
    this.measuring = true;
    try {
      const r = await runBounded([this.deps.du, "-s", "-k", "-x", this.paths.dir], {
        env: { PATH: "/usr/bin:/bin", LC_ALL: "C" },
        timeout_ms: DU_TIMEOUT_MS,
        stdout_bytes_max: 4096,
        clock: this.deps.clock,
      });
      // du exits 1 when a file vanished while it counted: its total still stands.
      const kib = Number.parseInt(r.stdout, 10);
      if (Number.isFinite(kib) && kib > this.spec.limits.disk_mb * 1024) {
        this.stop({ kind: "disk", used_mb: Math.ceil(kib / 1024) }, null);
      }
    } finally {
      this.measuring = false;
    }
  }

  private ended(end: EngineEnd): void {
    if (this.end) return;
    this.end = end;
    for (const t of this.timers) t.cancel();
    // Whatever the engine left running in its group goes with it (under bwrap the whole pid
    // namespace already went with the engine).
    killGroup(this.child.pid, "SIGKILL");
    void this.finish(end);
  }

  private async finish(end: EngineEnd): Promise<void> {
    try {
      await this.pipesClosed();
      const tail = this.output.text();
      const last = lastLine(tail);
      let work: WorkResult = { diff: "", commits: [] };
      try {
        work = await this.deps.readResult();
      } catch {
        // The result is reported without a diff rather than not at all.
      }
      const verdict = classify({ cancelled: this.cancelled, enforced: this.enforced, end, last_line: last, limits: this.spec.limits });
      this.resolveDone({ ...verdict, output_tail: tail, output_bytes: this.output.total, diff: work.diff, commits: work.commits, summary: last });
    } catch (err) {
      this.resolveDone({
        outcome: "failed",
        exit_code: null,
        reason: `the box could not report its result: ${(err as Error).message}`,
        output_tail: "",
        output_bytes: this.output.total,
        diff: "",
        commits: [],
        summary: "",
      });
    }
  }

  private pipesClosed(): Promise<void> {
    const pipes = [this.child.stdout, this.child.stderr].filter((p) => p && !p.closed);
    if (pipes.length === 0) return Promise.resolve();
    return new Promise((resolveClosed) => {
      let open = pipes.length;
      const timer = this.deps.clock.setTimeout(() => {
        for (const p of pipes) p?.destroy();
        resolveClosed();
      }, PIPE_CLOSE_WAIT_MS);
      for (const p of pipes) {
        p?.once("close", () => {
          open -= 1;
          if (open === 0) {
            timer.cancel();
            resolveClosed();
          }
        });
      }
    });
  }
}
