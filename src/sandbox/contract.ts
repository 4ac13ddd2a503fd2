// The sandbox box contract (spec: Seat Ownership § Fencing — "a detached run"; issue 31).
// A box is one coding run's process tree in its own work dir: an engine (a shell script or a
// coding CLI in agent mode) given a task, limits on everything it can spend, a question it
// may ask mid-run and wait on, and a result. Two providers implement it: local.ts (a real
// process tree under bubblewrap) and twin.ts (in-process, for the simulations).
// test/conformance/sandbox.ts holds both to one behaviour.
//
// A box knows nothing about seats, epochs or the broker: the supervisor (supervisor.ts)
// carries its questions and its result to the seat's control subject and its answers back.

/** Limits a run is held to; each default's reason is at its definition (config/sandbox.ts). */
export interface RunLimits {
  /** Wall time from start to the engine's exit: a wedged CLI must not hold a box for ever. */
  wall_seconds: number;
  /** CPU seconds of the process tree (RLIMIT_CPU on each process). */
  cpu_seconds: number;
  /** Address space per process, MiB (RLIMIT_AS). */
  memory_mb: number;
  /** Largest file the run may write, and the work dir's size checked while it runs, MiB. */
  disk_mb: number;
  /** Output kept: the tail of stdout+stderr, bytes; the rest is counted, not kept. */
  output_bytes: number;
}

export interface RunSpec {
  run_id: string;
  /** The engine's argv; `{task}` in any element is replaced by the task text. */
  command: string[];
  /** Environment of the engine (the seat's CLI key among it): never logged. */
  env: Record<string, string>;
  task: string;
  /** Cloned into the work dir before the engine starts; absent: an empty work dir (a git
   *  repository with one empty commit, so a diff and commits are still reported). */
  repo?: { url: string; ref?: string };
  /** The engine may reach the network (else it has none at all). */
  network: boolean;
  /** `bwrap`: the process tree runs in its own namespaces, the host read-only, the work
   *  dir the only writable path. `none`: a plain child process (a machine without
   *  bubblewrap whose operator said so). */
  isolation: "bwrap" | "none";
  limits: RunLimits;
  /** Host paths the box must not see at all (the node's store: its keys, its estate, the
   *  supervisors' credential), each covered by an empty tmpfs under bwrap. */
  hide?: string[];
}

export type RunOutcome = "succeeded" | "failed" | "limit" | "cancelled";

export interface RunResult {
  outcome: RunOutcome;
  /** The engine's exit code; null when it was killed (a limit, a cancel) or never started. */
  exit_code: number | null;
  /** Why, in words a person can act on ("wall time limit of 60 s reached — raise
   *  providers.sandbox.limits.wall_seconds"); "" when it succeeded. */
  reason: string;
  /** Last output_bytes of stdout and stderr, interleaved as written. */
  output_tail: string;
  /** Every byte the engine wrote to stdout and stderr, kept or not. */
  output_bytes: number;
  /** `git diff` of the work dir against where it started (uncommitted and committed), bounded. */
  diff: string;
  /** Commits made during the run, oldest first: "<sha> <subject>". */
  commits: string[];
  /** The last non-empty line the engine printed (a coding CLI's final words). */
  summary: string;
}

export interface Question {
  /** 1, 2, … in the order the engine asked. */
  seq: number;
  text: string;
}

export interface Box {
  readonly run_id: string;
  /** Where the engine works (the clone, or the empty repository). */
  readonly work_dir: string;
  /** Called for each question the engine asks; the engine waits until answer(seq). */
  onQuestion(cb: (q: Question) => void): void;
  /** Unblocks question `seq` with `text`. A second answer to one seq is ignored. */
  answer(seq: number, text: string): void;
  /** Ends the run (outcome "cancelled", the reason kept). Idempotent. */
  cancel(reason: string): void;
  /** Settles once with the result; never rejects (a box that could not start is "failed"). */
  readonly done: Promise<RunResult>;
}

export interface BoxProvider {
  readonly kind: "local" | "twin";
  /** Prepares the work dir under `dir` and starts the engine. Throws (naming the setting)
   *  only when the run cannot be tried at all: isolation required and missing, a repo that
   *  cannot be cloned. */
  open(spec: RunSpec, dir: string): Promise<Box>;
}
