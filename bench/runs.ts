// Coding run latency (issue 31) on a real one-box node: how long from a seat's run_sandbox
// call until the engine's process runs, and from the engine's end until the seat's turn
// with the result starts. Prints figures; never fails on time.
//
//   bun bench/runs.ts [--runs 30] [--concurrency 1] [--isolation both|bwrap|none] [--warmup 1]
//                     [--binary dist/crewlet-linux-x64]
//
// One `crewlet run` member (test/support/fleet.ts) with its sidecar, JetStream KV for the run
// records, and the scripted provider: a founder's "@benchK bench run" makes seat benchK call
// run_sandbox with TASK; the run's result comes back as a `sandbox_run` turn. --concurrency C
// gives C seats, each driving its share of --runs one after another (a seat's next run is
// asked for once the turn that reported its last one completed). --isolation both boots one
// node per setting, bwrap first. --warmup runs per node are driven first and left out.
// --binary runs a compiled crewlet (build.ts) instead of src/main.ts under bun: the node and
// each run's supervisor (the same executable, launch.ts selfCommand) start as they ship.
//
// The engine is test/support/fake-coding-cli.sh wrapped in a shell that stamps the time
// (date +%s%N) into its HOME (<box>/home) before and after the CLI: `started` and `ended`.
// Each figure spans, per run:
//   start       the run record's created_at (the clock read inside run_sandbox, before it
//               writes the record and launches anything) → the engine's `started` stamp (its
//               first command, inside the box, after bwrap and prlimit exec'd it)
//     launch      created_at → sandbox_run_started (node log: supervisor spawned, record running)
//     supervisor  → sandbox_supervisor_started (supervisor.log: the detached process is up)
//     box         → `started` (broker connect, bwrap probe, work dir + git init, bwrap/prlimit)
//   completion  the engine's `ended` stamp (its last command, the CLI's exit seen) → the
//               seat's turn_started whose trigger_ids hold run.<id>.done (node log)
//     result      `ended` → sandbox_run_exited (supervisor.log: pipes closed, diff read with git)
//     collect     → turn_started: the supervisor's publish on the control subject, the seat's
//                 holder marking the record done and putting the trigger on the seat's inbox,
//                 the inbox delivering it. (sandbox_run_finished is logged after the trigger is
//                 published and the record marked reported, so the turn often starts before
//                 it: it is no boundary between the two.)
// Log stamps are whole milliseconds (ISO ts), the engine's are nanoseconds; one machine, one
// clock. p50/p99 are nearest-rank: with fewer than 100 runs p99 is the largest but one or the max.
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { z } from "zod";
import { benchArgs, countFlag, wholeFlag } from "./args.ts";
import { makeFleet, type Fleet, type FleetNode } from "../test/support/fleet.ts";

const args = benchArgs(
  "runs",
  "[--runs 30] [--concurrency 1] [--isolation both|bwrap|none] [--warmup 1] [--binary PATH]",
  z.object({
    runs: countFlag(30, 10_000),
    // Each seat is one run at a time; the seats share out --runs.
    concurrency: countFlag(1, 16),
    isolation: z.enum(["both", "bwrap", "none"]).default("both"),
    warmup: wholeFlag(0, 100).default(1),
    binary: z
      .string()
      .refine((p) => existsSync(p), "no such file (build one with bun run build.ts)")
      .transform((p) => resolve(p))
      .optional(),
  }),
);

const FAKE_CLI = resolve(import.meta.dir, "../test/support/fake-coding-cli.sh");
/** A run that does almost nothing: what is timed is the machinery around it. */
const TASK = "print:started;exit:0";
/** The engine: stamps around the fake CLI, in its HOME (bound read-write in the box, and not
 *  in the work dir, so no stamp shows in the run's diff). */
const ENGINE = [
  "/bin/sh",
  "-c",
  'date +%s%N > "$HOME/started"; /bin/sh "$0" "$1"; rc=$?; date +%s%N > "$HOME/ended"; exit $rc',
  FAKE_CLI,
  "{task}",
];
/** One run, from the founder's message to its result's turn completed, on a quiet box. */
const RUN_WITHIN_MS = 60_000;
const POLL_MS = 25;

const seatName = (k: number) => `bench${k + 1}`;

function company(seats: number, isolation: "bwrap" | "none") {
  return {
    name: "Runs Bench",
    providers: {
      sandbox: { type: "local", isolation, engines: { timed: { command: ENGINE } } },
      llm: {
        s: {
          type: "scripted",
          rules: [
            // First: a report quotes its task, which the rule below would take for a request.
            { when: { trigger: "sandbox_run" }, reply: "Run report: {{text}}" },
            { when: { text: "(?i)bench run" }, tool_calls: [{ tool: "run_sandbox", args: { task: TASK } }], reply: "Started." },
            { when: {}, reply: "ok" },
          ],
        },
      },
    },
    default_llm: "s",
    roles: [
      ...Array.from({ length: seats }, (_, k) => ({ name: `Bench ${k + 1}`, handle: seatName(k), sandbox: { engines: ["timed"] } })),
      { name: "Founder", handle: "founder", kind: "human" },
    ],
  };
}

