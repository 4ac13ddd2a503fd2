// git for a box: preparing the work dir (a clone, or an empty repository with one empty
// commit so there is always a start to diff against) and reading the result (the diff from
// the start, the commits since). Every invocation spells out its options: no user or system
// config, no pager, no hooks, no colour, fixed identity for the start commit.
//
// Reading the result never changes the repository: the engine's index is copied to a
// scratch index in the control dir's scratch/, `git add --all` fills that (new blobs go to a scratch
// object directory, the repository's own objects read through alternates), and the diff is
// the scratch index against the start commit — tracked edits, deletions and new untracked
// files alike, .gitignore honoured. The caller runs these inside the box: the repository's
// config is the engine's to write, and a filter or fsmonitor set there must not run on the host.
import { copyFileSync, lstatSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Clock } from "../clock.ts";
import { runBounded, type BoundedRun } from "./box-exec.ts";
import { controlPaths, type BoxPaths } from "./box-argv.ts";

/** A diff travels in one broker message to the seat (NATS's default max_payload is 1 MiB,
 *  shared with the output tail) and is read by a person in a thread: 256 KiB shows any
 *  reviewable change whole and says a bigger one was cut. */
export const DIFF_BYTES_MAX = 256 * 1024;

/** The commit list is for a person to read; a run that made more is summarised by its diff. */
export const COMMITS_MAX = 200;
const COMMITS_BYTES_MAX = 64 * 1024;

/** A clone of a big repository over a Pi's link can take minutes; one that takes ten is
 *  stuck (a dead remote that never closes), and the run fails naming the repository. */
export const CLONE_TIMEOUT_MS = 10 * 60_000;

/** Local git work on a finished run (init, add, diff, log) takes seconds even on a big
 *  repository; a minute means something is wrong, and the result goes without it. */
export const GIT_STEP_TIMEOUT_MS = 60_000;

/** `git rev-parse` and similar print a line; anything longer is not what we asked for. */
const SMALL_OUTPUT_BYTES = 4096;

/** Identity of the empty start commit: fixed so the start is the same on every node. */
const START_IDENTITY = {
  GIT_AUTHOR_NAME: "Crewlet",
  GIT_AUTHOR_EMAIL: "crewlet@localhost",
  GIT_COMMITTER_NAME: "Crewlet",
  GIT_COMMITTER_EMAIL: "crewlet@localhost",
};

/** `-c` options on every invocation: nothing from the environment decides how git behaves. */
export const GIT_CONFIG_ARGS = [
  "-c", "core.pager=cat",
  "-c", "color.ui=false",
  "-c", "core.hooksPath=/dev/null",
  "-c", "core.fsmonitor=false",
  "-c", "core.autocrlf=false",
  "-c", "core.quotePath=false",
  "-c", "commit.gpgsign=false",
  "-c", "init.defaultBranch=main",
  "-c", "advice.detachedHead=false",
  "-c", "protocol.ext.allow=never",
  "-c", "credential.helper=",
];

/** A predictable environment for git: no system or global config, no prompts (a clone that
 *  needs a password fails instead of waiting for one), C locale for parseable messages. */
export function gitEnv(home: string, host_path: string | undefined, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: host_path ?? "/usr/local/bin:/usr/bin:/bin",
    HOME: home,
    LANG: "C",
    LC_ALL: "C",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_TERMINAL_PROMPT: "0",
    GIT_PAGER: "cat",
    GIT_SSH_COMMAND: "ssh -o BatchMode=yes",
    ...extra,
  };
}

/** A URL as it may appear in a message: no user or password (a token lives there). */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/@]*@/i, "$1");
}

/** git's own words with any credential in a URL taken out, and the given secret too. */
export function scrubSecrets(text: string, url: string): string {
  let out = text.split(url).join(redactUrl(url));
  out = out.replace(/([a-z][a-z0-9+.-]*:\/\/)[^/@\s]*@/gi, "$1");
  const m = /^[a-z][a-z0-9+.-]*:\/\/([^/@]*)@/i.exec(url);
  const userinfo = m?.[1] ?? "";
  for (const part of userinfo.split(":")) {
    if (part.length < 4) continue; // too short to be a secret, and would mangle the message
    out = out.split(part).join("***");
    try {
      out = out.split(decodeURIComponent(part)).join("***");
    } catch {
      // Not percent-encoded text: the raw form is already gone.
    }
  }
  return out;
}

function lastMessageLine(r: BoundedRun): string {
  if (r.spawn_error) return r.spawn_error;
  if (r.timed_out) return "it did not finish in time";
  const lines = r.stderr.split("\n").map((l) => l.trim()).filter((l) => l !== "");
  return lines.slice(-2).join(" ") || `git exited with code ${r.code ?? r.signal}`;
}

export interface GitHost {
  git: string;
  paths: BoxPaths;
  host_path: string | undefined;
  clock: Clock;
}

