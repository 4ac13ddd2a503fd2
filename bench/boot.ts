// bun bench/boot.ts [--runs 5]
//
// Prints, for the compiled binaries in dist/ (build them first: bun run build.ts):
//   - size per arch, and the overhead over Bun's own runtime binary of the same version
//     (target ≤ 10 MB: the compressed sidecar plus our bundle; nats-server 2.15 compresses to
//     ~5 MB where 2.9 took ~3.9 MB);
//   - exec → GET /ready answering 200, for this machine's binary, on the repository's
//     crewlet.yaml with a temp store and free ports (target ≤ 1.5 s). The first boot on a
//     fresh store includes extracting the sidecar; later boots reuse it;
//   - idle RSS of the node and of its nats-server sidecar once ready.
// Figures only: nothing here passes or fails on time.
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { z } from "zod";
import { benchArgs, countFlag } from "./args.ts";
import { systemClock } from "../src/clock.ts";
import { brokerPaths } from "../src/broker/plan.ts";
import { readPidFile } from "../src/broker/process.ts";
import { freePort } from "../test/support/ports.ts";

const args = benchArgs("boot", "[--runs 5]", z.object({ runs: countFlag(5, 50) }));

const ROOT = join(import.meta.dir, "..");
const ARCHES = ["x64", "arm64"] as const;
/** Bun's npm package names its arm64 runtime "aarch64". */
const BUN_RUNTIME_NAME = { x64: "bun-linux-x64", arm64: "bun-linux-aarch64" } as const;
/** Long enough for a slow first boot, short enough that a broken /ready ends the bench. */
const READY_WITHIN_MS = 30_000;
/** Poll fine enough to resolve the 1.5 s target to ~1 %. */
const READY_POLL_MS = 10;
/** Idle means past the boot's own allocations settling. */
const IDLE_AFTER_MS = 3_000;
/** The node's own stop is bounded; this only keeps a wedged one from hanging the bench. */
const EXIT_WITHIN_MS = 30_000;

const MiB = 1024 * 1024;
const fmt = (bytes: number) => `${(bytes / MiB).toFixed(2)} MiB (${(bytes / 1e6).toFixed(2)} MB)`;

function bunRuntimePath(arch: (typeof ARCHES)[number]): string | null {
  if (arch === process.arch) return process.execPath;
  const cached = join(homedir(), ".bun", "install", "cache", `${BUN_RUNTIME_NAME[arch]}-v${Bun.version}`);
  return existsSync(cached) ? cached : null;
}

function sizes(): void {
  console.log(`binary sizes (Bun ${Bun.version} runtime as the baseline; target overhead ≤ 10 MB)`);
  for (const arch of ARCHES) {
    const bin = join(ROOT, "dist", `crewlet-linux-${arch}`);
    if (!existsSync(bin)) {
      console.log(`  ${arch}: dist/crewlet-linux-${arch} not built`);
      continue;
    }
    const size = statSync(bin).size;
    const runtime = bunRuntimePath(arch);
    const base = runtime ? statSync(runtime).size : null;
    const over = base === null ? "runtime not cached: overhead unknown" : `overhead ${fmt(size - base)} over ${fmt(base)}`;
    console.log(`  ${arch}: ${fmt(size)}; ${over}`);
  }
}

