// A 3-member cluster on 127.0.0.1 started through the node's own broker code, plus a leaf
// joined to it: a client on the leaf uses the cluster's JetStream (streams and KV) across
// the members' JetStream domain.
import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { connect, type NatsConnection } from "nats";
import { systemClock } from "../../src/clock.ts";
import { memoryLogger } from "../../src/log.ts";
import { startBroker, type RunningBroker } from "../../src/broker/index.ts";
import { clusterPlans, leafPlan, tempStore } from "./fixtures/plans.ts";
import { whileForming } from "../support/forming.ts";

const brokers: RunningBroker[] = [];
const conns: NatsConnection[] = [];
const root = tempStore("crewlet-cluster-");
afterAll(async () => {
  for (const nc of conns) await nc.close().catch(() => undefined);
  await Promise.all(brokers.map((b) => b.stop()));
  rmSync(root, { recursive: true, force: true });
});

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

/** Interest crosses a fresh leaf connection within milliseconds; 40 × 250 ms is generous. */
async function eventually<T>(what: string, fn: () => Promise<T>): Promise<T> {
  let last: unknown;
  for (let i = 0; i < 40; i++) {
    try {
      return await fn();
    } catch (err) {
      last = err;
      await Bun.sleep(250);
    }
  }
  throw new Error(`${what}: ${(last as Error)?.message}`);
}

test("3 members and a leaf: a client on the leaf uses the cluster's R3 JetStream and KV", async () => {
  // Secrets with characters that would break a URL or the conf format if not handled.
  const secret = 'c l@u/s:t"e$r#';
  const leafSecret = "l%e{a}f\\";
  const plans = await clusterPlans(root, 3, secret, leafSecret);
  const { log } = memoryLogger("info");
  const members = await Promise.all(plans.map((p) => startBroker(p, { log: log.child({ node: p.nodeId }), clock: systemClock })));
  brokers.push(...members);
  await Promise.all(members.map((m) => m.ready));

  const supervisor = { user: "crewlet-sandbox", password: "supervisor-password-0123456789abcdef" };
  const leaf = await startBroker({ ...(await leafPlan(join(root, "leaf"), plans, leafSecret)), supervisor }, { log: log.child({ node: "leaf-1" }), clock: systemClock });
  brokers.push(leaf);
  await leaf.ready;

  // Members see each other (routes authenticated with the derived cluster password). Since
  // 2.10 a member keeps a pool of routes to each peer (and one per pinned account), so count
  // the peers the routes reach, not the routes.
  const routez = (await (await fetch(`${members[0]!.monitorUrl}/routez`)).json()) as { routes: { remote_id: string }[] };
  expect(new Set(routez.routes.map((r) => r.remote_id)).size).toBe(2);
  // The leaf is connected to a member.
  await eventually("leaf connection", async () => {
    const leafz = (await (await fetch(`${leaf.monitorUrl}/leafz`)).json()) as { leafnodes: number };
    if (leafz.leafnodes < 1) throw new Error("no leafnode connection yet");
  });

  // A client on the leaf uses the plain JetStream API; the leaf maps it onto the domain.
  const nc = await connect({ servers: leaf.clientUrls, ...leaf.connectAuth, reconnect: false });
  conns.push(nc);
  const jsm = await eventually("jetstream via leaf", () => nc.jetstreamManager({ timeout: 2_000 }));
  const info = await jsm.streams.add({ name: "ORDERS", subjects: ["orders.>"], num_replicas: 3 });
  expect(info.config.num_replicas).toBe(3);
  expect(info.cluster?.replicas?.length).toBe(2);
  const js = nc.jetstream({ timeout: 5_000 });
  const ack = await js.publish("orders.1", enc("one"));
  expect(ack.seq).toBe(1);
  expect(ack.domain).toBe("crewlet");

  const kv = await js.views.kv("LEAFKV", { history: 1, replicas: 3 });
  const rev = await kv.create("k", enc("v1"));
  await kv.update("k", enc("v2"), rev);
  expect(dec((await kv.get("k"))!.value)).toBe("v2");
  await expect(kv.update("k", enc("stale"), rev)).rejects.toThrow();

  // A member's own client sees what the leaf wrote: one JetStream, not a leaf-local copy.
  const ncm = await connect({ servers: members[1]!.clientUrls, ...members[1]!.connectAuth, reconnect: false });
  conns.push(ncm);
  const kvm = await ncm.jetstream().views.kv("LEAFKV", { bindOnly: true });
  expect(dec((await kvm.get("k"))!.value)).toBe("v2");
  const stored = await (await ncm.jetstreamManager()).streams.getMessage("ORDERS", { seq: 1 });
  expect(dec(stored.data)).toBe("one");

  // Naming the domain explicitly works from the leaf too.
  const jsd = nc.jetstream({ domain: "crewlet", timeout: 5_000 });
  expect((await jsd.publish("orders.2", enc("two"))).seq).toBe(2);

  // A coding run's supervisor on the leaf reads its run record and reports, as on a member:
  // the leaf checks its permissions on the domain's API subjects.
  // Asked again while placement is refused (a member not yet current), as a node's boot does.
  await whileForming(() => jsm.streams.add({ name: "MAIL", subjects: ["crewlet.seats.>"], num_replicas: 3 }));
  const runs = await whileForming(() => js.views.kv("crewlet_runs", { history: 1, replicas: 3 }));
  await runs.put("engineer.run-1", enc("{}"));
  const sup = await connect({ servers: leaf.clientUrls, user: supervisor.user, pass: supervisor.password, reconnect: false });
  conns.push(sup);
  const sjs = sup.jetstream({ timeout: 5_000 });
  expect((await sjs.publish("crewlet.seats.01.engineer.control", enc("done"))).stream).toBe("MAIL");
  const watch = await (await sjs.views.kv("crewlet_runs", { bindOnly: true })).watch({ key: "engineer.run-1" });
  for await (const e of watch) {
    expect(e.key).toBe("engineer.run-1");
    break;
  }
  await expect(sjs.publish("orders.3", enc("not its subject"))).rejects.toThrow();
});
