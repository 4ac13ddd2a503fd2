// Seeded simulation of coding runs (issue 31; spec: Fencing, "Sandbox control is
// owner-routed"): three nodes' SeatRuns over one in-memory broker and run store, one
// FakeClock, twin boxes under the real supervisor logic. A seeded stream of seat moves
// (a clean hand-over, or a crash that leaves the old holder a zombie still attached to the
// control subject and still answering), runs started, questions answered from the thread
// (copies of a reply included, as a redelivery would bring them), supervisor publishes the
// broker fails, and time. Invariants, checked on every record write and at the end:
//   1. a run's owner_epoch never goes down (no write under a stale epoch lands);
//   2. never two resumes of one run: each question is answered at most once, with one text;
//   3. a run's result is told at most once (one sandbox_run_finished/failed per run), and
//      once the faults stop, every run is done and told.
import { afterEach, describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import type { Company } from "../../src/config/company.ts";
import { companySchema } from "../../src/config/company.ts";
import { encodedSlot } from "../../src/coord/bucket.ts";
import { MemoryBucket } from "../../src/coord/local.ts";
import type { KvSlot } from "../../src/coord/contract.ts";
import type { EventSink } from "../../src/agent/events.ts";
import { silentLogger } from "../../src/log.ts";
import type { Trigger } from "../../src/org/trigger.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { mailbox } from "../../src/queue/topics.ts";
import type { SupervisorFile } from "../../src/sandbox/launch.ts";
import { decodeRun, RunStore, runKey } from "../../src/sandbox/runs.ts";
import { SeatRuns } from "../../src/sandbox/seat-runs.ts";
import { Supervisor } from "../../src/sandbox/supervisor.ts";
import { TwinBoxProvider } from "../../src/sandbox/twin.ts";
import { LocalEstate } from "../agent/support.ts";
import { rng } from "../support/rng.ts";

const SEEDS = Number(process.env.CREWLET_SIM_SEEDS ?? 12);
const STEPS = Number(process.env.CREWLET_SIM_STEPS ?? 300);
const NODES = ["n1", "n2", "n3"];
const TASKS = ["sleep:3;write:a.txt=x;commit:a", "ask:Colour?;write:c.txt=$ANSWER;commit:c", "ask:One?;ask:Two?;print:$ANSWER", "sleep:1;exit:3", "print:quick"];

const company: Company = companySchema.parse({
  name: "Sim Runs",
  providers: { llm: { s: { type: "scripted" } }, sandbox: { type: "local", isolation: "none", engines: { twin: { command: ["twin", "{task}"] } } } },
  default_llm: "s",
  roles: [{ name: "Engineer", handle: "engineer", sandbox: { max_runs: 64 } }, { name: "Founder", handle: "founder", kind: "human" }],
});

let estate: LocalEstate | null = null;
afterEach(() => {
  estate?.close();
  estate = null;
});

async function runSeed(seed: number): Promise<{ runs: number; moves: number; answers: number; fenced: number }> {
  const rand = rng(seed);
  const clock = new FakeClock();
  const queue = new MemoryQueue({ clock, log: silentLogger });
  await queue.ensureStreams();
  const slot: KvSlot = encodedSlot(new MemoryBucket("crewlet_runs", 0, clock));
  const store = new RunStore(slot, clock);
  estate = new LocalEstate(company);
  const violations: string[] = [];
  const told = new Map<string, number>();
  const faults = { publish: 0.2 };

  // Invariants 1 and 2, judged on every write the store takes.
  const lastEpoch = new Map<string, number>();
  const answers = new Map<string, string>();
  await slot.watch((e) => {
    if (e.operation !== "put") return;
    const d = decodeRun(e.value);
    if (!d.ok) return void violations.push(`undecodable record ${e.key}`);
    const r = d.value;
    if (r.owner_epoch < (lastEpoch.get(r.id) ?? 0)) violations.push(`run ${r.id} written at epoch ${r.owner_epoch} after ${lastEpoch.get(r.id)}`);
    lastEpoch.set(r.id, Math.max(r.owner_epoch, lastEpoch.get(r.id) ?? 0));
    if (r.answer) {
      const k = `${r.id}#${r.answer.seq}`;
      const seen = answers.get(k);
      if (seen !== undefined && seen !== r.answer.text) violations.push(`run ${r.id} question ${r.answer.seq} answered twice (${seen} / ${r.answer.text})`);
      answers.set(k, r.answer.text);
    }
  });

  const events = (node: string): EventSink => ({
    emit(name, f) {
      if (name === "sandbox_run_finished" || name === "sandbox_run_failed") {
        const run = String(f.run);
        told.set(run, (told.get(run) ?? 0) + 1);
        if (told.get(run)! > 1) violations.push(`run ${run} told twice (last by ${node})`);
      }
    },
  });

  const supervisors: Promise<unknown>[] = [];
  const launch = (_dir: string, f: SupervisorFile) => {
    supervisors.push(
      (async () => {
        const box = await new TwinBoxProvider({ clock }).open(f.spec, "/twin");
        const sup = new Supervisor({ seat: f.seat, run_id: f.run_id, control_subject: f.control_subject }, box, {
          publish: async (subject, data, msgId) => {
            if (rand() < faults.publish) throw new Error("the broker did not answer (injected)");
            await queue.publish(subject, data, { msgId });
          },
          watchRun: async (onRecord) =>
            slot.watch((e) => {
              if (e.operation !== "put") return onRecord(null);
              const d = decodeRun(e.value);
              if (d.ok) onRecord(d.value);
            }, { key: runKey(f.seat, f.run_id), includeCurrent: true }),
        }, clock, silentLogger);
        return sup.supervise();
      })(),
    );
    return 1000 + supervisors.length;
  };

  const node = (id: string, incarnation: number) =>
    new SeatRuns({ node_id: id, owner: `${id}:${incarnation}`, storeDir: `/sim/${id}`, store, runs_bucket: "crewlet_runs", queue, estate: estate!, company: () => company, broker: () => ({ servers: ["nats://sim"] }), clock, log: silentLogger, events: events(id), launch });

  let epoch = 1;
  let holder = { id: "n1", runs: node("n1", 1), epoch };
  await holder.runs.prepare({ handle: "engineer", epoch });
  const zombies: { id: string; runs: SeatRuns; epoch: number }[] = [];
  const offered = new Set<string>();
  const started: string[] = [];
  let moves = 0;
  let given = 0;
  let fenced = 0;
  let incarnation = 1;

  const replyTo = async (id: string, seq: number, n: number): Promise<Trigger | null> => {
    const r = await store.get("engineer", id);
    if (!r || r.state !== "parked" || !r.question?.posted || r.question.seq !== seq) return null;
    const root = r.conversation.split(":")[2]!;
    const msg = await estate!.post("general", "founder", `@engineer answer-${seq}-${n}`, root);
    return { type: "chat_mention", event_id: `wake.chat.${msg}.engineer`, seat: "engineer", conversation: r.conversation, from: "founder", text: `founder: answer-${seq}-${n}`, refs: { channel: "general", message_id: msg }, created_at: clock.now() };
  };

  for (let step = 0; step < STEPS; step++) {
    const roll = rand();
    if (roll < 0.12) {
      // The seat moves: a clean hand-over, or a crash that leaves a zombie attached.
      moves++;
      if (rand() < 0.5) await holder.runs.release("engineer");
      else zombies.push(holder);
      epoch++;
      incarnation++;
      const id = NODES[Math.floor(rand() * NODES.length)]!;
      holder = { id, runs: node(id, incarnation), epoch };
      await holder.runs.prepare({ handle: "engineer", epoch });
    } else if (roll < 0.3) {
      const root = await estate.post("general", "founder", "@engineer go");
      const res = await holder.runs.tool().call({ task: TASKS[Math.floor(rand() * TASKS.length)]! }, { seat: "engineer", epoch: holder.epoch, turn_id: `t${step}`, signal: new AbortController().signal, conversation: `chat:general:${root}`, from: "founder" });
      if (!res.is_error) started.push((JSON.parse(res.content) as { run_id: string }).run_id);
    } else if (roll < 0.55 && started.length > 0) {
      // A reply in a parked run's thread, to the holder or (as a zombie would) to a stale node;
      // sometimes a copy of a reply offered already, as a redelivery brings it.
      const id = started[Math.floor(rand() * started.length)]!;
      const r = await store.get("engineer", id);
      if (r?.question) {
        const t = await replyTo(id, r.question.seq, step);
        if (t) {
          const who = zombies.length > 0 && rand() < 0.3 ? zombies[Math.floor(rand() * zombies.length)]! : holder;
          const copies = rand() < 0.3 ? 2 : 1;
          for (let c = 0; c < copies; c++) {
            if (offered.has(t.event_id) && c === 0) continue;
            try {
              const taken = await who.runs.takeAnswers("engineer", who.epoch, [t]);
              given += taken.length;
              for (const x of taken) offered.add(x.event_id);
            } catch (err) {
              if ((err as Error).name === "RunFenced") fenced++;
              else throw err;
            }
          }
        }
      }
    }
    await clock.advance(Math.floor(rand() * 1500));
    if (violations.length > 0) break;
  }

  // Faults stop: the zombies are gone, the broker answers, every parked question is answered.
  faults.publish = 0;
  for (const z of zombies) await z.runs.release("engineer");
  for (let round = 0; round < 40; round++) {
    for (const id of started) {
      const r = await store.get("engineer", id);
      if (r?.state === "parked" && r.question?.posted) {
        const t = await replyTo(id, r.question.seq, 10_000 + round);
        if (t) given += (await holder.runs.takeAnswers("engineer", holder.epoch, [t])).length;
      }
    }
    await clock.advance(5_000);
  }
  for (const id of started) {
    const r = await store.get("engineer", id);
    if (!r || r.state !== "done" || !r.reported) violations.push(`run ${id} not done and told at the end (${r?.state}, reported=${r?.reported})`);
    if ((told.get(id) ?? 0) !== 1) violations.push(`run ${id} told ${told.get(id) ?? 0} times`);
  }
  await holder.runs.release("engineer");
  expect(violations).toEqual([]);
  return { runs: started.length, moves, answers: given, fenced };
}

describe("coding runs under seat moves, zombies and a flaky broker (seeded)", () => {
  test(`${SEEDS} seeds × ${STEPS} steps: no stale write, no second resume, every result told once`, async () => {
    const totals = { runs: 0, moves: 0, answers: 0, fenced: 0 };
    for (let seed = 1; seed <= SEEDS; seed++) {
      const r = await runSeed(seed);
      for (const k of Object.keys(totals) as (keyof typeof totals)[]) totals[k] += r[k];
      estate?.close();
      estate = null;
    }
    // The faults were exercised, not merely scheduled.
    expect(totals.moves).toBeGreaterThan(SEEDS * 10);
    expect(totals.runs).toBeGreaterThan(SEEDS * 20);
    expect(totals.answers).toBeGreaterThan(0);
    console.log(`runs sim: ${JSON.stringify(totals)}`);
  }, 300_000);
});
