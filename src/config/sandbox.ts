// company.providers.sandbox: where a seat's coding runs happen (src/sandbox/), and
// roles[].sandbox: which seats may start one, with which engines, and their own CLI keys.
// Defaults carry their reasons here; the machine check (bubblewrap present when isolation
// asks for it) is in sandboxMachineProblems, which `validate` and `run` share.
import { spawnSync } from "node:child_process";
import { z } from "zod";

/** A run that has not finished in half an hour is wedged more often than it is working:
 * a coding CLI's task is minutes, and a box held longer holds its disk and a seat's run. */
export const DEFAULT_WALL_SECONDS = 30 * 60;
/** CPU seconds: the wall bound on one core, so a run that spins is ended no later. */
export const DEFAULT_CPU_SECONDS = 30 * 60;
/** Address space per process: room for a CLI on Node.js and a compiler, and one run cannot
 * take a 4 GB Raspberry Pi from the node beside it. */
export const DEFAULT_MEMORY_MB = 2048;
/** Work dir and largest file: a clone of a mid-sized repository with its build output. */
export const DEFAULT_DISK_MB = 2048;
/** Output kept per run: the tail a person reads to see why; the rest is counted. 64 KiB
 * fits in a control message and a chat reply with room to spare. */
export const DEFAULT_OUTPUT_BYTES = 64 * 1024;
/** Runs one seat may have live at once: each is a process tree and a work dir on a box. */
export const DEFAULT_RUNS_PER_SEAT = 4;

export const limitsSchema = z.strictObject({
  wall_seconds: z.number().int().min(1).max(24 * 3600).default(DEFAULT_WALL_SECONDS).describe("Wall time from start to exit"),
  cpu_seconds: z.number().int().min(1).max(24 * 3600).default(DEFAULT_CPU_SECONDS).describe("CPU seconds per process"),
  memory_mb: z.number().int().min(64).max(1024 * 1024).default(DEFAULT_MEMORY_MB).describe("Address space per process, MiB"),
  disk_mb: z.number().int().min(1).max(1024 * 1024).default(DEFAULT_DISK_MB).describe("Work dir size and largest file, MiB"),
  output_bytes: z.number().int().min(1024).max(16 * 1024 * 1024).default(DEFAULT_OUTPUT_BYTES).describe("Output tail kept, bytes"),
});

/** `{task}` in an argv element is the task text; an engine that never names it gets no task. */
export const TASK_PLACEHOLDER = "{task}";

const engineSchema = z.strictObject({
  command: z
    .array(z.string().min(1))
    .min(1)
    .refine((argv) => argv.some((a) => a.includes(TASK_PLACEHOLDER)), `no argument names ${TASK_PLACEHOLDER}: the engine would never see its task`)
    .describe("argv; {task} is replaced by the task text"),
  env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "environment names are letters, digits and _"), z.string()).default({}),
});

/** A repository URL git can clone: https, ssh (scp-like too) or a local path. */
export const repoUrl = z
  .string()
  .min(1)
  .max(2048)
  .refine((u) => /^(https?:\/\/|ssh:\/\/|git:\/\/|file:\/\/|\/)/.test(u) || /^[\w.-]+@[\w.-]+:/.test(u), "not a repository URL git can clone (https://, ssh://, git@host:path, file:// or an absolute path)")
  .refine((u) => !/^-/.test(u), "a repository URL may not start with '-'");

export const repoSchema = z.strictObject({ url: repoUrl, ref: z.string().regex(/^[\w./-]{1,200}$/, "a branch or tag name").optional() });

export const sandboxProviderSchema = z.strictObject({
  type: z.literal("local").describe("Runs on the node that starts it, as a process tree that outlives the node process"),
  isolation: z.enum(["bwrap", "none"]).default("bwrap").describe("bwrap: bubblewrap namespaces, the host read-only; none: a plain process (only where bubblewrap cannot run)"),
  network: z.boolean().default(false).describe("Runs may reach the network (a seat may also allow it)"),
  repo: repoSchema.optional().describe("Cloned into every run's work dir unless the run names another"),
  limits: limitsSchema.default(limitsSchema.parse({})),
  engines: z.record(z.string().regex(/^[a-z0-9][a-z0-9_-]{0,31}$/, "engine names are lower-case letters, digits, _ and -"), engineSchema).refine((e) => Object.keys(e).length > 0, "name at least one engine"),
});
export type SandboxProviderConfig = z.output<typeof sandboxProviderSchema>;

export const roleSandboxSchema = z.strictObject({
  engines: z.array(z.string().min(1)).min(1).optional().describe("Engines this seat may run (default: every engine)"),
  network: z.boolean().optional().describe("Overrides providers.sandbox.network for this seat"),
  env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string()).default({}).describe("The seat's own CLI keys (e.g. ANTHROPIC_API_KEY): never logged"),
  max_runs: z.number().int().min(1).max(64).default(DEFAULT_RUNS_PER_SEAT).describe("Runs this seat may have live at once"),
});
export type RoleSandbox = z.output<typeof roleSandboxSchema>;

export interface SandboxProblem {
  path: (string | number)[];
  message: string;
}

/** Cross-field rules: a seat naming an engine that does not exist, or a sandbox without a provider. */
export function sandboxReferenceProblems(provider: SandboxProviderConfig | undefined, roles: readonly { sandbox?: RoleSandbox; kind: string }[]): SandboxProblem[] {
  const out: SandboxProblem[] = [];
  roles.forEach((r, i) => {
    if (!r.sandbox) return;
    if (!provider) {
      out.push({ path: ["roles", i, "sandbox"], message: "no providers.sandbox is configured for this seat's runs" });
      return;
    }
    if (r.kind !== "agent") out.push({ path: ["roles", i, "sandbox"], message: "a human seat runs no sandbox" });
    (r.sandbox.engines ?? []).forEach((e, j) => {
      if (!(e in provider.engines)) out.push({ path: ["roles", i, "sandbox", "engines", j], message: `unknown engine "${e}" (providers.sandbox.engines has ${Object.keys(provider.engines).join(", ")})` });
    });
  });
  return out;
}

/** Whether bubblewrap can make its namespaces on this machine (null: it can), in words. */
export function bwrapProblem(bin = "bwrap"): string | null {
  const r = spawnSync(bin, ["--ro-bind", "/", "/", "--dev", "/dev", "--unshare-all", "--die-with-parent", "true"], { stdio: "pipe", timeout: 10_000 });
  if (r.error) return (r.error as NodeJS.ErrnoException).code === "ENOENT" ? "bubblewrap (bwrap) is not installed — apt install bubblewrap, or set isolation: none" : `bubblewrap could not run: ${r.error.message}`;
  if (r.status !== 0) return `bubblewrap cannot create its namespaces here (${r.stderr.toString().trim().slice(0, 200)}) — allow unprivileged user namespaces, or set isolation: none`;
  return null;
}
