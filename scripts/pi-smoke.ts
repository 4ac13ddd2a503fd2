// bun scripts/pi-smoke.ts [--binary dist/crewlet-linux-arm64] [--keep]
//
// The Raspberry Pi's binary, proven on an x86_64 CI box under qemu-user (run
// scripts/qemu-binfmt.sh first, as root): the compiled crewlet-linux-arm64 with its embedded
// arm64 nats-server runs the repository's crewlet.yaml (ports and store dir of its own),
// reaches /ready, holds its four agent seats, answers @ceo in #general on the offline
// provider, is killed -9 (its sidecar dies with it), restarts on the same store, and still
// has the reply, its seats and a working @ceo; then a SIGTERM drains it to exit 0. First,
// with the aarch64 handler disabled for a moment, the same binary must refuse to boot in
// words naming its sidecar's arch (nats_binary_not_executable), not sh's "Syntax error".
//
// Each step prints how long it took under emulation (never judged: timeouts are generous
// bounds, only there so a wedged run ends). Exit 1 when the binary cannot do any of it, with
// the node's log tail; .ci/run runs this after the build.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { z } from "zod";
import { brokerPaths } from "../src/broker/plan.ts";
import { isAlive, readPidFile } from "../src/broker/process.ts";
import { createLogger, streamSink } from "../src/log.ts";
import { freePort } from "../test/support/ports.ts";

const ROOT = resolve(import.meta.dir, "..");
const USAGE = "usage: bun scripts/pi-smoke.ts [--binary dist/crewlet-linux-arm64] [--keep]";
const argsSchema = z.strictObject({
  // Absolute: the node runs from its own work dir, and qemu given a path that is not there
  // exits 1 without a word (a relative --binary did exactly that).
  binary: z
    .string()
    .default(join(ROOT, "dist", "crewlet-linux-arm64"))
    .transform((p) => resolve(p)),
  keep: z.boolean().default(false).describe("keep the work dir (configs, stores, node logs)"),
});
const args = (() => {
  try {
    const { values } = parseArgs({ options: { binary: { type: "string" }, keep: { type: "boolean" } }, strict: true });
    return argsSchema.parse(values);
  } catch (err) {
    console.error(`scripts/pi-smoke: ${(err as Error).message}\n${USAGE}`);
    process.exit(2);
  }
})();

const log = createLogger({ sinks: [streamSink(2, "text")], fields: { arch: "arm64" } });

/** Under emulation a boot took 5–7 s on a 2-core box; a loaded CI box gets thirty times that. */
const READY_WITHIN_MS = 180_000;
/** A scripted turn answered in ~1 s under emulation. */
const REPLY_WITHIN_MS = 120_000;
/** The first sweep claims ≤ 4 seats every 5 s; the root company has four. */
const SEATS_WITHIN_MS = 120_000;
/** The node's stop is bounded at 42 s (README, "A drain is bounded"); emulation gets room. */
const EXIT_WITHIN_MS = 120_000;
/** setpriv --pdeathsig: the kernel kills the sidecar as the node dies; this only bounds the wait. */
const SIDECAR_GONE_WITHIN_MS = 30_000;
const POLL_MS = 200;
const AGENT_SEATS = ["ceo", "cto", "engineer", "pm"];
/** Debian's aarch64 loader and libc (libc6-arm64-cross): the Bun runtime in the binary is dynamically linked. */
const QEMU_LD_PREFIX = "/usr/aarch64-linux-gnu";
const BINFMT_HANDLER = "/proc/sys/fs/binfmt_misc/qemu-aarch64";

class SmokeFailure extends Error {}

const work = mkdtempSync(join(tmpdir(), "crewlet-pi-smoke-"));
const storeDir = join(work, "store");
let apiUrl = "";
let configFile = "";

async function until<T>(what: string, within_ms: number, check: () => Promise<T | null | undefined | false>): Promise<T> {
  const deadline = performance.now() + within_ms;
  for (;;) {
    const v = await check().catch(() => null);
    if (v) return v;
    if (performance.now() > deadline) throw new SmokeFailure(`timed out after ${within_ms} ms waiting for ${what}`);
    await Bun.sleep(POLL_MS);
  }
}

async function timed<T>(step: string, fn: () => Promise<T>, fields: (v: T) => Record<string, unknown> = () => ({})): Promise<T> {
  const t0 = performance.now();
  const v = await fn();
  log.info("pi_smoke_step", { step, took_ms: Math.round(performance.now() - t0), ...fields(v) });
  return v;
}

