// Runs nats-server as a child process: stops a crashed predecessor's sidecar first, refuses
// ports someone else answers on, spawns the child so it dies with us even on kill -9,
// forwards its log, tells when it is ready, notices when it dies, and stops it on shutdown.
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import { whyNotExecutable } from "./exec-check.ts";
import { parseNatsLogLine, serverIdFrom } from "./nats-log.ts";
import { isOurSidecar, portAnswers, readCmdline, readPidFile, removePidFile, stopProcess, writePidFile } from "./process.ts";

export interface SidecarSpec {
  binary: string;
  configFile: string;
  pidFile: string;
  monitorPort: number;
  /** Every listener the config opens: each must be free before we start. */
  listeners: { name: string; host: string; port: number }[];
}

export interface Sidecar {
  pid: number;
  /** Resolves once /healthz?js-server-only answers 200 (a clustered member: once it is
   * current with a meta leader). */
  ready: Promise<void>;
  /** Why the sidecar is not ready yet (healthz's own words), or null once it is. */
  notReadyReason(): string | null;
  /** Resolves (never rejects) with the reason if the sidecar exits without stop(). */
  died: Promise<Error>;
  /** SIGTERM, a bounded wait, then SIGKILL. Idempotent. */
  stop(): Promise<void>;
}

export class BrokerError extends Error {
  override name = "BrokerError";
}

/** nats-server answers /varz within milliseconds of exec (the monitor starts before JetStream recovers). */
const OWNED_WITHIN_MS = 15_000;
/** Readiness poll: a member answers within ~100 ms; 25 ms keeps exec→ready short without spinning. */
const POLL_MS = 25;
/** JetStream flushes its store on SIGTERM; ten seconds covers a busy store, then SIGKILL. */
export const STOP_GRACE_MS = 10_000;
/** A wedged predecessor gets the same grace as our own child. */
const PREDECESSOR_GRACE_MS = STOP_GRACE_MS;
/** A SIGKILLed nats-server's leader thread reads as a zombie (so its pid reads as gone) while
 * its other threads are still exiting and holding the listening sockets; seen as a restart
 * right after a kill -9 refusing "another process answers" on its own ports. After a
 * predecessor of ours, the ports get this long to be let go before they count as foreign. */
const PREDECESSOR_PORT_RELEASE_MS = 5_000;
const PORT_RECHECK_MS = 50;
/** Kept for the death report: enough to show nats-server's own last words. */
const LAST_LINES = 20;
/** A log line longer than this is cut: one runaway line must not grow our memory. */
const MAX_LINE_CHARS = 8192;

/**
 * How the child is wrapped. setpriv --pdeathsig makes the kernel SIGKILL it when we die,
 * even by SIGKILL; setsid puts it in its own session so a terminal's Ctrl-C reaches only
 * us and the node can stop the sidecar last. Both exec in place, so the pid we hold is
 * nats-server's own.
 */
export function wrapperArgv(which: (cmd: string) => string | null): { argv: string[]; pdeathsig: boolean } {
  const setpriv = which("setpriv");
  const setsid = which("setsid");
  const argv: string[] = [];
  if (setsid) argv.push(setsid);
  if (setpriv) argv.push(setpriv, "--pdeathsig", "KILL", "--");
  return { argv, pdeathsig: setpriv !== null };
}

const SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const whichSystem = (cmd: string) => Bun.which(cmd, { PATH: `${process.env.PATH ?? ""}:${SYSTEM_PATH}` });

/** Stops a predecessor the pid file names; true when the file named one (stale or stopped),
 * so its ports may still be on their way to being released. */
async function stopPredecessor(spec: SidecarSpec, log: Logger, clock: Clock): Promise<boolean> {
  const read = readPidFile(spec.pidFile);
  if (!read.ok) {
    log.warn("nats_pidfile_unreadable", { path: spec.pidFile, error: read.error });
    removePidFile(spec.pidFile);
    return true;
  }
  const prev = read.value;
  if (!prev) return false;
  const argv = readCmdline(prev.pid);
  if (!isOurSidecar(argv, spec.configFile)) {
    // Gone, or the pid now belongs to some other program: nothing of ours to stop.
    log.info("nats_pidfile_stale", { pid: prev.pid });
    removePidFile(spec.pidFile);
    return true;
  }
  log.warn("nats_predecessor_found", { pid: prev.pid, config: spec.configFile });
  const how = await stopProcess(prev.pid, clock, PREDECESSOR_GRACE_MS);
  if (how === "stuck") throw new BrokerError(`a previous nats-server (pid ${prev.pid}) on ${spec.configFile} would not stop, even on SIGKILL`);
  log.info("nats_predecessor_stopped", { pid: prev.pid, how });
  removePidFile(spec.pidFile);
  return true;
}

