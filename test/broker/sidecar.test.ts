// One embedded member through the node's own broker code: JetStream works, weird paths and
// passwords survive the config, death is noticed, a foreign server on our port is refused.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { AckPolicy, connect, type NatsConnection } from "nats";
import { systemClock } from "../../src/clock.ts";
import { memoryLogger } from "../../src/log.ts";
import { startBroker, type RunningBroker } from "../../src/broker/index.ts";
import { brokerPaths } from "../../src/broker/plan.ts";
import { isAlive } from "../../src/broker/process.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { singleMemberPlan, tempStore } from "./fixtures/plans.ts";

const brokers: RunningBroker[] = [];
const conns: NatsConnection[] = [];
const dirs: string[] = [];
const harnesses: TestNats[] = [];
afterAll(async () => {
  for (const nc of conns) await nc.close().catch(() => undefined);
  for (const b of brokers) await b.stop();
  for (const h of harnesses) await h.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function store(): string {
  const d = tempStore();
  dirs.push(d);
  return d;
}

describe("single member", () => {
  test("starts, becomes ready, serves JetStream streams and KV on the boot credential", async () => {
    const { log, sink } = memoryLogger();
    const plan = await singleMemberPlan(store());
    const broker = await startBroker(plan, { log, clock: systemClock });
    brokers.push(broker);
    await broker.ready;
    expect(broker.notReadyReason()).toBeNull();

    const paths = brokerPaths(plan.storeDir);
    expect(statSync(paths.configFile).mode & 0o777).toBe(0o600);
    expect(isAlive(broker.pid!)).toBe(true);

    const nc = await connect({ servers: broker.clientUrls, ...broker.connectAuth, reconnect: false });
    conns.push(nc);
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: "S", subjects: ["s.>"], num_replicas: 1 });
    const ack = await nc.jetstream().publish("s.one", new TextEncoder().encode("x"));
    expect(ack.seq).toBe(1);
    expect(ack.domain).toBe("crewlet");
    const kv = await nc.jetstream().views.kv("B", { history: 1, replicas: 1 });
    await kv.put("k", new TextEncoder().encode("v"));
    expect(new TextDecoder().decode((await kv.get("k"))!.value)).toBe("v");

    // nats-server's own lines arrive as nats_log, at their levels; the password never does.
    expect(sink.events("nats_log").some((l) => String(l.fields.msg).includes("Starting nats-server"))).toBe(true);
    expect(JSON.stringify(sink.lines)).not.toContain(plan.credential.password);
    // JetStream keeps its files under store/stream.
    expect(statSync(join(paths.streamDir, "jetstream")).isDirectory()).toBe(true);
  });

  test("the coding runs' supervisors' credential may publish to a control subject and read the runs bucket, and nothing else", async () => {
    const plan = { ...(await singleMemberPlan(store())), supervisor: { user: "crewlet-sandbox", password: "supervisor-password-0123456789abcdef" } };
    const broker = await startBroker(plan, { log: memoryLogger().log, clock: systemClock });
    brokers.push(broker);
    await broker.ready;
    const node = await connect({ servers: broker.clientUrls, ...broker.connectAuth, reconnect: false });
    conns.push(node);
    const jsm = await node.jetstreamManager();
    await jsm.streams.add({ name: "MAIL", subjects: ["crewlet.seats.>"], num_replicas: 1 });
    await jsm.streams.add({ name: "OTHER", subjects: ["other.>"], num_replicas: 1 });
    const runs = await node.jetstream().views.kv("crewlet_runs", { history: 1, replicas: 1 });
    await runs.put("engineer.run-1", new TextEncoder().encode("{}"));
    await node.jetstream().views.kv("crewlet_ledger", { history: 1, replicas: 1 });

    const sup = await connect({ servers: broker.clientUrls, user: "crewlet-sandbox", pass: plan.supervisor.password, reconnect: false });
    conns.push(sup);
    const js = sup.jetstream({ timeout: 2_000 });
    expect((await js.publish("crewlet.seats.01.engineer.control", new Uint8Array([1]))).stream).toBe("MAIL");
    await expect(js.publish("crewlet.seats.01.engineer.inbox", new Uint8Array([1]))).rejects.toThrow();
    await expect(js.publish("other.x", new Uint8Array([1]))).rejects.toThrow();
    const kv = await js.views.kv("crewlet_runs", { bindOnly: true });
    const w = await kv.watch({ key: "engineer.run-1" });
    for await (const e of w) {
      expect(e.key).toBe("engineer.run-1");
      break;
    }
    await expect(js.views.kv("crewlet_ledger", { bindOnly: true }).then((l) => l.get("k"))).rejects.toThrow();
    await expect(sup.jetstreamManager({ timeout: 2_000 }).then((m) => m.streams.delete("OTHER"))).rejects.toThrow();
  });

  test("a wrong password is refused", async () => {
    const plan = await singleMemberPlan(store());
    const broker = await startBroker(plan, { log: memoryLogger().log, clock: systemClock });
    brokers.push(broker);
    await broker.ready;
    await expect(connect({ servers: broker.clientUrls, user: "crewlet", pass: "wrong", reconnect: false })).rejects.toThrow();
  });

  test("a store path and a password with quotes, backslashes, $, #, braces and non-ASCII survive the config", async () => {
    const root = store();
    const weird = join(root, 'we"ird $dir #1 {x} \\ é');
    mkdirSync(weird, { recursive: true });
    const plan = await singleMemberPlan(weird);
    plan.credential = { user: "crewlet", password: 'p"a\\s$s #{w}o[r]d é\t;' };
    const broker = await startBroker(plan, { log: memoryLogger().log, clock: systemClock });
    brokers.push(broker);
    await broker.ready;
    const nc = await connect({ servers: broker.clientUrls, ...broker.connectAuth, reconnect: false });
    conns.push(nc);
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: "W", subjects: ["w"], num_replicas: 1 });
    expect(statSync(join(brokerPaths(weird).streamDir, "jetstream")).isDirectory()).toBe(true);
  });

  test("stop() ends the sidecar and removes its pid file", async () => {
    const { log, sink } = memoryLogger();
    const plan = await singleMemberPlan(store());
    const broker = await startBroker(plan, { log, clock: systemClock });
    await broker.ready;
    const pid = broker.pid!;
    await broker.stop();
    await broker.stop(); // idempotent
    expect(isAlive(pid)).toBe(false);
    expect(() => statSync(brokerPaths(plan.storeDir).pidFile)).toThrow();
    expect(sink.events("nats_sidecar_stopped").length).toBe(1);
    expect(sink.events("nats_sidecar_died").length).toBe(0);
  });
});