function hostGit(h: GitHost, args: string[], opts: { timeout_ms: number; extra_env?: Record<string, string> }): Promise<BoundedRun> {
  return runBounded([h.git, ...GIT_CONFIG_ARGS, ...args], {
    env: gitEnv(h.paths.home, h.host_path, opts.extra_env),
    timeout_ms: opts.timeout_ms,
    stdout_bytes_max: SMALL_OUTPUT_BYTES,
    clock: h.clock,
  });
}

/**
 * Makes the work dir: a clone of `repo` (at `ref` when given) or a new repository with one
 * empty commit. Returns the start commit. Throws an Error naming the repository (never its
 * credentials) and git's message when that cannot be done.
 */
export async function prepareWork(h: GitHost, run_id: string, repo: { url: string; ref?: string } | undefined): Promise<string> {
  const work = h.paths.work;
  if (repo) {
    const shown = redactUrl(repo.url);
    if (repo.ref?.startsWith("-")) throw new Error(`cannot clone ${shown}: the ref "${repo.ref}" is not a branch, tag or commit`);
    const clone = await hostGit(h, ["clone", "--quiet", ...(repo.ref ? ["--no-checkout"] : []), "--", repo.url, work], { timeout_ms: CLONE_TIMEOUT_MS });
    if (clone.code !== 0) throw new Error(`cannot clone ${shown}: ${scrubSecrets(lastMessageLine(clone), repo.url)}`);
    if (repo.ref) {
      const co = await hostGit(h, ["-C", work, "checkout", "--quiet", repo.ref, "--"], { timeout_ms: GIT_STEP_TIMEOUT_MS });
      if (co.code !== 0) throw new Error(`cannot check out ${repo.ref} of ${shown}: ${scrubSecrets(lastMessageLine(co), repo.url)}`);
    }
  } else {
    const init = await hostGit(h, ["init", "--quiet", "--initial-branch=main", "--", work], { timeout_ms: GIT_STEP_TIMEOUT_MS });
    if (init.code !== 0) throw new Error(`cannot create the run's repository: ${lastMessageLine(init)}`);
    const commit = await hostGit(h, ["-C", work, "commit", "--quiet", "--allow-empty", "--no-verify", "-m", `crewlet: start of run ${run_id}`], {
      timeout_ms: GIT_STEP_TIMEOUT_MS,
      extra_env: START_IDENTITY,
    });
    if (commit.code !== 0) throw new Error(`cannot create the run's repository: ${lastMessageLine(commit)}`);
  }
  const head = await hostGit(h, ["-C", work, "rev-parse", "--verify", "HEAD^{commit}"], { timeout_ms: GIT_STEP_TIMEOUT_MS });
  const sha = head.stdout.trim();
  if (head.code !== 0 || !/^[0-9a-f]{40,64}$/.test(sha)) throw new Error(`cannot read the start commit of the run's repository: ${lastMessageLine(head)}`);
  return sha;
}

/** Runs one git argv (already prefixed with the box, when there is one) with the env given. */
export type BoxedRunner = (argv: string[], env: Record<string, string>, stdout_bytes_max: number) => Promise<BoundedRun>;

export interface WorkResult {
  diff: string;
  commits: string[];
}

function truncatedNote(bytes: number): string {
  return `\n… diff cut at ${bytes} bytes\n`;
}

/** The diff and commits since `start`, without changing the repository (see the top). */
export async function readResult(h: GitHost, start: string, run: BoxedRunner): Promise<WorkResult> {
  const { work } = h.paths;
  const scratch = controlPaths(h.paths).scratch;
  const scratch_index = join(scratch, "result.index");
  const scratch_objects = join(scratch, "objects");
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch_objects, { recursive: true, mode: 0o700 });
  try {
    const index = join(work, ".git", "index");
    try {
      // Only a plain file in a plain .git: the engine owns both, and a link could point
      // anywhere on the host.
      if (lstatSync(join(work, ".git")).isDirectory() && lstatSync(index).isFile()) copyFileSync(index, scratch_index);
    } catch {
      // No index (a repository with nothing staged yet): add --all starts from empty.
    }
    const env = gitEnv(h.paths.home, h.host_path, {
      GIT_INDEX_FILE: scratch_index,
      GIT_OBJECT_DIRECTORY: scratch_objects,
      GIT_ALTERNATE_OBJECT_DIRECTORIES: join(work, ".git", "objects"),
    });
    const git = (args: string[]) => [h.git, ...GIT_CONFIG_ARGS, "-C", work, ...args];
    let diff = "";
    const add = await run(git(["add", "--all", "--", "."]), env, SMALL_OUTPUT_BYTES);
    if (add.code === 0) {
      const d = await run(git(["diff", "--cached", "--no-color", "--no-ext-diff", "--no-textconv", start, "--"]), env, DIFF_BYTES_MAX);
      diff = d.truncated ? d.stdout + truncatedNote(DIFF_BYTES_MAX) : d.code === 0 ? d.stdout : "";
    }
    const log = await run(git(["log", "--reverse", "--no-color", "--format=%h %s", `${start}..HEAD`, "--"]), env, COMMITS_BYTES_MAX);
    const commits = log.code === 0 || log.truncated ? log.stdout.split("\n").filter((l) => l.trim() !== "").slice(0, COMMITS_MAX) : [];
    return { diff, commits };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
