// The write-route fuzzer on R3 (issue 12, "Done when"): a 3-member cluster, three data
// nodes with R3 logs and R3 fleet state, generated bodies across every write route sent in
// turn to each node's API; then every domain in service on every node, the copies alike,
// every 2xx write readable on every node. Prints figures and any failure; exits 1 on a
// failure (an integrity fact, not a timing one).
//   bun bench/estate-fuzz.ts [--count 1200] [--seed 12012]
// --count: generated write bodies; --seed: the generator's seed (the same seed, the same bodies).
import type { NatsConnection } from "nats";
import { z } from "zod";
import { benchArgs, countFlag } from "./args.ts";
import { systemClock } from "../src/clock.ts";
import { DOMAINS } from "../src/estate/schema.ts";
import { StateLog } from "../src/estate/statelog.ts";
import { silentLogger } from "../src/log.ts";
import { JetStreamQueue } from "../src/queue/jetstream.ts";
import { startNats } from "../test/support/nats.ts";
import { checkAfter, reportLines } from "../test/estate/fuzz-check.ts";
import { startFuzzNode, type FuzzNode } from "../test/estate/fuzz-node.ts";
import { coverage, fuzzWrites } from "../test/estate/fuzz.ts";
import { removeTempDirs } from "../test/estate/support.ts";

const { count: COUNT, seed: SEED } = benchArgs(
  "estate-fuzz",
  "[--count 1200] [--seed 12012]",
  z.object({ count: countFlag(1_200, 100_000), seed: z.coerce.number().int().nonnegative().default(12_012) }),
);
const DATA = ["a", "b", "c"];

const nats = await startNats(3);
const conns: NatsConnection[] = [];
const nodes: FuzzNode[] = [];
const queues: JetStreamQueue[] = [];
let failed = false;
try {
  for (const [i, id] of DATA.entries()) {
    const nc = await nats.connect({ servers: nats.members[i]!.url });
    conns.push(nc);
    const q = new JetStreamQueue({ nc, replicas: 3, clock: systemClock, log: silentLogger });
    await q.ensureStreams();
    queues.push(q);
    nodes.push(await startFuzzNode({ nc, nodeId: id, replicas: 3, dataNodes: () => DATA, queue: q }));
  }
  const uncovered = coverage(nodes[0]!.app);
  const { report, readbacks } = await fuzzWrites({ apps: nodes.map((n) => n.app), count: COUNT, seed: SEED });
  report.failures.unshift(...uncovered);
  const log = new StateLog(conns[0]!, silentLogger);
  const levelStarted = performance.now();
  const level = async () => {
    const ends = await Promise.all(DOMAINS.map(async (d) => (await log.position(d)).last_seq));
    for (const n of nodes) for (const d of DOMAINS) await n.estate.copy!.appliers[d].waitApplied(ends[DOMAINS.indexOf(d)]!, 60_000);
    return ends;
  };
  await checkAfter({ nodes, readbacks, report, level });
  console.log(`estate fuzz on R3 (3 data nodes), seed ${SEED}; the check after took ${Math.round(performance.now() - levelStarted)} ms`);
  for (const line of reportLines(report, readbacks)) console.log(line);
  failed = report.failures.length > 0;
} finally {
  for (const n of nodes) await n.stop().catch(() => {});
  for (const q of queues) await q.close().catch(() => {});
  for (const nc of conns) await nc.close().catch(() => {});
  await nats.stop();
  removeTempDirs();
}
process.exit(failed ? 1 : 0);