async function busyListeners(spec: SidecarSpec) {
  const busy = await Promise.all(spec.listeners.map(async (l) => ((await portAnswers(l.host, l.port)) ? l : null)));
  return busy.filter((l) => l !== null);
}

async function refuseBusyPorts(spec: SidecarSpec, clock: Clock, release_ms: number): Promise<void> {
  let taken = await busyListeners(spec);
  for (let waited = 0; taken.length > 0 && waited < release_ms; waited += PORT_RECHECK_MS) {
    await clock.sleep(PORT_RECHECK_MS);
    taken = await busyListeners(spec);
  }
  if (taken.length > 0) {
    const names = taken.map((l) => `${l.name} ${l.host}:${l.port}`).join(", ");
    throw new BrokerError(`another process already answers on ${names}; it is not this node's nats-server (no pid file names it), so refusing to start beside it`);
  }
}

/** Reads a byte stream line by line, bounded per line, until it ends. */
async function forEachLine(stream: ReadableStream<Uint8Array>, onLine: (line: string) => void): Promise<void> {
  const decoder = new TextDecoder();
  let pending = "";
  for await (const chunk of stream) {
    pending += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = pending.indexOf("\n")) >= 0) {
      onLine(pending.slice(0, Math.min(nl, MAX_LINE_CHARS)));
      pending = pending.slice(nl + 1);
    }
    if (pending.length > MAX_LINE_CHARS) {
      onLine(pending.slice(0, MAX_LINE_CHARS));
      pending = "";
    }
  }
  if (pending !== "") onLine(pending);
}

async function fetchJson(url: string): Promise<{ status: number; body: unknown } | null> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // healthz answers JSON; anything else is reported as text
    }
    return { status: res.status, body };
  } catch {
    return null;
  }
}