function rssBytes(pid: number): number | null {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

interface BootFigures {
  ready_ms: number;
  node_rss: number | null;
  sidecar_rss: number | null;
}

async function bootOnce(bin: string, configFile: string, storeDir: string, apiPort: number): Promise<BootFigures> {
  const t0 = performance.now();
  const proc = Bun.spawn([bin, "run", configFile], { stdin: "ignore", stdout: "ignore", stderr: "pipe", cwd: tmpdir() });
  const stderr = new Response(proc.stderr).text();
  let lastStatus = "no answer";
  let ready_ms: number | null = null;
  try {
    const rounds = Math.ceil(READY_WITHIN_MS / READY_POLL_MS);
    for (let i = 0; i < rounds && proc.exitCode === null; i++) {
      try {
        const res = await fetch(`http://127.0.0.1:${apiPort}/ready`, { signal: AbortSignal.timeout(1_000) });
        lastStatus = `${res.status} ${(await res.text()).slice(0, 200)}`;
        if (res.status === 200) {
          ready_ms = performance.now() - t0;
          break;
        }
      } catch {
        // not listening yet
      }
      await systemClock.sleep(READY_POLL_MS);
    }
    if (ready_ms === null) {
      proc.kill("SIGKILL");
      await proc.exited;
      throw new Error(`not ready within ${READY_WITHIN_MS} ms (exit ${proc.exitCode}; last /ready: ${lastStatus}); stderr tail: ${(await stderr).slice(-1500)}`);
    }
    await systemClock.sleep(IDLE_AFTER_MS);
    const pidFile = readPidFile(brokerPaths(storeDir).pidFile);
    const sidecarPid = pidFile.ok && pidFile.value ? pidFile.value.pid : null;
    return { ready_ms, node_rss: rssBytes(proc.pid), sidecar_rss: sidecarPid ? rssBytes(sidecarPid) : null };
  } finally {
    if (proc.exitCode === null) {
      proc.kill("SIGTERM");
      const deadline = new AbortController();
      await Promise.race([proc.exited, systemClock.sleep(EXIT_WITHIN_MS, deadline.signal).catch(() => undefined)]);
      deadline.abort();
      if (proc.exitCode === null) proc.kill("SIGKILL");
      await proc.exited;
    }
  }
}

async function boots(runs: number): Promise<void> {
  const arch = process.arch === "arm64" ? "arm64" : "x64";
  const bin = join(ROOT, "dist", `crewlet-linux-${arch}`);
  if (!existsSync(bin)) {
    console.log(`exec → /ready: dist/crewlet-linux-${arch} not built (bun run build.ts)`);
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), "crewlet-bench-boot-"));
  try {
    const storeDir = join(dir, "store");
    const apiPort = await freePort();
    const config = parse(readFileSync(join(ROOT, "crewlet.yaml"), "utf8")) as Record<string, Record<string, unknown>>;
    config.store = { ...config.store, dir: storeDir };
    config.api = { ...config.api, host: "127.0.0.1", port: apiPort };
    config.stream = { ...config.stream, client_port: await freePort(), monitor_port: await freePort() };
    config.logging = { ...config.logging, level: "warn" };
    const configFile = join(dir, "crewlet.yaml");
    writeFileSync(configFile, stringify(config));

    console.log(`exec → GET /ready = 200, dist/crewlet-linux-${arch}, ${runs} boots on one store (target ≤ 1.5 s)`);
    const warm: number[] = [];
    for (let i = 0; i < runs; i++) {
      const f = await bootOnce(bin, configFile, storeDir, apiPort);
      const label = i === 0 ? "first boot (extracts the sidecar)" : `boot ${i + 1}`;
      if (i > 0) warm.push(f.ready_ms);
      const node = f.node_rss === null ? "?" : fmt(f.node_rss);
      const side = f.sidecar_rss === null ? "?" : fmt(f.sidecar_rss);
      const total = f.node_rss !== null && f.sidecar_rss !== null ? fmt(f.node_rss + f.sidecar_rss) : "?";
      console.log(`  ${label}: ready in ${f.ready_ms.toFixed(0)} ms; idle RSS node ${node} + sidecar ${side} = ${total}`);
    }
    if (warm.length > 0) {
      warm.sort((a, b) => a - b);
      console.log(`  later boots: median ${warm[Math.floor(warm.length / 2)]!.toFixed(0)} ms, min ${warm[0]!.toFixed(0)} ms, max ${warm[warm.length - 1]!.toFixed(0)} ms`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

sizes();
await boots(args.runs);
