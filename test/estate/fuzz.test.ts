// The write-route fuzz test on R1 (issue 12, "Done when"): 1,200 generated bodies across
// every write route the app's route table has (the estate's, company revisions, holds,
// seat controls, webhooks, the refused drain, dead letters), sent in turn to two data
// nodes' APIs; then every domain is in service on both, the copies agree, and every 2xx
// write reads back as written on both. A failure prints its request; FUZZ_SEED reproduces
// a run. The same fuzzer runs on R3 in bench/estate-fuzz.ts.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { NatsConnection } from "nats";
import { systemClock } from "../../src/clock.ts";
import { DOMAINS } from "../../src/estate/schema.ts";
import { StateLog } from "../../src/estate/statelog.ts";
import { silentLogger } from "../../src/log.ts";
import { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { checkAfter, reportLines } from "./fuzz-check.ts";
import { startFuzzNode, type FuzzNode } from "./fuzz-node.ts";
import { coverage, fuzzWrites, GENERATORS, writeRoutes } from "./fuzz.ts";
import { removeTempDirs } from "./support.ts";

/** Generous: over a thousand writes, some near a megabyte, on a slow 2-core CI box. */
const TEST_TIMEOUT_MS = 300_000;
const COUNT = 1_200;
const SEED = Number(process.env.FUZZ_SEED ?? 12_012);

let nats: TestNats;
const conns: NatsConnection[] = [];
const nodes: FuzzNode[] = [];
let queue: JetStreamQueue;

beforeAll(async () => {
  nats = await startNats(1);
  for (const id of ["a", "b"]) {
    const nc = await nats.connect();
    conns.push(nc);
    queue ??= new JetStreamQueue({ nc, replicas: 1, clock: systemClock, log: silentLogger });
    await queue.ensureStreams();
    nodes.push(await startFuzzNode({ nc, nodeId: id, replicas: 1, dataNodes: () => ["a", "b"], queue }));
  }
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  for (const n of nodes) await n.stop();
  await queue?.close();
  for (const nc of conns) await nc.close();
  await nats?.stop();
  removeTempDirs();
}, TEST_TIMEOUT_MS);

test("the fuzzer has a generator for every write route the app serves, and the app mounts every write route src/ declares", () => {
  expect(coverage(nodes[0]!.app)).toEqual([]);
  // The table is the app's own: the routes the issue names are in it.
  expect(writeRoutes(nodes[0]!.app)).toEqual(expect.arrayContaining(["POST /config/revisions", "POST /config/revisions/:digest/activate", "POST /estate/:domain/hold", "POST /estate/:domain/release", "POST /agents/:handle/pause", "POST /agents/:handle/resume", "POST /agents/:handle/stop", "POST /hooks/:kind/:id", "POST /fleet/drain"]));
});

test(`${COUNT} generated bodies across every write route leave every domain in service on every node, and every 2xx write readable`, async () => {
  const { report, readbacks } = await fuzzWrites({ apps: nodes.map((n) => n.app), count: COUNT, seed: SEED });
  const log = new StateLog(conns[0]!, silentLogger);
  const level = async () => {
    const ends = await Promise.all(DOMAINS.map(async (d) => (await log.position(d)).last_seq));
    for (const n of nodes) for (const d of DOMAINS) await n.estate.copy!.appliers[d].waitApplied(ends[DOMAINS.indexOf(d)]!, 30_000);
    return ends;
  };
  await checkAfter({ nodes, readbacks, report, level });
  console.log([`fuzz seed ${SEED} on R1 (2 data nodes)`, ...reportLines(report, readbacks)].join("\n"));
  expect(report.failures).toEqual([]);
  expect(report.sent).toBeGreaterThanOrEqual(1_000);
  // Every write route was reached; those that can succeed were seen on both sides of the line.
  // Refusal-only here: a drain (the fuzzer sends no valid one), a skip (no copy is stuck —
  // that is the point) and the dead letters (no wake spent its deliveries).
  const refusalOnly = new Set(["POST /fleet/drain", "POST /query/fleet/drain", "POST /estate/:domain/skip", "POST /deadletters/:id/replay", "DELETE /deadletters/:id"]);
  for (const route of Object.keys(GENERATORS)) {
    const seen = report.byRoute[route] ?? {};
    const ok = Object.keys(seen).some((s) => Number(s) < 300);
    const refused = Object.keys(seen).some((s) => Number(s) >= 400);
    const want = { ok: !refusalOnly.has(route), refused: true };
    expect({ route, ok, refused }).toEqual({ route, ...want });
  }
  expect(report.statuses[413] ?? 0).toBeGreaterThan(0);
  // The readbacks reached the fleet state, not only the estate.
  const kinds = new Set(readbacks.map((r) => r.kind));
  for (const k of ["revision", "active", "hold", "paused", "stop", "notification"]) expect({ kind: k, read: kinds.has(k as never) }).toEqual({ kind: k, read: true });
}, TEST_TIMEOUT_MS);
