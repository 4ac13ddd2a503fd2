// Starting a run's supervisor: the crewlet executable itself in its `sandbox-supervise`
// mode, in a session of its own and with no parent-death signal, so a binary swap or a
// kill -9 of the node leaves the run going. What it needs is one file in the run's dir
// (0600, in the store's 0700 dir): the box spec, the seat's control subject, and how to
// reach the broker with the supervisors' credential.
import { spawn } from "node:child_process";
import { mkdirSync, openSync, closeSync, writeFileSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { z } from "zod";
import type { RunSpec } from "./contract.ts";
import { runIdSchema } from "./runs.ts";
import { decodeWith, type Decoded } from "./wire.ts";

/** Under the node's store: one dir per run (the supervisor's file and log, the box). */
export const RUNS_DIR = "runs";
export const SUPERVISOR_FILE = "supervisor.json";
export const SUPERVISOR_LOG = "supervisor.log";

const limits = z.strictObject({
  wall_seconds: z.number().int().min(1),
  cpu_seconds: z.number().int().min(1),
  memory_mb: z.number().int().min(1),
  disk_mb: z.number().int().min(1),
  output_bytes: z.number().int().min(1),
});

export const runSpecSchema = z.strictObject({
  run_id: runIdSchema,
  command: z.array(z.string().min(1)).min(1),
  env: z.record(z.string(), z.string()),
  task: z.string(),
  repo: z.strictObject({ url: z.string().min(1), ref: z.string().optional() }).optional(),
  network: z.boolean(),
  isolation: z.enum(["bwrap", "none"]),
  limits,
  hide: z.array(z.string().min(1)).optional(),
}) satisfies z.ZodType<RunSpec>;

export const supervisorFileSchema = z.strictObject({
  v: z.literal(1),
  seat: z.string().min(1),
  run_id: runIdSchema,
  control_subject: z.string().min(1),
  /** The runs bucket's key for this run (coord/bucket.ts encodeSlotKey of runKey). */
  record_key: z.string().min(1),
  runs_bucket: z.string().min(1),
  nats: z.strictObject({ servers: z.array(z.string().min(1)).min(1), user: z.string().optional(), pass: z.string().optional(), creds_file: z.string().optional() }),
  spec: runSpecSchema,
});
export type SupervisorFile = z.output<typeof supervisorFileSchema>;

export function runDir(storeDir: string, run_id: string): string {
  return join(resolve(storeDir), RUNS_DIR, run_id);
}

/** How this executable runs itself: the compiled binary alone, or bun with the entry script. */
export function selfCommand(): string[] {
  const main = Bun.main;
  return main.startsWith("/$bunfs/") ? [process.execPath] : [process.execPath, main];
}

export function readSupervisorFile(dir: string): Decoded<SupervisorFile> {
  return decodeWith(supervisorFileSchema, readFileSync(join(dir, SUPERVISOR_FILE)), "supervisor file");
}

/** Writes the run's file and starts its supervisor, detached; returns its pid. */
export function launchSupervisor(dir: string, file: SupervisorFile, command: string[] = selfCommand()): number {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(join(dir, SUPERVISOR_FILE), JSON.stringify(supervisorFileSchema.parse(file)), { mode: 0o600 });
  const out = openSync(join(dir, SUPERVISOR_LOG), "a", 0o600);
  try {
    const child = spawn(command[0]!, [...command.slice(1), "sandbox-supervise", dir], {
      detached: true,
      stdio: ["ignore", out, out],
      // Nothing of the node's environment: its secrets stay in the node.
      env: { PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin", LANG: "C.UTF-8" },
      cwd: dir,
    });
    child.unref();
    if (child.pid === undefined) throw new Error("the supervisor did not start");
    return child.pid;
  } finally {
    closeSync(out);
  }
}
