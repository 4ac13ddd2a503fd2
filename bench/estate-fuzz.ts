// The write-route fuzzer on R3 (issue 12, "Done when"): a 3-member cluster, three data
// nodes with R3 logs, generated bodies sent in turn to each node's API; then every domain
// in service on every node, the copies alike, every 2xx write readable. Prints figures and
// any failure; exits 1 on a failure (an integrity fact, not a timing one).
//   bun bench/estate-fuzz.ts [count=1200] [seed=12012]
import type { NatsConnection } from "nats";
import { createApp } from "../src/api/app.ts";
import { TokenAuth } from "../src/api/auth.ts";
import { deadLettersGroup } from "../src/api/routes/deadletters.ts";
import { systemClock } from "../src/clock.ts";
import { GRANTS } from "../src/config/tier-a.ts";
import { DOMAINS } from "../src/estate/schema.ts";
import { StateLog } from "../src/estate/statelog.ts";
import { silentLogger } from "../src/log.ts";
import { JetStreamQueue } from "../src/queue/jetstream.ts";
import { startNats } from "../test/support/nats.ts";
import { checkAfter, FUZZ_TOKEN, fuzzCompany, fuzzWrites } from "../test/estate/fuzz.ts";
import { removeTempDirs, startTestEstate, type TestEstate } from "../test/estate/support.ts";

const COUNT = Number(process.argv[2] ?? 1_200);
const SEED = Number(process.argv[3] ?? 12_012);
const DATA = ["a", "b", "c"];

const nats = await startNats(3);
const conns: NatsConnection[] = [];
const nodes: TestEstate[] = [];
let failed = false;
try {
  const queues: JetStreamQueue[] = [];
  for (const [i, id] of DATA.entries()) {
    const nc = await nats.connect({ servers: nats.members[i]!.url });
    conns.push(nc);
    const q = new JetStreamQueue({ nc, replicas: 3, clock: systemClock, log: silentLogger });
    await q.ensureStreams();
    queues.push(q);
    nodes.push(await startTestEstate({ nc, nodeId: id, replicas: 3, dataNodes: () => DATA, company: fuzzCompany() }));
  }
  const apps = nodes.map((n, i) =>
    createApp({
      auth: new TokenAuth([{ id: "fuzz", token: FUZZ_TOKEN, grants: GRANTS }]),
      log: silentLogger,
      health: { health: () => ({}), notReadyReason: () => null },
      groups: [...n.estate.routeGroups, deadLettersGroup(queues[i]!)],
    }),
  );
  const { report, readbacks } = await fuzzWrites({ apps, count: COUNT, seed: SEED });
  const log = new StateLog(conns[0]!, silentLogger);
  const levelStarted = performance.now();
  const level = async () => {
    const ends = await Promise.all(DOMAINS.map(async (d) => (await log.position(d)).last_seq));
    for (const n of nodes) for (const d of DOMAINS) await n.estate.copy!.appliers[d].waitApplied(ends[DOMAINS.indexOf(d)]!, 60_000);
    return ends;
  };
  await checkAfter({ estates: nodes.map((n) => n.estate), readbacks, report, level });
  const twoXX = (report.statuses[200] ?? 0) + (report.statuses[202] ?? 0);
  console.log(`estate fuzz on R3 (3 data nodes), seed ${SEED}`);
  console.log(`  requests sent            ${report.sent} in ${Math.round(report.wall_ms)} ms (${(report.sent / (report.wall_ms / 1000)).toFixed(0)}/s, one at a time)`);
  console.log(`  statuses                 ${JSON.stringify(report.statuses)}`);
  for (const [route, s] of Object.entries(report.byRoute).sort()) console.log(`    ${route.padEnd(22)} ${JSON.stringify(s)}`);
  console.log(`  2xx writes               ${twoXX}; read back on every node: ${report.readbacks} reads (check took ${Math.round(performance.now() - levelStarted)} ms)`);
  console.log(`  domains in service       ${report.failures.some((f) => f.includes("out of service")) ? "NO" : "all, on every node"}`);
  console.log(`  failures                 ${report.failures.length}`);
  for (const f of report.failures.slice(0, 20)) console.log(`    ${f}`);
  failed = report.failures.length > 0;
  for (const q of queues) await q.close();
} finally {
  for (const n of nodes) await n.estate.stop().catch(() => {});
  for (const nc of conns) await nc.close().catch(() => {});
  await nats.stop();
  removeTempDirs();
}
process.exit(failed ? 1 : 0);
