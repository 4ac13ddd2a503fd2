// The chaos suite's bounded CI run (issue 11): three members R3 and one leaf, real
// processes, a TCP proxy on every cluster and leaf connection, every fault kind once in a
// seeded order (CREWLET_CHAOS_SEED replays another), a driver posting to 16 seats all the
// while, a quiet period, a probe of every seat, and the checker's verdict. The figures are
// printed; what fails the test is a violation, never a time. bench/chaos.ts is the long run.
// The TTL is the smallest the config accepts on an R3 fleet, where a healthy node's fence is
// a violation (issue 34: an election elsewhere must not cost it its seats).
import { expect, test } from "bun:test";
import { FAULT_KINDS } from "./schedule.ts";
import { report, runChaos } from "./run.ts";
import { replicatedLeaseTtlFloorMs } from "../../src/coord/ttl.ts";

const SEED = Number(process.env.CREWLET_CHAOS_SEED ?? 11);

test(`chaos: every fault kind once (seed ${SEED}); no overlap, no acknowledged message lost, every seat answers`, async () => {
  const result = await runChaos({ seed: SEED, ttl_ms: replicatedLeaseTtlFloorMs(), faults: { count: FAULT_KINDS.length }, quiet_ms: 15_000, probe_within_ms: 45_000, recovery_ms_max: 45_000, say: (l) => console.log(l) });
  const lines = report(result);
  for (const line of lines) console.log(line);
  // CI keeps only the tail of a run's output; .ci/run prints this file after a failed test run.
  if (process.env.CREWLET_CHAOS_REPORT) await Bun.write(process.env.CREWLET_CHAOS_REPORT, lines.join("\n") + "\n");
  expect(result.facts.faults.map((f) => f.kind).sort()).toEqual([...FAULT_KINDS].sort());
  expect(result.verdict.figures.acked).toBeGreaterThan(0);
  expect(result.verdict.violations).toEqual([]);
}, 600_000);
