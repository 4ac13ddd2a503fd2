// Processes of one run, found by the CREWLET_RUN_ID every box process carries in its
// environment: /proc shows them all, inside a bwrap pid namespace or not.
import { readdirSync, readFileSync } from "node:fs";

export function runProcesses(run_id: string): number {
  const marker = `CREWLET_RUN_ID=${run_id}\0`;
  let n = 0;
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/environ`, "latin1").includes(marker)) n += 1;
    } catch {
      // Gone while we looked, or a zombie with no environment: not running.
    }
  }
  return n;
}