function token(): string {
  return readFileSync(join(storeDir, "api-token"), "utf8").trim();
}

async function api(path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${apiUrl}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${token()}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

interface Node {
  proc: ReturnType<typeof Bun.spawn>;
  logFile: string;
}

/** Runs the binary as a Pi would, exec'd straight: the kernel hands it to qemu through binfmt_misc. */
function startNode(label: string, argv0: string[] = []): Node {
  const logFile = join(work, `${label}.log`);
  const proc = Bun.spawn([...argv0, args.binary, "run", configFile], {
    cwd: work,
    stdin: "ignore",
    stdout: Bun.file(join(work, `${label}.out`)),
    stderr: Bun.file(logFile),
    env: { ...process.env, CREWLET_STORE: storeDir, QEMU_LD_PREFIX },
  });
  return { proc, logFile };
}

function tail(file: string, lines = 60): string {
  if (!existsSync(file)) return "(no log)";
  return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
}

async function exitOf(node: Node, within_ms: number): Promise<number> {
  // A cleared timer, not Bun.sleep: a pending sleep would keep this script alive after its verdict.
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), within_ms)));
  const code = await Promise.race([node.proc.exited, timedOut]);
  clearTimeout(timer);
  if (code === null) {
    node.proc.kill("SIGKILL");
    await node.proc.exited;
    throw new SmokeFailure(`the node did not exit within ${within_ms} ms`);
  }
  return code;
}

async function ready(): Promise<void> {
  await until("GET /ready = 200", READY_WITHIN_MS, async () => (await fetch(`${apiUrl}/ready`, { signal: AbortSignal.timeout(5_000) })).status === 200);
}

async function seatsHeld(): Promise<string[]> {
  return until(`the agent seats ${AGENT_SEATS.join(", ")} held`, SEATS_WITHIN_MS, async () => {
    const held: string[] = (await api("/health")).json?.seats?.held ?? [];
    return AGENT_SEATS.every((s) => held.includes(s)) ? [...held].sort() : null;
  });
}

async function generalMessages(): Promise<any[]> {
  return (await api("/chat/channels/general/messages")).json?.messages ?? [];
}

/** Posts a mention of @ceo to #general and waits for the CEO's answer in its thread. */
async function askCeo(text: string): Promise<{ messageId: string; reply: any }> {
  const posted = await api("/chat/channels/general/messages", { body: `@ceo ${text}`, author: "founder" });
  if (posted.status !== 200 && posted.status !== 202) throw new SmokeFailure(`POST #general answered ${posted.status}: ${JSON.stringify(posted.json)}`);
  const messageId: string = posted.json.message_id;
  const reply = await until(`@ceo's reply to "${text}"`, REPLY_WITHIN_MS, async () =>
    (await generalMessages()).find((m) => m.thread_parent === messageId && m.author === "ceo"),
  );
  return { messageId, reply };
}

/** Turns the aarch64 handler off or on: as root directly, else through sudo (CI may be either). */
function setHandler(on: boolean): void {
  const value = on ? "1" : "0";
  if (process.getuid?.() === 0) {
    writeFileSync(BINFMT_HANDLER, value);
    return;
  }
  const r = Bun.spawnSync(["sudo", "-n", "sh", "-c", `echo ${value} > ${BINFMT_HANDLER}`], { stdout: "inherit", stderr: "inherit" });
  if (r.exitCode !== 0) throw new SmokeFailure(`could not turn ${BINFMT_HANDLER} ${on ? "on" : "off"} (needs root or sudo)`);
}

