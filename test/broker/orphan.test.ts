// Never an orphan: a node killed with SIGKILL takes its sidecar with it (parent-death
// signal), and a sidecar a predecessor left running anyway is found through the pid file
// and stopped before a new one starts.
import { afterAll, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { connect } from "nats";
import { systemClock } from "../../src/clock.ts";
import { memoryLogger } from "../../src/log.ts";
import { startBroker, type RunningBroker } from "../../src/broker/index.ts";
import { brokerPaths } from "../../src/broker/plan.ts";
import { isAlive, readPidFile, writePidFile } from "../../src/broker/process.ts";
import { singleMemberPlan, tempStore } from "./fixtures/plans.ts";

const PARENT = join(import.meta.dir, "fixtures", "parent.ts");
const dirs: string[] = [];
const brokers: RunningBroker[] = [];
const strays: number[] = [];
afterAll(async () => {
  for (const b of brokers) await b.stop();
  for (const pid of strays) if (isAlive(pid)) process.kill(pid, "SIGKILL");
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function runParent(mode: "broker" | "orphan", planFile: string) {
  const proc = Bun.spawn([process.execPath, PARENT, mode, planFile], { stdout: "pipe", stderr: "inherit", stdin: "ignore" });
  const reader = proc.stdout.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  const { sidecar_pid } = JSON.parse(text) as { sidecar_pid: number };
  strays.push(sidecar_pid);
  return { proc, sidecar_pid };
}

/** The kernel delivers the death signal at once; 10 s is for a loaded CI box. */
async function gone(pid: number): Promise<boolean> {
  for (let i = 0; i < 200 && isAlive(pid); i++) await Bun.sleep(50);
  return !isAlive(pid);
}

test("kill -9 of the node takes the sidecar with it, and a restart on the same store works", async () => {
  const store = tempStore();
  dirs.push(store);
  const plan = await singleMemberPlan(store);
  const planFile = join(store, "plan.json");
  writeFileSync(planFile, JSON.stringify(plan));

  const first = await runParent("broker", planFile);
  expect(isAlive(first.sidecar_pid)).toBe(true);
  first.proc.kill("SIGKILL");
  await first.proc.exited;
  expect(await gone(first.sidecar_pid)).toBe(true);

  // The restart finds the dead sidecar's pid file, sees the pid is gone, and starts afresh
  // on the same ports and store.
  const { log, sink } = memoryLogger();
  const broker = await startBroker({ ...plan, credential: { user: "crewlet", password: "next-boot" } }, { log, clock: systemClock });
  brokers.push(broker);
  await broker.ready;
  expect(sink.events("nats_pidfile_stale").length).toBe(1);
  const nc = await connect({ servers: broker.clientUrls, ...broker.connectAuth, reconnect: false });
  await (await nc.jetstreamManager()).streams.add({ name: "AFTER", subjects: ["after"], num_replicas: 1 });
  await nc.close();
  await broker.stop();
});

test("a sidecar left running by a crashed predecessor is found via the pid file and stopped first", async () => {
  const store = tempStore();
  dirs.push(store);
  const plan = await singleMemberPlan(store);
  const planFile = join(store, "plan.json");
  writeFileSync(planFile, JSON.stringify(plan));

  // The predecessor ran without a parent-death signal, so its sidecar outlived it.
  const orphan = await runParent("orphan", planFile);
  await orphan.proc.exited;
  expect(isAlive(orphan.sidecar_pid)).toBe(true);

  const { log, sink } = memoryLogger();
  const broker = await startBroker(plan, { log, clock: systemClock });
  brokers.push(broker);
  await broker.ready;
  expect(isAlive(orphan.sidecar_pid)).toBe(false);
  expect(broker.pid).not.toBe(orphan.sidecar_pid);
  expect(sink.events("nats_predecessor_stopped")[0]?.fields.pid).toBe(orphan.sidecar_pid);
  const read = readPidFile(brokerPaths(store).pidFile);
  expect(read.ok && read.value?.pid).toBe(broker.pid!);
});

test("a pid file naming a process that is not our nats-server leaves that process alone", async () => {
  const store = tempStore();
  dirs.push(store);
  const plan = await singleMemberPlan(store);
  const bystander = Bun.spawn(["sleep", "30"], { stdin: "ignore", stdout: "ignore", stderr: "ignore" });
  const paths = brokerPaths(store);
  Bun.spawnSync(["mkdir", "-p", paths.brokerDir]);
  writePidFile(paths.pidFile, { pid: bystander.pid, binary: "/opt/crewlet/appliance/cache/nats-server-2.15.2-x64", config: paths.configFile });

  const { log, sink } = memoryLogger();
  const broker = await startBroker(plan, { log, clock: systemClock });
  brokers.push(broker);
  await broker.ready;
  expect(isAlive(bystander.pid)).toBe(true);
  expect(sink.events("nats_pidfile_stale").length).toBe(1);
  bystander.kill("SIGKILL");
  await bystander.exited;
});
