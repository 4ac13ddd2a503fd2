// One short helper command (git, du, a bwrap probe) run to completion with everything
// bounded: its time, the stdout kept, the stderr kept. It runs in its own process group so
// a timeout kills whatever it started too (a bwrap box, git's own children).
import { spawn } from "node:child_process";
import type { Clock } from "../clock.ts";
import { OutputTail } from "./box-output.ts";

/** stderr is only read for an error message: its last few KiB say what went wrong. */
const STDERR_TAIL_BYTES = 4096;

/** After the command exits, its pipes get this long to close: a grandchild that kept them
 *  open (and escaped the group kill) must not hold the caller. */
const PIPE_CLOSE_WAIT_MS = 2000;

export interface BoundedOptions {
  env: Record<string, string>;
  cwd?: string;
  timeout_ms: number;
  /** stdout beyond this is not kept: the command is killed and `truncated` set. */
  stdout_bytes_max: number;
  clock: Clock;
}

export interface BoundedRun {
  code: number | null;
  signal: string | null;
  stdout: string;
  /** stdout reached stdout_bytes_max and the command was stopped there. */
  truncated: boolean;
  stderr: string;
  timed_out: boolean;
  /** The command could not be started (not found, not executable). */
  spawn_error: string | null;
}

export function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

export function runBounded(argv: string[], opts: BoundedOptions): Promise<BoundedRun> {
  return new Promise((resolve) => {
    const [cmd, ...args] = argv;
    const chunks: Buffer[] = [];
    let kept = 0;
    let truncated = false;
    let timed_out = false;
    const stderr = new OutputTail(STDERR_TAIL_BYTES);
    let settled = false;
    const child = spawn(cmd ?? "", args, { env: opts.env, cwd: opts.cwd, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    const finish = (code: number | null, signal: string | null, spawn_error: string | null) => {
      if (settled) return;
      settled = true;
      timer.cancel();
      child.stdout?.destroy();
      child.stderr?.destroy();
      resolve({ code, signal, stdout: Buffer.concat(chunks).toString("utf8"), truncated, stderr: stderr.text(), timed_out, spawn_error });
    };
    const timer = opts.clock.setTimeout(() => {
      timed_out = true;
      killGroup(child.pid, "SIGKILL");
    }, opts.timeout_ms);
    child.stdout?.on("data", (d: Buffer) => {
      if (truncated) return;
      const room = opts.stdout_bytes_max - kept;
      if (d.length > room) {
        chunks.push(d.subarray(0, Math.max(0, room)));
        kept = opts.stdout_bytes_max;
        truncated = true;
        killGroup(child.pid, "SIGKILL");
        return;
      }
      chunks.push(d);
      kept += d.length;
    });
    child.stderr?.on("data", (d: Buffer) => stderr.push(d));
    child.on("error", (err) => finish(null, null, err.message));
    let open_pipes = (child.stdout ? 1 : 0) + (child.stderr ? 1 : 0);
    let exit: { code: number | null; signal: string | null } | null = null;
    const closed = () => {
      open_pipes -= 1;
      if (open_pipes === 0 && exit) finish(exit.code, exit.signal, null);
    };
    child.stdout?.once("close", closed);
    child.stderr?.once("close", closed);
    child.on("exit", (code, signal) => {
      exit = { code, signal };
      // Whatever the command left in its group goes with it.
      killGroup(child.pid, "SIGKILL");
      if (open_pipes === 0) return finish(code, signal, null);
      opts.clock.setTimeout(() => finish(code, signal, null), PIPE_CLOSE_WAIT_MS);
    });
  });
}
