// The argv and environment a local box starts its engine with: pure functions from a spec and
// the box's paths, so every isolation and limit rule is a table test (test/sandbox/box-pure.test.ts).
//
// The engine runs as   bwrap <namespaces, mounts> -- sh -c 'exec "$@" 2>&1' crewlet-engine
//                        prlimit <limits> -- <engine argv>
// (without the bwrap part when isolation is "none"). prlimit sits inside the box so bwrap
// itself is not held to the engine's limits; the sh wrapper puts stderr on stdout's pipe so
// the output tail keeps them interleaved exactly as written.
import type { RunLimits, RunSpec } from "./contract.ts";

export interface BoxPaths {
  /** The box's own directory (0700): everything below is the run's. */
  dir: string;
  /** The engine's working tree: the clone or the empty repository. */
  work: string;
  /** Crewlet's side of the box: crewlet-ask in bin/ (read-only inside), the question and
   *  answer files in questions/ (the engine's to write), scratch/ for reading the result. The
   *  engine can never write control itself: the host reads and writes paths under it. */
  control: string;
  /** The engine's HOME: a coding CLI's settings land here, not in the work dir's diff. */
  home: string;
}

/** What this machine's bwrap can do (older releases lack both). */
export interface BwrapFeatures {
  cap_drop: boolean;
  tmpfs_size: boolean;
}

/** RLIMIT_CPU's hard limit sits this far above the soft one: at the soft limit the kernel
 *  sends SIGXCPU (which the box reports as the CPU limit), at the hard one SIGKILL, which
 *  could be anyone's kill. The gap gives SIGXCPU time to land first. */
export const CPU_HARD_GRACE_SECONDS = 5;

const MIB = 1024 * 1024;

/** PATH inside the box when the seat's env gives none: the node's own PATH (where an operator
 *  installed the coding CLI) is not a secret; without it, Debian's default. */
export const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** `{task}` in each element replaced by the task (every occurrence, text taken literally). */
export function engineArgv(command: string[], task: string): string[] {
  return command.map((arg) => arg.split("{task}").join(task));
}

/** prlimit's argv holding the engine to the run's limits. A core dump would land in the work
 *  dir (and the diff), so none is written. */
export function limitArgv(prlimit: string, limits: RunLimits): string[] {
  const cpu = Math.max(1, Math.ceil(limits.cpu_seconds));
  const as_bytes = Math.max(1, Math.floor(limits.memory_mb * MIB));
  const fsize_bytes = Math.max(1, Math.floor(limits.disk_mb * MIB));
  return [
    prlimit,
    `--cpu=${cpu}:${cpu + CPU_HARD_GRACE_SECONDS}`,
    `--as=${as_bytes}`,
    `--fsize=${fsize_bytes}`,
    "--core=0",
    "--",
  ];
}

/** Joins stderr to stdout for the engine, then execs it (no shell stays behind). */
export const MERGE_STDERR = ["/bin/sh", "-c", 'exec "$@" 2>&1', "crewlet-engine"];

/** What a box binds at the same path inside, and where its engine starts. */
export interface Mounts {
  /** Bound read-write at the same path. */
  rw: string[];
  /** Bound read-only at the same path (under /tmp they would otherwise be hidden). */
  ro: string[];
  chdir: string;
}

export function controlPaths(paths: BoxPaths): { bin: string; questions: string; scratch: string } {
  return { bin: `${paths.control}/bin`, questions: `${paths.control}/questions`, scratch: `${paths.control}/scratch` };
}

/** What the engine may write: its work dir, its HOME and the questions dir — each a mount
 *  point, which it cannot swap for a link to somewhere on the host. */
export function engineMounts(paths: BoxPaths, commandFiles: string[] = []): Mounts {
  const c = controlPaths(paths);
  return { rw: [paths.work, paths.home, c.questions], ro: [c.bin, ...commandFiles], chdir: paths.work };
}

/**
 * The files an engine's argv names by absolute path under /tmp, which the box's private /tmp
 * would otherwise hide (a script checked out there, a CLI unpacked there): each is bound
 * read-only at its own path. Everything else on the host is visible read-only already.
 */
export function commandFilesUnderTmp(argv: string[], isFile: (path: string) => boolean): string[] {
  return [...new Set(argv.filter((a) => (a === "/tmp" || a.startsWith("/tmp/")) && !a.includes("\0") && isFile(a)))];
}

/** What git may write while reading the result: the scratch index and objects, and the work
 *  dir (git refreshes its own lock files); never the questions. */
export function resultMounts(paths: BoxPaths): Mounts {
  return { rw: [paths.work, paths.home, controlPaths(paths).scratch], ro: [], chdir: paths.work };
}

/**
 * bwrap's argv up to and including "--": the host read-only, a private /tmp capped at the
 * disk limit, the hidden paths emptied, only the mounts' rw paths writable, every namespace
 * unshared (no network unless allowed), capabilities dropped, the tree dying with bwrap.
 */
export function bwrapArgv(bwrap: string, spec: Pick<RunSpec, "network" | "limits" | "hide">, mounts: Mounts, features: BwrapFeatures): string[] {
  const argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-all"];
  if (spec.network) argv.push("--share-net");
  argv.push("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc");
  if (features.tmpfs_size) argv.push("--size", String(Math.max(1, Math.floor(spec.limits.disk_mb * MIB))));
  argv.push("--tmpfs", "/tmp");
  // Hidden before the binds: the box's own dirs may sit beneath a hidden path (the store).
  for (const p of spec.hide ?? []) argv.push("--tmpfs", p);
  for (const p of mounts.rw) argv.push("--bind", p, p);
  for (const p of mounts.ro) argv.push("--ro-bind", p, p);
  argv.push("--chdir", mounts.chdir);
  if (features.cap_drop) argv.push("--cap-drop", "ALL");
  argv.push("--");
  return argv;
}

/**
 * The engine's whole environment: never the node's (its secrets), only a base, the seat's
 * env (the CLI's key among it) and the run's own names. crewlet-ask's bin dir goes first on
 * PATH; CREWLET_RUN_ID and CREWLET_CONTROL cannot be overridden.
 */
export function boxEnv(spec: Pick<RunSpec, "run_id" | "env">, paths: BoxPaths, host_path: string | undefined): Record<string, string> {
  const path = spec.env.PATH ?? host_path ?? DEFAULT_PATH;
  return {
    HOME: paths.home,
    LANG: "C.UTF-8",
    TMPDIR: "/tmp",
    ...spec.env,
    PATH: `${controlPaths(paths).bin}:${path}`,
    CREWLET_RUN_ID: spec.run_id,
    CREWLET_CONTROL: paths.control,
  };
}