describe("limits", () => {
  /** One past nats-server 2.15's default cap on consumers per stream. */
  const CONSUMERS = 1_001;
  /** Creates in flight at once: quick on one member without a flood of requests. */
  const CONCURRENCY = 50;
  test(`a stream takes ${CONSUMERS} consumers: the agent stream holds three mailboxes per seat`, async () => {
    const plan = await singleMemberPlan(store());
    const broker = await startBroker(plan, { log: memoryLogger().log, clock: systemClock });
    brokers.push(broker);
    await broker.ready;
    const nc = await connect({ servers: broker.clientUrls, ...broker.connectAuth, reconnect: false });
    conns.push(nc);
    const jsm = await nc.jetstreamManager({ timeout: 20_000 });
    // max_consumers -1 as the queue's streams have it: on 2.15 that alone leaves the cap at 1,000.
    await jsm.streams.add({ name: "MANY", subjects: ["many.>"], num_replicas: 1, max_consumers: -1 });
    for (let i = 0; i < CONSUMERS; i += CONCURRENCY) {
      await Promise.all(
        Array.from({ length: Math.min(CONCURRENCY, CONSUMERS - i) }, (_, k) =>
          jsm.consumers.add("MANY", { durable_name: `c${i + k}`, ack_policy: AckPolicy.Explicit, filter_subject: `many.${i + k}` }),
        ),
      );
    }
    expect((await jsm.streams.info("MANY")).state.consumer_count).toBe(CONSUMERS);
  }, 120_000);
});

describe("failure", () => {
  test("a sidecar that dies is noticed, with a clear reason", async () => {
    const { log, sink } = memoryLogger();
    const plan = await singleMemberPlan(store());
    const broker = await startBroker(plan, { log, clock: systemClock });
    brokers.push(broker);
    await broker.ready;
    process.kill(broker.pid!, "SIGKILL");
    const err = await broker.died;
    expect(err.message).toContain("SIGKILL");
    expect(err.message).toContain(`pid ${broker.pid}`);
    expect(sink.events("nats_sidecar_died").length).toBe(1);
    expect(() => statSync(brokerPaths(plan.storeDir).pidFile)).toThrow();
  });

  test("a server already answering on our client port that is not our child is an error", async () => {
    const other = await startNats(1);
    harnesses.push(other);
    const plan = await singleMemberPlan(store());
    plan.client.port = other.port;
    await expect(startBroker(plan, { log: memoryLogger().log, clock: systemClock })).rejects.toThrow(/another process already answers on client 127\.0\.0\.1:\d+/);
  });

  test("a server already answering on our monitor port is an error too", async () => {
    const other = await startNats(1);
    harnesses.push(other);
    const plan = await singleMemberPlan(store());
    plan.monitorPort = other.members[0]!.monitor;
    await expect(startBroker(plan, { log: memoryLogger().log, clock: systemClock })).rejects.toThrow(/monitor 127\.0\.0\.1/);
  });

  test("a sidecar that cannot start is reported with nats-server's own words, not waited on", async () => {
    // nats-server refuses a JetStream domain with a dot in it and exits at once.
    const plan = await singleMemberPlan(store());
    plan.jetstream = { ...plan.jetstream, domain: "bad.domain" };
    const err = await startBroker(plan, { log: memoryLogger().log, clock: systemClock }).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/exited with code 1/);
    expect(err?.message).toMatch(/invalid domain name/);
  });
});