/** The aarch64 handler off for one boot: the node (run by qemu directly) must name its sidecar's arch. */
async function refusesWithoutHandler(): Promise<void> {
  if (process.arch === "arm64") {
    log.info("pi_smoke_step", { step: "no_handler", skipped: "this machine runs aarch64 natively" });
    return;
  }
  if (!existsSync(BINFMT_HANDLER)) throw new SmokeFailure(`${BINFMT_HANDLER} is missing: run scripts/qemu-binfmt.sh first (as root)`);
  const qemu = Bun.which("qemu-aarch64-static");
  if (!qemu) throw new SmokeFailure("qemu-aarch64-static is not on PATH: run scripts/qemu-binfmt.sh first");
  setHandler(false);
  try {
    await timed("no_handler", async () => {
      const node = startNode("no-handler", [qemu]);
      const code = await exitOf(node, READY_WITHIN_MS);
      const text = readFileSync(node.logFile, "utf8");
      const named = /nats_binary_not_executable/.test(text) && /linux-arm64 \(aarch64, ELF machine 183\)/.test(text) && /binfmt_misc/.test(text);
      if (code !== 1 || !named) {
        const out = tail(node.logFile.replace(/\.log$/, ".out"), 15);
        throw new SmokeFailure(`without a binfmt_misc handler the node should exit 1 naming its sidecar as linux-arm64 (nats_binary_not_executable); it exited ${code}; its log (${text.length} bytes):\n${tail(node.logFile, 15)}\nits stdout:\n${out}`);
      }
      return code;
    }, (code) => ({ exit: code, said: "nats_binary_not_executable: linux-arm64 (aarch64, ELF machine 183)" }));
  } finally {
    setHandler(true);
    rmSync(storeDir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  if (!existsSync(args.binary)) throw new SmokeFailure(`${args.binary} is not built (bun run build.ts)`);
  const [apiPort, clientPort, monitorPort] = [await freePort(), await freePort(), await freePort()];
  apiUrl = `http://127.0.0.1:${apiPort}`;
  // The repository's file as shipped, on ports of its own so it never meets a real node.
  const yaml = readFileSync(join(ROOT, "crewlet.yaml"), "utf8")
    .replace("client_port: 4222", `client_port: ${clientPort}`)
    .replace("monitor_port: 8222", `monitor_port: ${monitorPort}`)
    .replace("port: 7700", `port: ${apiPort}`);
  configFile = join(work, "crewlet.yaml");
  writeFileSync(configFile, yaml);
  const t0 = performance.now();

  await refusesWithoutHandler();

  let node = startNode("boot-1");
  const nodes = [node];
  try {
    await timed("boot", ready, () => ({ note: "exec → /ready 200, first boot: extracts the sidecar" }));
    await timed("seats", seatsHeld, (held) => ({ held: held.join(",") }));
    const first = await timed("reply", () => askCeo("please make a plan for the Pi pilot"), (v) => ({ reply: v.reply.body }));
    if (!String(first.reply.body).includes("@cto")) throw new SmokeFailure(`@ceo answered without the plan's words: ${first.reply.body}`);

    const sidecar = readPidFile(brokerPaths(storeDir).pidFile);
    const sidecarPid = sidecar.ok && sidecar.value ? sidecar.value.pid : null;
    if (sidecarPid === null) throw new SmokeFailure(`no sidecar pid file at ${brokerPaths(storeDir).pidFile}`);
    await timed("kill9", async () => {
      node.proc.kill("SIGKILL");
      await exitOf(node, EXIT_WITHIN_MS);
      await until(`the sidecar (pid ${sidecarPid}) gone with its node`, SIDECAR_GONE_WITHIN_MS, async () => !isAlive(sidecarPid));
    }, () => ({ sidecar_pid: sidecarPid, note: "node killed, sidecar gone (pdeathsig)" }));

    node = startNode("boot-2");
    nodes.push(node);
    await timed("restart", ready, () => ({ note: "same store, sidecar already extracted" }));
    await timed("reply_kept", async () => {
      const replies = (await generalMessages()).filter((m) => m.thread_parent === first.messageId && m.author === "ceo");
      if (replies.length === 0) throw new SmokeFailure("after the restart, @ceo's reply is gone from #general");
      return replies.length;
    }, (n) => ({ ceo_replies_to_first: n }));
    await timed("seats_again", seatsHeld, (held) => ({ held: held.join(",") }));
    await timed("reply_again", () => askCeo("what do you remember?"), (v) => ({ reply: v.reply.body }));

    await timed("stop", async () => {
      node.proc.kill("SIGTERM");
      const code = await exitOf(node, EXIT_WITHIN_MS);
      if (code !== 0) throw new SmokeFailure(`SIGTERM: the node exited ${code}, not 0`);
      return code;
    }, (code) => ({ exit: code }));
    log.info("pi_smoke_passed", { took_ms: Math.round(performance.now() - t0), binary: args.binary });
  } catch (err) {
    for (const n of nodes) {
      if (n.proc.exitCode === null) n.proc.kill("SIGKILL");
    }
    const last = nodes[nodes.length - 1]!;
    console.error(`--- ${last.logFile} (tail) ---\n${tail(last.logFile)}`);
    throw err;
  }
}

try {
  await main();
} catch (err) {
  log.error("pi_smoke_failed", { error: (err as Error).message });
  process.exitCode = 1;
} finally {
  if (args.keep) log.info("pi_smoke_kept", { dir: work });
  else rmSync(work, { recursive: true, force: true });
}
