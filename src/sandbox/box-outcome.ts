// How a run ended, decided from what was seen: a pure function both providers share, so the
// twin and the real box word a limit, a cancel or a failure the same way. Every limit's
// reason names the exact setting a person raises.
import type { RunLimits, RunOutcome } from "./contract.ts";

/** A limit the box enforced itself (its own timer or disk check), as opposed to one the
 *  kernel enforced (RLIMIT_CPU, RLIMIT_FSIZE), which shows in how the engine died. */
export type EnforcedLimit = { kind: "wall" } | { kind: "disk"; used_mb: number } | { kind: "cpu" };

/** How the engine's process ended. bwrap reports a signal that killed the engine inside the
 *  box as exit code 128 + the signal's number, as a shell does. */
export type EngineEnd =
  | { kind: "exited"; code: number | null; signal: string | null }
  | { kind: "not_started"; error: string };

export interface EndFacts {
  /** The reason given to cancel(), when it came before the engine ended. */
  cancelled: string | null;
  enforced: EnforcedLimit | null;
  end: EngineEnd;
  last_line: string;
  limits: RunLimits;
}

export interface Verdict {
  outcome: RunOutcome;
  exit_code: number | null;
  reason: string;
}

const SIGXCPU = 24;
const SIGXFSZ = 25;
/** The shell convention for "killed by signal n" (bwrap and sh both report it so). */
const SIGNAL_EXIT_BASE = 128;

/** Words in a failure's last line that say an allocation failed: the memory limit is then
 *  the likely cause, though the kernel gives no signal that says so. */
const OUT_OF_MEMORY = /cannot allocate memory|out of memory|bad_alloc|heap out of memory|MemoryError/i;

export function wallLimitReason(limits: RunLimits): string {
  return `wall time limit of ${limits.wall_seconds} s reached — raise providers.sandbox.limits.wall_seconds`;
}

export function cpuLimitReason(limits: RunLimits): string {
  return `CPU time limit of ${limits.cpu_seconds} s reached — raise providers.sandbox.limits.cpu_seconds`;
}

export function diskLimitReason(limits: RunLimits, used_mb: number | null): string {
  const held = used_mb === null ? "a file reached it" : `the box held ${used_mb} MiB`;
  return `disk limit of ${limits.disk_mb} MiB reached (${held}) — raise providers.sandbox.limits.disk_mb`;
}

function withLine(text: string, last_line: string): string {
  return last_line === "" ? text : `${text}: ${last_line}`;
}

export function classify(f: EndFacts): Verdict {
  if (f.cancelled !== null) return { outcome: "cancelled", exit_code: null, reason: f.cancelled };
  if (f.enforced?.kind === "wall") return { outcome: "limit", exit_code: null, reason: wallLimitReason(f.limits) };
  if (f.enforced?.kind === "disk") return { outcome: "limit", exit_code: null, reason: diskLimitReason(f.limits, f.enforced.used_mb) };
  if (f.enforced?.kind === "cpu") return { outcome: "limit", exit_code: null, reason: cpuLimitReason(f.limits) };
  if (f.end.kind === "not_started") return { outcome: "failed", exit_code: null, reason: `the engine could not start: ${f.end.error}` };
  const { code, signal } = f.end;
  const killed_cpu = signal === "SIGXCPU" || code === SIGNAL_EXIT_BASE + SIGXCPU;
  const killed_fsize = signal === "SIGXFSZ" || code === SIGNAL_EXIT_BASE + SIGXFSZ;
  if (killed_cpu) return { outcome: "limit", exit_code: null, reason: cpuLimitReason(f.limits) };
  if (killed_fsize) return { outcome: "limit", exit_code: null, reason: diskLimitReason(f.limits, null) };
  if (code === 0) return { outcome: "succeeded", exit_code: 0, reason: "" };
  const memory = OUT_OF_MEMORY.test(f.last_line)
    ? ` (the memory limit of ${f.limits.memory_mb} MiB may be why — providers.sandbox.limits.memory_mb)`
    : "";
  if (code === null) {
    return { outcome: "failed", exit_code: null, reason: withLine(`the engine was killed by ${signal ?? "a signal"}`, f.last_line) + memory };
  }
  return { outcome: "failed", exit_code: code, reason: withLine(`the engine exited with code ${code}`, f.last_line) + memory };
}
