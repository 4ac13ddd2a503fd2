// What a process has spent, read from /proc: the figures benches put beside wall time.
import { readFileSync } from "node:fs";

/** Clock ticks per second in /proc/PID/stat (USER_HZ, 100 on every Linux this runs on). */
const TICKS_PER_SECOND = 100;

/** A process's user + system CPU seconds (/proc/PID/stat fields 14 and 15). */
export function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /, "").split(" ");
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}

/** A process's resident set, in MiB (VmRSS of /proc/PID/status). */
export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : 0;
}
