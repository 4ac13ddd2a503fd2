// The operating-system half of never leaving an orphan: the pid file a sidecar leaves in
// the store dir, recognising our own nats-server in /proc, stopping a process that is not
// our child, and checking that nothing else already answers on our ports.
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { basename } from "node:path";
import { z } from "zod";
import type { Clock } from "../clock.ts";

const PidFileSchema = z.object({
  pid: z.number().int().positive(),
  binary: z.string(),
  config: z.string(),
});
export type PidFile = z.infer<typeof PidFileSchema>;

export function writePidFile(path: string, content: PidFile): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, JSON.stringify(content) + "\n", { mode: 0o600 });
  renameSync(tmp, path);
}

/** The pid file's content, or null when it is absent; a garbled one names its problem. */
export function readPidFile(path: string): { ok: true; value: PidFile | null } | { ok: false; error: string } {
  if (!existsSync(path)) return { ok: true, value: null };
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    return { ok: false, error: `pid file ${path} is not JSON: ${(err as Error).message}` };
  }
  const parsed = PidFileSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, error: `pid file ${path}: field ${issue?.path.join(".") || "(root)"}: ${issue?.message}` };
  }
  return { ok: true, value: parsed.data };
}

export function removePidFile(path: string): void {
  rmSync(path, { force: true });
}

/** argv of a live process, or null when it is gone (or a zombie, whose cmdline is empty). */
export function readCmdline(pid: number): string[] | null {
  try {
    const raw = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    if (raw === "") return null;
    return raw.replace(/\0$/, "").split("\0");
  } catch {
    return null;
  }
}

/**
 * Pure: is this argv our nats-server, started on our config? The config path lives in
 * our store dir, so a match cannot be another node's sidecar, and a pid the kernel has
 * since handed to an unrelated program does not match.
 */
export function isOurSidecar(argv: string[] | null, configFile: string): boolean {
  if (!argv || argv.length < 3) return false;
  if (!basename(argv[0]!).startsWith("nats-server")) return false;
  for (let i = 1; i < argv.length - 1; i++) {
    if (argv[i] === "-c" && argv[i + 1] === configFile) return true;
  }
  return false;
}

/** Alive and not a zombie: a zombie holds no port and no store lock. */
export function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}

const STOP_POLL_MS = 50;

/**
 * Stops a process that is not our child (we cannot wait() on it): SIGTERM, poll until it
 * is gone or grace_ms passes, then SIGKILL and poll again, also bounded. Returns how it
 * ended.
 */
export async function stopProcess(pid: number, clock: Clock, grace_ms: number): Promise<"exited" | "killed" | "stuck"> {
  const waitGone = async (budget_ms: number): Promise<boolean> => {
    const rounds = Math.ceil(budget_ms / STOP_POLL_MS);
    for (let i = 0; i < rounds; i++) {
      if (!isAlive(pid)) return true;
      await clock.sleep(STOP_POLL_MS);
    }
    return !isAlive(pid);
  };
  try {
    process.kill(pid, "SIGTERM");
  } catch {
    return "exited";
  }
  if (await waitGone(grace_ms)) return "exited";
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    return "killed";
  }
  return (await waitGone(grace_ms)) ? "killed" : "stuck";
}

/** A listener on all interfaces is probed through loopback. */
function probeHost(host: string): string {
  if (host === "0.0.0.0" || host === "") return "127.0.0.1";
  if (host === "::" || host === "[::]") return "::1";
  return host.replace(/^\[(.*)\]$/, "$1");
}

/** A refused or timed-out connect means nobody answers; the bound keeps a filtered port from stalling boot. */
const PROBE_TIMEOUT_MS = 500;

/** True when something accepts a TCP connection on host:port. */
export function portAnswers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ host: probeHost(host), port, timeout: PROBE_TIMEOUT_MS });
    const done = (answered: boolean) => {
      sock.removeAllListeners();
      sock.destroy();
      resolve(answered);
    };
    sock.once("connect", () => done(true));
    sock.once("timeout", () => done(false));
    sock.once("error", () => done(false));
  });
}
