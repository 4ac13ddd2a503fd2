// bun bench/rss.ts [--arch x64|arm64] [--seats 20] [--max-concurrent 32] [--lease-ttl 45]
//                  [--idle-seconds 20] [--busy-seconds 60]
//
// Memory of the one-box company, as a Raspberry Pi would run it: the compiled binary
// (dist/crewlet-linux-<arch>; build it first) on the repository's crewlet.yaml with its
// company's roles replaced by --seats agent seats on the offline scripted provider, its own
// ports and a temp store. Prints the node's and its nats-server sidecar's RSS (VmRSS):
//   - idle: every seat held, no mail, after the boot's allocations settle (median and max
//     over --idle-seconds; target ≤ 150 MB node + sidecar with 20 seats on x64);
//   - busy: every seat running turns for --busy-seconds: rounds of one #general message to
//     each seat, the next round as soon as every seat answered in its thread (each answer is
//     a turn plus the seat's reflection call); max and last sample, rounds and turns a second;
//   - after: idle again once the load stops (what the node gives back).
// --arch arm64 on an x86_64 box runs under qemu through binfmt_misc (scripts/qemu-binfmt.sh
// first): qemu's own memory and its translated-code cache are in those figures, so they
// say what emulation costs, not what a Pi uses. Figures only: nothing passes or fails.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parse, stringify } from "yaml";
import { z } from "zod";
import { benchArgs, countFlag, wholeFlag } from "./args.ts";
import { brokerPaths } from "../src/broker/plan.ts";
import { readPidFile } from "../src/broker/process.ts";
import { freePort } from "../test/support/ports.ts";

const args = benchArgs(
  "rss",
  "[--arch x64|arm64] [--seats 20] [--max-concurrent 32] [--lease-ttl 45] [--idle-seconds 20] [--busy-seconds 60] [--log-level warn]",
  z.object({
    arch: z.enum(["x64", "arm64"]).default(process.arch === "arm64" ? "arm64" : "x64"),
    seats: countFlag(20, 500),
    "max-concurrent": wholeFlag(1, 4096).default(32),
    "lease-ttl": wholeFlag(1, 600).default(45),
    "idle-seconds": countFlag(20, 3_600),
    "busy-seconds": countFlag(60, 3_600),
    "log-level": z.enum(["debug", "info", "warn", "error"]).default("warn"),
  }),
);

const ROOT = resolve(import.meta.dir, "..");
const emulated = args.arch !== (process.arch === "arm64" ? "arm64" : "x64");
/** Emulation boots in ~6 s on 2 cores; this only ends a run that will never be ready. */
const READY_WITHIN_MS = emulated ? 300_000 : 60_000;
/** Claims go ≤ 4 a sweep (5 s): 20 seats take ~25 s; emulation gets room. */
const HELD_WITHIN_MS = emulated ? 600_000 : 180_000;
/** One round (every seat answers one message) bounds a wedged run, not a slow one. */
const ROUND_WITHIN_MS = emulated ? 300_000 : 120_000;
/** Past the boot's and the claims' own allocations before idle counts. */
const SETTLE_MS = 10_000;
const SAMPLE_MS = 1_000;
const POLL_MS = 250;
/** The node's own stop is bounded (42 s); this only keeps a wedged one from hanging the bench. */
const EXIT_WITHIN_MS = 120_000;
/** Debian's aarch64 loader and libc (libc6-arm64-cross): the arm64 Bun runtime is dynamically linked. */
const QEMU_LD_PREFIX = "/usr/aarch64-linux-gnu";

const MB = 1e6;
const mb = (bytes: number) => `${(bytes / MB).toFixed(1)} MB`;