/** The node's log read as it grows: each poll parses only the new lines. */
class LogTail {
  private offset = 0;
  private rest = "";
  readonly lines: Record<string, unknown>[] = [];
  constructor(private readonly file: string) {}
  poll(): void {
    if (!existsSync(this.file)) return;
    const buf = readFileSync(this.file);
    if (buf.length <= this.offset) return;
    const text = this.rest + buf.subarray(this.offset).toString("utf8");
    this.offset = buf.length;
    const parts = text.split("\n");
    this.rest = parts.pop() ?? "";
    for (const l of parts) {
      if (!l.startsWith("{")) continue;
      try {
        this.lines.push(JSON.parse(l) as Record<string, unknown>);
      } catch {
        // a line that is not an event
      }
    }
  }
  find(pred: (e: Record<string, unknown>) => boolean): Record<string, unknown> | undefined {
    return this.lines.find(pred);
  }
}

async function until<T>(what: string, probe: () => T | undefined | null | Promise<T | undefined | null>, within_ms: number, node: FleetNode): Promise<T> {
  const deadline = Date.now() + within_ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== null) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${within_ms} ms\n${node.log().slice(-3000)}`);
    await Bun.sleep(POLL_MS);
  }
}

const at = (e: Record<string, unknown> | undefined, what: string): number => {
  if (!e) throw new Error(`no ${what} line`);
  return Date.parse(String(e.ts));
};

/** A stamp the engine wrote (ns since the epoch) as ms, kept to the microsecond. */
function stamp(file: string): number {
  const ns = BigInt(readFileSync(file, "utf8").trim());
  return Number(ns / 1000n) / 1000;
}

interface Timing {
  launch: number;
  supervisor: number;
  box: number;
  start: number;
  result: number;
  collect: number;
  completion: number;
}

/** Drives one run on `seat` to its result's turn completed; returns the run id. */
async function driveOne(node: FleetNode, tail: LogTail, seat: string, seen: Set<string>, k: number): Promise<string> {
  const res = await node.post("/chat/channels/general/messages", { body: `@${seat} bench run ${k}`, author: "founder" });
  if (!res.ok) throw new Error(`post: ${res.status} ${await res.text()}`);
  const run = await until(`${seat}'s run ${k} started`, () => {
    tail.poll();
    const e = tail.find((x) => x.event === "sandbox_run_started" && x.seat === seat && !seen.has(String(x.run)));
    return e ? String(e.run) : null;
  }, RUN_WITHIN_MS, node);
  seen.add(run);
  const failed = () => tail.find((x) => x.event === "sandbox_run_failed" && x.run === run);
  const turn = await until(`run ${run}'s result turn`, () => {
    tail.poll();
    const f = failed();
    if (f) throw new Error(`run ${run} failed: ${String(f.outcome)}: ${String(f.reason)}`);
    const e = tail.find((x) => x.event === "turn_started" && Array.isArray(x.trigger_ids) && x.trigger_ids.includes(`run.${run}.done`));
    return e ? String(e.turn_id) : null;
  }, RUN_WITHIN_MS, node);
  await until(`run ${run}'s result turn completed`, () => {
    tail.poll();
    return tail.find((x) => x.event === "turn_completed" && x.turn_id === turn) ? true : null;
  }, RUN_WITHIN_MS, node);
  return run;
}

async function timingOf(node: FleetNode, tail: LogTail, run: string): Promise<Timing> {
  const dir = join(node.dir, "store", "runs", run);
  const res = await node.get(`/runs/${run}`);
  if (!res.ok) throw new Error(`GET /runs/${run}: ${res.status}`);
  const rec = (await res.json()) as { created_at: number; result: { outcome: string } | null };
  if (rec.result?.outcome !== "succeeded") throw new Error(`run ${run}: ${JSON.stringify(rec.result)}`);
  const sup = readFileSync(join(dir, "supervisor.log"), "utf8")
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const supEvent = (name: string) => sup.find((e) => e.event === name);
  const home = join(dir, "box", "home");
  const created = rec.created_at;
  const launched = at(tail.find((e) => e.event === "sandbox_run_started" && e.run === run), "sandbox_run_started");
  const supStarted = at(supEvent("sandbox_supervisor_started"), "sandbox_supervisor_started");
  const engineStarted = stamp(join(home, "started"));
  const engineEnded = stamp(join(home, "ended"));
  const exited = at(supEvent("sandbox_run_exited"), "sandbox_run_exited");
  const turn = at(tail.find((e) => e.event === "turn_started" && Array.isArray(e.trigger_ids) && e.trigger_ids.includes(`run.${run}.done`)), "turn_started");
  return {
    launch: launched - created,
    supervisor: supStarted - launched,
    box: engineStarted - supStarted,
    start: engineStarted - created,
    result: exited - engineEnded,
    collect: turn - exited,
    completion: turn - engineEnded,
  };
}

