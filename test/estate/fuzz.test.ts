// The write-route fuzz test on R1 (issue 12, "Done when"): 1,200 generated bodies across
// every write route, sent in turn to two data nodes' APIs; then every domain is in service
// on both, the copies agree, and every 2xx write reads back as written. A failure prints
// its request; FUZZ_SEED reproduces a run. The same fuzzer runs on R3 in bench/estate-fuzz.ts.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { NatsConnection } from "nats";
import { createApp } from "../../src/api/app.ts";
import { TokenAuth } from "../../src/api/auth.ts";
import { deadLettersGroup } from "../../src/api/routes/deadletters.ts";
import { systemClock } from "../../src/clock.ts";
import { GRANTS } from "../../src/config/tier-a.ts";
import { DOMAINS } from "../../src/estate/schema.ts";
import { StateLog } from "../../src/estate/statelog.ts";
import { silentLogger } from "../../src/log.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { checkAfter, FUZZ_TOKEN, fuzzCompany, fuzzWrites } from "./fuzz.ts";
import { removeTempDirs, startTestEstate, type TestEstate } from "./support.ts";

/** Generous: over a thousand writes, some near a megabyte, on a slow 2-core CI box. */
const TEST_TIMEOUT_MS = 300_000;
const COUNT = 1_200;
const SEED = Number(process.env.FUZZ_SEED ?? 12_012);

let nats: TestNats;
const conns: NatsConnection[] = [];
const nodes: TestEstate[] = [];
const queue = new MemoryQueue({ clock: systemClock, log: silentLogger });

beforeAll(async () => {
  nats = await startNats(1);
  await queue.ensureStreams();
  for (const id of ["a", "b"]) {
    const nc = await nats.connect();
    conns.push(nc);
    nodes.push(await startTestEstate({ nc, nodeId: id, dataNodes: () => ["a", "b"], company: fuzzCompany() }));
  }
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  for (const n of nodes) await n.estate.stop();
  for (const nc of conns) await nc.close();
  await queue.close();
  await nats?.stop();
  removeTempDirs();
}, TEST_TIMEOUT_MS);

test(`${COUNT} generated bodies across every write route leave every domain in service on every node, and every 2xx write readable`, async () => {
  const apps = nodes.map((n) =>
    createApp({
      auth: new TokenAuth([{ id: "fuzz", token: FUZZ_TOKEN, grants: GRANTS }]),
      log: silentLogger,
      health: { health: () => ({}), notReadyReason: () => null },
      groups: [...n.estate.routeGroups, deadLettersGroup(queue)],
    }),
  );
  const { report, readbacks } = await fuzzWrites({ apps, count: COUNT, seed: SEED });
  const log = new StateLog(conns[0]!, silentLogger);
  const level = async () => {
    const ends = await Promise.all(DOMAINS.map(async (d) => (await log.position(d)).last_seq));
    for (const n of nodes) for (const d of DOMAINS) await n.estate.copy!.appliers[d].waitApplied(ends[DOMAINS.indexOf(d)]!, 30_000);
    return ends;
  };
  await checkAfter({ estates: nodes.map((n) => n.estate), readbacks, report, level });
  console.log(`fuzz seed ${SEED}: ${report.sent} sent in ${Math.round(report.wall_ms)} ms; statuses ${JSON.stringify(report.statuses)}; ${report.readbacks} readbacks`);
  expect(report.failures).toEqual([]);
  expect(report.sent).toBeGreaterThanOrEqual(1_000);
  // The generator reaches both sides of the line on the routes that write.
  for (const route of ["work.create", "work.comment", "page.put", "chat.post", "chat.dm"]) {
    const seen = report.byRoute[route] ?? {};
    expect({ route, ok: (seen[200] ?? 0) > 0, refused: Object.keys(seen).some((s) => Number(s) >= 400) }).toEqual({ route, ok: true, refused: true });
  }
  expect(report.statuses[413] ?? 0).toBeGreaterThan(0);
}, TEST_TIMEOUT_MS);