function rssBytes(pid: number | null): number | null {
  if (pid === null) return null;
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

interface Sample {
  node: number;
  sidecar: number;
}

function summary(label: string, samples: Sample[], how: "median" | "last"): string {
  if (samples.length === 0) return `${label}: no samples`;
  const pick = (xs: number[]) => {
    const sorted = [...xs].sort((a, b) => a - b);
    return { mid: how === "median" ? sorted[Math.floor(sorted.length / 2)]! : xs[xs.length - 1]!, max: sorted[sorted.length - 1]! };
  };
  const node = pick(samples.map((s) => s.node));
  const side = pick(samples.map((s) => s.sidecar));
  const total = pick(samples.map((s) => s.node + s.sidecar));
  return (
    `${label} (${samples.length} samples, ${how} / max): node ${mb(node.mid)} / ${mb(node.max)}; ` +
    `sidecar ${mb(side.mid)} / ${mb(side.max)}; total ${mb(total.mid)} / ${mb(total.max)}`
  );
}

async function until<T>(what: string, within_ms: number, check: () => Promise<T | null | undefined | false>): Promise<T> {
  const deadline = performance.now() + within_ms;
  for (;;) {
    const v = await check().catch(() => null);
    if (v) return v;
    if (performance.now() > deadline) throw new Error(`timed out after ${within_ms} ms waiting for ${what}`);
    await Bun.sleep(POLL_MS);
  }
}

const bin = join(ROOT, "dist", `crewlet-linux-${args.arch}`);
if (!existsSync(bin)) {
  console.error(`bench/rss: ${bin} is not built (bun run build.ts)`);
  process.exit(1);
}
if (emulated && !existsSync("/proc/sys/fs/binfmt_misc/qemu-aarch64")) {
  console.error("bench/rss: --arch arm64 on this machine needs qemu in binfmt_misc: run scripts/qemu-binfmt.sh (as root)");
  process.exit(1);
}

const dir = mkdtempSync(join(tmpdir(), "crewlet-bench-rss-"));
const storeDir = join(dir, "store");
const apiPort = await freePort();
const url = `http://127.0.0.1:${apiPort}`;
const handles = Array.from({ length: args.seats }, (_, i) => `seat-${String(i + 1).padStart(2, "0")}`);

// The repository's company file, its provider and policies kept, its org replaced: N agent
// seats and the person who mentions them. No units: a unit's channel, project and space are
// records, not memory a seat holds.
const config = parse(readFileSync(join(ROOT, "crewlet.yaml"), "utf8")) as Record<string, any>;
config.node = { ...config.node, max_concurrent: args["max-concurrent"] };
config.store = { ...config.store, dir: storeDir };
config.api = { ...config.api, host: "127.0.0.1", port: apiPort };
config.stream = { ...config.stream, client_port: await freePort(), monitor_port: await freePort() };
config.coordination = { ...config.coordination, lease_ttl_seconds: args["lease-ttl"] };
config.logging = { ...config.logging, level: args["log-level"], format: "json" };
config.company = {
  ...config.company,
  roles: [
    ...handles.map((h) => ({ name: `Agent ${h}`, handle: h, goal: "Answer whoever asks, in their thread." })),
    { name: "Founder", handle: "founder", kind: "human" },
  ],
  units: [],
};
const configFile = join(dir, "crewlet.yaml");
writeFileSync(configFile, stringify(config));

const logFile = join(dir, "node.log");
const proc = Bun.spawn([bin, "run", configFile], {
  cwd: dir,
  stdin: "ignore",
  stdout: "ignore",
  stderr: Bun.file(logFile),
  env: { ...process.env, ...(emulated ? { QEMU_LD_PREFIX } : {}) },
});
const token = () => readFileSync(join(storeDir, "api-token"), "utf8").trim();
async function api(path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${url}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${token()}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  if (!res.ok) throw new Error(`${path} answered ${res.status}`);
  return res.json();
}

let sidecarPid: number | null = null;
function sample(): Sample | null {
  const node = rssBytes(proc.pid);
  const sidecar = rssBytes(sidecarPid);
  return node === null || sidecar === null ? null : { node, sidecar };
}

/** Samples every SAMPLE_MS until `done` resolves (or for `ms` when given a number). */
async function sampleWhile(done: Promise<unknown> | number): Promise<Sample[]> {
  const out: Sample[] = [];
  let finished = false;
  const end = typeof done === "number" ? Bun.sleep(done) : done;
  void end.then(
    () => (finished = true),
    () => (finished = true),
  );
  while (!finished) {
    const s = sample();
    if (s) out.push(s);
    await Promise.race([Bun.sleep(SAMPLE_MS), end.catch(() => undefined)]);
  }
  await end;
  return out;
}

/**
 * One round: a message to each seat at once, until each has answered in its thread. One
 * message per seat, not one naming them all: with fewer turn slots than seats, seats that
 * waited for a slot found that message "already completed" by the first seat's turn (the
 * completion ledger keys a chat message, not a seat's answer to it) and never answered.
 */
async function round(n: number): Promise<void> {
  const posted = await Promise.all(handles.map((h) => api("/chat/channels/general/messages", { body: `@${h} status of round ${n}?`, author: "founder" })));
  const waiting = new Map(posted.map((p, i) => [p.message_id as string, handles[i]!]));
  await until(`round ${n}: ${handles.length} answers`, ROUND_WITHIN_MS, async () => {
    const page = await api(`/chat/channels/general/messages?order=newest&limit=${Math.min(500, handles.length * 3 + 10)}`);
    for (const m of page.messages as any[]) if (waiting.get(m.thread_parent) === m.author) waiting.delete(m.thread_parent);
    return waiting.size === 0;
  });
}

try {
  console.log(
    `bench/rss: dist/crewlet-linux-${args.arch}${emulated ? " under qemu (binfmt_misc)" : ""}, ${args.seats} agent seats, ` +
      `max_concurrent ${args["max-concurrent"]}, lease_ttl ${args["lease-ttl"]} s`,
  );
  const t0 = performance.now();
  await until("GET /ready = 200", READY_WITHIN_MS, async () => (await fetch(`${url}/ready`, { signal: AbortSignal.timeout(5_000) })).status === 200);
  const readyMs = performance.now() - t0;
  const pid = readPidFile(brokerPaths(storeDir).pidFile);
  sidecarPid = pid.ok && pid.value ? pid.value.pid : null;
  await until(`all ${args.seats} seats held`, HELD_WITHIN_MS, async () => ((await api("/health")).seats?.held ?? []).length >= args.seats);
  console.log(`  boot: /ready in ${(readyMs / 1000).toFixed(1)} s, all seats held in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  await Bun.sleep(SETTLE_MS);
  console.log(`  ${summary("idle", await sampleWhile(args["idle-seconds"] * 1000), "median")}`);

  let rounds = 0;
  const busyStart = performance.now();
  const load = (async () => {
    while (performance.now() - busyStart < args["busy-seconds"] * 1000) await round(++rounds);
  })();
  const busy = await sampleWhile(load);
  const busyS = (performance.now() - busyStart) / 1000;
  console.log(`  ${summary("busy", busy, "last")}`);
  console.log(`    ${rounds} rounds in ${busyS.toFixed(1)} s: ${((rounds * args.seats) / busyS).toFixed(1)} answered mentions/s (each a turn and a reflection)`);

  await Bun.sleep(SETTLE_MS);
  console.log(`  ${summary("after", await sampleWhile(args["idle-seconds"] * 1000), "median")}`);
} catch (err) {
  console.error(`bench/rss: ${(err as Error).message} (work dir kept: ${dir})\n${readFileSync(logFile, "utf8").split("\n").slice(-20).join("\n")}`);
  process.exitCode = 1;
} finally {
  if (proc.exitCode === null) proc.kill("SIGTERM");
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([proc.exited, new Promise((r) => (timer = setTimeout(r, EXIT_WITHIN_MS)))]);
  clearTimeout(timer);
  if (proc.exitCode === null) proc.kill("SIGKILL");
  await proc.exited;
  // A failed run keeps its config, store and node log to look at.
  if (process.exitCode !== 1) rmSync(dir, { recursive: true, force: true });
}