export async function startSidecar(spec: SidecarSpec, deps: { log: Logger; clock: Clock }): Promise<Sidecar> {
  const { log, clock } = deps;
  mkdirSync(dirname(spec.pidFile), { recursive: true });
  const hadPredecessor = await stopPredecessor(spec, log, clock);
  await refuseBusyPorts(spec, clock, hadPredecessor ? PREDECESSOR_PORT_RELEASE_MS : 0);

  const wrap = wrapperArgv(whichSystem);
  if (!wrap.pdeathsig) {
    log.warn("nats_pdeathsig_unavailable", {
      detail: "setpriv (util-linux) not found: if this process is killed with SIGKILL the sidecar outlives it until the next start stops it via the pid file",
    });
  }
  const proc = Bun.spawn([...wrap.argv, spec.binary, "-c", spec.configFile], {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    env: process.env,
  });
  writePidFile(spec.pidFile, { pid: proc.pid, binary: spec.binary, config: spec.configFile });
  log.info("nats_sidecar_started", { pid: proc.pid, binary: spec.binary, config: spec.configFile, pdeathsig: wrap.pdeathsig });

  let serverId: string | null = null;
  const lastLines: string[] = [];
  const onLine = (raw: string) => {
    const line = parseNatsLogLine(raw);
    if (!line) return;
    serverId ??= serverIdFrom(line.msg);
    lastLines.push(line.msg);
    if (lastLines.length > LAST_LINES) lastLines.shift();
    log[line.level]("nats_log", { msg: line.msg });
  };
  const drained = Promise.all([forEachLine(proc.stdout, onLine), forEachLine(proc.stderr, onLine)]).catch(() => undefined);

  let stopping = false;
  let exited = false;
  let resolveDied!: (err: Error) => void;
  const died = new Promise<Error>((resolve) => (resolveDied = resolve));
  const exitedPromise = proc.exited.then(async (code) => {
    exited = true;
    await drained;
    removePidFile(spec.pidFile);
    if (stopping) return;
    const how = proc.signalCode ? `signal ${proc.signalCode}` : `code ${code}`;
    const err = new BrokerError(`nats-server (pid ${proc.pid}) exited with ${how}; its last lines: ${lastLines.slice(-5).join(" | ") || "(none)"}`);
    log.error("nats_sidecar_died", { pid: proc.pid, exit: how, error: err.message });
    resolveDied(err);
  });

  const monitor = `http://127.0.0.1:${spec.monitorPort}`;

  const stop = async (): Promise<void> => {
    if (stopping) return exitedPromise;
    stopping = true;
    if (!exited) {
      proc.kill("SIGTERM");
      // The grace timer is cancelled once the child exits, so it cannot hold the process open.
      const graceOver = new AbortController();
      const grace = clock.sleep(STOP_GRACE_MS, graceOver.signal).catch(() => undefined);
      await Promise.race([exitedPromise, grace]);
      graceOver.abort();
      if (!exited) {
        log.warn("nats_sidecar_kill", { pid: proc.pid, after_ms: STOP_GRACE_MS });
        proc.kill("SIGKILL");
      }
    }
    await exitedPromise;
    log.info("nats_sidecar_stopped", { pid: proc.pid });
  };

  // Ours? /varz must name the server ID our child printed: a server that answered on the
  // monitor port without being our child would otherwise pass for it.
  const ownedBy = clock.now() + OWNED_WITHIN_MS;
  for (;;) {
    if (exited) {
      await exitedPromise;
      // Dead before it answered: if the kernel would not even execute it, say that (and
      // its arch) rather than whatever /bin/sh made of the file.
      const notExecutable = whyNotExecutable(spec.binary);
      if (notExecutable) {
        log.error("nats_binary_not_executable", { path: spec.binary, error: notExecutable });
        throw new BrokerError(notExecutable);
      }
      throw await died;
    }
    if (serverId) {
      const varz = await fetchJson(`${monitor}/varz`);
      const answeredId = (varz?.body as { server_id?: unknown } | undefined)?.server_id;
      if (answeredId === serverId) break;
      if (typeof answeredId === "string") {
        await stop();
        throw new BrokerError(`the monitor port ${spec.monitorPort} is answered by server ${answeredId}, not our nats-server ${serverId}`);
      }
    }
    if (clock.now() > ownedBy) {
      await stop();
      throw new BrokerError(`nats-server (pid ${proc.pid}) did not answer on its monitor port ${spec.monitorPort} within ${OWNED_WITHIN_MS} ms`);
    }
    await clock.sleep(POLL_MS);
  }

  let reason: string | null = "nats-server has not answered /healthz yet";
  const ready = (async () => {
    // Bounded by the sidecar's life: a clustered member waits for its peers as long as
    // it takes, and stop() or death ends the wait.
    for (;;) {
      if (stopping || exited) throw new BrokerError(`nats-server stopped before it was ready (${reason})`);
      // js-server-only: this server's JetStream and its contact with the meta leader, not
      // every replica it hosts. A restarted member's replicas catch up in their own time
      // (quorum does not wait for them), so a node need not wait for them to serve. On
      // 2.9.10 it could not: an idle consumer's replica reported "not current" for good
      // after a restart and full /healthz never passed. 2.15.2 fixed that (full /healthz in
      // ~5 s with 12 idle consumers, bench/server-quirks.ts), but the wait would still grow
      // with every stream and consumer the member hosts, for nothing the node needs.
      const health = await fetchJson(`${monitor}/healthz?js-server-only=true`);
      if (health?.status === 200) {
        reason = null;
        log.info("nats_sidecar_ready", { pid: proc.pid, monitor });
        return;
      }
      const said = (health?.body as { error?: unknown } | undefined)?.error;
      const next = typeof said === "string" ? `nats-server: ${said}` : "nats-server is not answering /healthz";
      if (next !== reason) log.info("nats_sidecar_waiting", { reason: next });
      reason = next;
      await clock.sleep(POLL_MS);
    }
  })();
  // A caller that only awaits `died` must not see an unhandled rejection from `ready`.
  ready.catch(() => undefined);

  return { pid: proc.pid, ready, notReadyReason: () => reason, died, stop };
}
