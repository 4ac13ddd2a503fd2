// `crewlet sandbox-supervise <run-dir>`: a run's supervisor (src/sandbox/supervisor.ts),
// started by the node that launched the run (src/sandbox/launch.ts), never by a person. It
// opens the box, connects to the broker with the supervisors' credential, and stays until
// the run's result is acknowledged. Its log is <run-dir>/supervisor.log.
import { connect, type KV, type NatsConnection } from "nats";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { systemClock } from "../clock.ts";
import { createLogger, streamSink, type Logger } from "../log.ts";
import type { Box, BoxProvider } from "../sandbox/contract.ts";
import { readSupervisorFile, SUPERVISOR_FILE, type SupervisorFile } from "../sandbox/launch.ts";
import { LocalBoxProvider } from "../sandbox/local.ts";
import { decodeRun, type RunRecord } from "../sandbox/runs.ts";
import { Supervisor, type SupervisorPorts } from "../sandbox/supervisor.ts";
import { UsageError } from "./args.ts";
import { redactor } from "../agent/providers/redact.ts";
import { PING_SUBJECT_PREFIX } from "../duty/sandbox-waiter.ts";

/** A publish's wait for the broker's acknowledgement; the supervisor retries past it. */
const PUBLISH_TIMEOUT_MS = 10_000;
/** Between tries to start the record's watch again: a member restart is seconds. */
const WATCH_RESTART_MS = 2_000;
/** The box dir beside the supervisor's own files. */
const BOX_DIR = "box";

export async function runSandboxSupervise(args: string[]): Promise<number> {
  if (args.length !== 1) throw new UsageError("usage: crewlet sandbox-supervise <run-dir> (started by a node, not by hand)");
  const dir = args[0]!;
  const log = createLogger({ sinks: [streamSink(2, "json")], fields: { component: "sandbox-supervisor" } });
  const file = readSupervisorFile(dir);
  if (!file.ok) {
    log.error("sandbox_supervisor_file_invalid", { dir, error: file.error });
    return 2;
  }
  const f = file.value;
  // Read once: the file holds the broker credential and the seat's CLI keys, which then
  // live only in this process, not on disk for every past run.
  rmSync(join(dir, SUPERVISOR_FILE), { force: true });
  log.info("sandbox_supervisor_started", { run: f.run_id, seat: f.seat, pid: process.pid });
  const nc = await connectForever(f, log);
  // The sandbox-waiter duty asks whether this run's supervisor is still there.
  nc.subscribe(`${PING_SUBJECT_PREFIX}${f.run_id}`, { callback: (_err, m) => void m.respond() });
  const box = await openBox(new LocalBoxProvider(), f, join(dir, BOX_DIR), log);
  const supervisor = new Supervisor({ seat: f.seat, run_id: f.run_id, control_subject: f.control_subject }, box, natsPorts(nc, f, log), systemClock, log, redactor(Object.values(f.spec.env)));
  // A stop of the supervisor (a machine shutting down) ends the run and still reports it.
  for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.on(sig, () => box.cancel(`the run's supervisor was stopped (${sig})`));
  const { result, reported } = await supervisor.supervise();
  await nc.drain().catch(() => undefined);
  // Told: the record holds the result (diff, commits, output), so the box's dirs go. A
  // result never acknowledged keeps them for a person to read.
  if (reported) rmSync(join(dir, BOX_DIR), { recursive: true, force: true });
  log.info("sandbox_supervisor_finished", { run: f.run_id, seat: f.seat, outcome: result.outcome, reported, box_removed: reported });
  return 0;
}

async function connectForever(f: SupervisorFile, log: Logger): Promise<NatsConnection> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await connect({
        servers: f.nats.servers,
        user: f.nats.user,
        pass: f.nats.pass,
        name: `crewlet-sandbox:${f.run_id}`,
        // The node's sidecar may be restarting (a binary swap): keep trying, it comes back.
        reconnect: true,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 1000,
        waitOnFirstConnect: true,
        // Its own box's broker only: a peer member's advertised client URL is loopback on
        // another machine, and the credential is this store's alone.
        ignoreClusterUpdates: true,
      });
    } catch (err) {
      if (attempt % 30 === 0) log.warn("sandbox_supervisor_connect_retry", { run: f.run_id, attempt, error: (err as Error).message });
      await systemClock.sleep(1000);
    }
  }
}

/** A box that cannot be opened is a run that failed, reported like any other. */
async function openBox(provider: BoxProvider, f: SupervisorFile, dir: string, log: Logger): Promise<Box> {
  try {
    return await provider.open(f.spec, dir);
  } catch (err) {
    const reason = (err as Error).message;
    log.error("sandbox_box_open_failed", { run: f.run_id, seat: f.seat, error: reason });
    const done = Promise.resolve({ outcome: "failed" as const, exit_code: null, reason, output_tail: "", output_bytes: 0, diff: "", commits: [], summary: "" });
    return { run_id: f.run_id, work_dir: dir, onQuestion: () => undefined, answer: () => undefined, cancel: () => undefined, done };
  }
}

function natsPorts(nc: NatsConnection, f: SupervisorFile, log: Logger): SupervisorPorts {
  const js = nc.jetstream({ timeout: PUBLISH_TIMEOUT_MS });
  let kv: KV | null = null;
  return {
    publish: async (subject, data, msgId) => {
      await js.publish(subject, data, { msgID: msgId, timeout: PUBLISH_TIMEOUT_MS });
    },
    watchRun: async (onRecord) => {
      kv ??= await js.views.kv(f.runs_bucket, { bindOnly: true });
      const bucket = kv;
      let iter = await bucket.watch({ key: f.record_key });
      let stopped = false;
      // A watch that ends while the run is live (its consumer lost with a member) is started
      // again: an answer or a cancel written meanwhile is its current value, heard first.
      void (async () => {
        while (!stopped) {
          try {
            for await (const e of iter) {
              if (e.operation !== "PUT") {
                onRecord(null);
                continue;
              }
              const d = decodeRun(e.value);
              if (d.ok) onRecord(d.value as RunRecord);
              else log.error("sandbox_run_record_invalid", { run: f.run_id, error: d.error });
            }
          } catch (err) {
            log.warn("sandbox_run_watch_ended", { run: f.run_id, error: (err as Error).message });
          }
          while (!stopped) {
            await systemClock.sleep(WATCH_RESTART_MS);
            try {
              iter = await bucket.watch({ key: f.record_key });
              break;
            } catch {
              // the broker is still away: try again
            }
          }
        }
      })();
      return {
        stop: () => {
          stopped = true;
          iter.stop();
        },
      };
    },
  };
}