/** Until every run's supervisor has said it is done (its result acknowledged): none is left
 *  behind when the node goes. */
async function supervisorsGone(node: FleetNode, runs: string[]): Promise<void> {
  await until("every supervisor finished", () => {
    const left = runs.filter((r) => !readFileSync(join(node.dir, "store", "runs", r, "supervisor.log"), "utf8").includes('"sandbox_supervisor_finished"'));
    return left.length === 0 ? true : null;
  }, RUN_WITHIN_MS, node);
}

async function measure(isolation: "bwrap" | "none"): Promise<{ timings: Timing[]; elapsed_s: number }> {
  const seats = Array.from({ length: args.concurrency }, (_, k) => seatName(k));
  let fleet: Fleet | null = null;
  try {
    fleet = await makeFleet({ nodes: [{ id: "a", kind: "member" }], company: company(seats.length, isolation), logLevel: "info", binary: args.binary });
    const node = fleet.node("a");
    await node.start();
    await node.waitReady(90_000);
    await until("every bench seat held", async () => {
      const res = await node.get("/health").catch(() => null);
      const h = res?.ok ? ((await res.json()) as { seats?: { held?: string[] } }) : null;
      return seats.every((s) => h?.seats?.held?.includes(s)) ? true : null;
    }, 60_000, node);
    const tail = new LogTail(node.logFile);
    const seen = new Set<string>();
    const all: string[] = [];
    for (let w = 0; w < args.warmup; w++) all.push(await driveOne(node, tail, seats[w % seats.length]!, seen, -1 - w));
    const measured: string[] = [];
    const t0 = performance.now();
    await Promise.all(
      seats.map(async (seat, k) => {
        for (let i = k; i < args.runs; i += seats.length) measured.push(await driveOne(node, tail, seat, seen, i));
      }),
    );
    const elapsed_s = (performance.now() - t0) / 1000;
    all.push(...measured);
    const timings: Timing[] = [];
    for (const r of measured) timings.push(await timingOf(node, tail, r));
    await supervisorsGone(node, all);
    return { timings, elapsed_s };
  } finally {
    await fleet?.stop();
  }
}

/** Nearest-rank percentile of sorted `xs`. */
function pct(xs: number[], p: number): number {
  return xs[Math.max(0, Math.ceil((p / 100) * xs.length) - 1)]!;
}

const ROWS: [keyof Timing, string][] = [
  ["start", "start: run_sandbox → engine process running"],
  ["launch", "  launch (record, spawn supervisor)"],
  ["supervisor", "  supervisor process up"],
  ["box", "  box (broker, work dir, isolation) → engine"],
  ["completion", "completion: engine ended → seat turn start"],
  ["result", "  result read (pipes, git diff)"],
  ["collect", "  collect (control → record → inbox → turn)"],
];

function table(isolation: string, r: { timings: Timing[]; elapsed_s: number }): void {
  const n = r.timings.length;
  console.log(`\nisolation ${isolation}: ${n} runs in ${r.elapsed_s.toFixed(1)} s (${(n / r.elapsed_s).toFixed(2)} runs/s, ${args.concurrency} seat${args.concurrency === 1 ? "" : "s"} at once)`);
  const f = (x: number) => x.toFixed(1).padStart(8);
  console.log(`${"ms".padEnd(44)} ${"n".padStart(4)} ${"min".padStart(8)} ${"p50".padStart(8)} ${"p99".padStart(8)} ${"max".padStart(8)}`);
  for (const [key, label] of ROWS) {
    const xs = r.timings.map((t) => t[key]).sort((a, b) => a - b);
    console.log(`${label.padEnd(44)} ${String(n).padStart(4)} ${f(xs[0]!)} ${f(pct(xs, 50))} ${f(pct(xs, 99))} ${f(xs[n - 1]!)}`);
  }
}

const settings: ("bwrap" | "none")[] = args.isolation === "both" ? ["bwrap", "none"] : [args.isolation];
console.log(`bench/runs: bun bench/runs.ts --runs ${args.runs} --concurrency ${args.concurrency} --isolation ${args.isolation} --warmup ${args.warmup}${args.binary ? ` --binary ${args.binary}` : ""}`);
console.log(`one crewlet node (${args.binary ?? "src/main.ts under bun"}, sidecar nats-server R1), scripted provider, engine: fake-coding-cli.sh "${TASK}" with time stamps; ${args.warmup} warm-up run(s) per node left out`);
for (const s of settings) table(s, await measure(s));
