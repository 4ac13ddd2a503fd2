// Coding runs on real processes (issue 31): three `crewlet run` members, each with its
// sidecar, a real bubblewrap box per run driven by the fake coding CLI. A run started on the
// seat's holder outlives a kill -9 of that node; the seat moves, and its new holder collects
// the result and tells it once. A question parked while the seat changes holder is answered
// from the thread and resumes the run once. A removed seat's runs are ended before its
// mailboxes go. A collected run's diff and output are kept as files in its thread.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { connect } from "nats";
import { systemClock } from "../../src/clock.ts";
import { encodedSlot } from "../../src/coord/bucket.ts";
import { SLOT_BUCKETS } from "../../src/coord/buckets.ts";
import { openBucket } from "../../src/coord/kv.ts";
import { silentLogger } from "../../src/log.ts";
import { RunFenced, RunStore } from "../../src/sandbox/runs.ts";
import { makeFleet, waitFor, type Fleet, type FleetNode } from "../support/fleet.ts";
import { fleetReads } from "../support/fleet-reads.ts";

const FAKE_CLI = resolve(import.meta.dir, "../support/fake-coding-cli.sh");
/** Long enough to kill the node, move the seat and restart the node while it works. */
const LONG_TASK = "print:working;sleep:14;write:out.txt=done;commit:long job;print:finished long";
const ASK_TASK = "ask:Which colour?;write:c.txt=$ANSWER;commit:paint;print:painted";

function company(roles = [{ name: "Engineer", handle: "engineer", sandbox: { engines: ["fake"] } }]) {
  return {
    name: "Runs Co",
    providers: {
      sandbox: { type: "local", engines: { fake: { command: ["/bin/sh", FAKE_CLI, "{task}"] } } },
      llm: {
        s: {
          type: "scripted",
          rules: [
            // First: a report quotes its task, which the rules below would take for a request.
            { when: { trigger: "sandbox_run" }, reply: "Run report: {{text}}" },
            { when: { seat: "engineer", text: "(?i)long job" }, tool_calls: [{ tool: "run_sandbox", args: { task: LONG_TASK } }], reply: "Started the long job." },
            { when: { seat: "engineer", text: "(?i)ask me" }, tool_calls: [{ tool: "run_sandbox", args: { task: ASK_TASK } }], reply: "Started the painting." },
            { when: {}, reply: "ok" },
          ],
        },
      },
    },
    default_llm: "s",
    roles: [...roles, { name: "Founder", handle: "founder", kind: "human" }],
  };
}

interface Run {
  id: string;
  state: string;
  node: string;
  owner: string;
  owner_epoch: number;
  reported: boolean;
  question: { posted: boolean } | null;
  answer: { text: string } | null;
  result: { outcome: string; reason: string } | null;
}

let fleet: Fleet;
const { live, json, holder: holderOf, thread, post, kill9AndWaitForMove: moveAway } = fleetReads(() => fleet);
const holder = () => holderOf("engineer");
const kill9AndWaitForMove = (h: FleetNode) => moveAway(h, "engineer");



async function run(id: string): Promise<Run | null> {
  for (const n of live()) {
    const r = await json<Run>(n, `/runs/${id}`);
    if (r) return r;
  }
  return null;
}



/** The run the seat started for the message `root`, once its record shows it. */
async function runFor(root: string): Promise<Run> {
  return waitFor(`the run for ${root}`, async () => {
    for (const n of live()) {
      const page = await json<{ runs: (Run & { conversation: string })[] }>(n, "/runs?seat=engineer");
      const r = page?.runs.find((x) => x.conversation === `chat:general:${root}`);
      if (r) return r;
    }
    return null;
  }, 60_000);
}


beforeAll(async () => {
  fleet = await makeFleet({ nodes: ["a", "b", "c"].map((id) => ({ id, kind: "member" as const })), leaseTtlSeconds: 6, company: company(), testing: { mailbox_grace_seconds: 4, maintenance_tick_seconds: 2 } });
  await Promise.all(fleet.nodes.map((n) => n.start()));
  await Promise.all(fleet.nodes.map((n) => n.waitReady(90_000)));
}, 120_000);

afterAll(async () => {
  await fleet?.stop();
});

describe("coding runs across nodes", () => {
  test("a run started on node A completes after A is killed -9: the seat's new holder collects it and its turn reports it once", async () => {
    const a = await waitFor("a holder of @engineer", holder, 60_000);
    const root = await post(a, "@engineer please do the long job");
    const started = await runFor(root);
    expect(started.node).toBe(a.id);
    await waitFor("the run running", async () => ((await run(started.id))?.state === "running" ? true : null), 30_000);

    const b = await kill9AndWaitForMove(a);
    // A's box keeps working; its supervisor reaches the broker again when A's node is back.
    await a.start();
    await a.waitReady(90_000);
    const done = await waitFor("the run told", async () => {
      const r = await run(started.id);
      return r?.reported ? r : null;
    }, 90_000);
    expect(done).toMatchObject({ state: "done", result: { outcome: "succeeded" } });
    // Collected under a later grant than the one it started under, by the node holding it.
    expect(done.owner_epoch).toBeGreaterThan(started.owner_epoch);
    const reports = await waitFor("the report in the thread", async () => {
      const r = (await thread(root)).filter((m) => m.author === "engineer" && m.body.startsWith("Run report:"));
      return r.length > 0 ? r : null;
    }, 60_000);
    await Bun.sleep(3_000);
    expect((await thread(root)).filter((m) => m.author === "engineer" && m.body.startsWith("Run report:"))).toHaveLength(1);
    // Read after the settle: the event line follows the record's `reported` write.
    const collector = fleet.nodes.filter((n) => n.eventsEver("sandbox_run_finished").some((e) => e.run === started.id));
    expect(collector.map((n) => n.id)).toEqual([b.id]);
    expect(reports[0]!.body).toContain("long job");
    expect(reports[0]!.body).toContain(started.id);
    // Its diff and output kept as files, on the seat's message in the thread.
    const files = await waitFor("the run's files in the thread", async () => {
      const res = await b.get(`/chat/messages/run-${started.id}-files/files`);
      if (res.status !== 200) return null;
      const got = ((await res.json()) as { files: { name: string }[] }).files;
      return got.length === 2 ? got : null;
    }, 30_000);
    expect(files.map((f) => f.name)).toEqual([`run-${started.id}.diff`, `run-${started.id}.log`]);

    // The killed node's grant, come back as a zombie's late write to the record on the
    // fleet's real KV: refused by owner_epoch, the record untouched.
    const auth = b.natsAuth();
    const nc = await connect({ servers: `127.0.0.1:${b.clientPort}`, user: auth.user, pass: auth.pass });
    try {
      const bucket = await openBucket({ nc, clock: systemClock, spec: SLOT_BUCKETS.runs, replicas: 3, timeout_ms: 10_000, log: silentLogger, creates: false });
      const store = new RunStore(encodedSlot(bucket), systemClock);
      await expect(store.mutate("engineer", started.id, { owner: started.owner, epoch: started.owner_epoch }, (r) => ({ ...r, reported: false }))).rejects.toBeInstanceOf(RunFenced);
      expect(await store.get("engineer", started.id)).toMatchObject({ reported: true, owner_epoch: done.owner_epoch });
    } finally {
      await nc.close();
    }
  }, 300_000);

  test("a question parked while the seat changes holder is answered from the thread and resumes the run once", async () => {
    const h = await waitFor("a holder of @engineer", holder, 60_000);
    const root = await post(h, "@engineer ask me something");
    const started = await runFor(root);
    await waitFor("the question posted", async () => ((await run(started.id))?.question?.posted ? true : null), 60_000);
    expect((await thread(root)).filter((m) => m.body.includes("Which colour?"))).toHaveLength(1);

    const g = await kill9AndWaitForMove(h);
    // Answered while the run's own node is down: the answer waits on the run record.
    await post(g, "@engineer blue", root);
    await waitFor("the answer recorded", async () => ((await run(started.id))?.answer ? true : null), 60_000);
    await h.start();
    await h.waitReady(90_000);
    const done = await waitFor("the run told", async () => {
      const r = await run(started.id);
      return r?.reported ? r : null;
    }, 90_000);
    expect(done).toMatchObject({ state: "done", result: { outcome: "succeeded" }, answer: { text: "blue" } });
    const given = fleet.nodes.flatMap((n) => n.eventsEver("sandbox_answer_given")).filter((e) => e.run === started.id);
    expect(given).toHaveLength(1);
    const resumed = readFileSync(join(h.dir, "store", "runs", started.id, "supervisor.log"), "utf8").split("\n").filter((l) => l.includes('"sandbox_run_resumed"'));
    expect(resumed).toHaveLength(1);
    await Bun.sleep(3_000);
    const reports = (await thread(root)).filter((m) => m.author === "engineer" && m.body.startsWith("Run report:"));
    expect(reports).toHaveLength(1);
    expect(reports[0]!.body).toContain("+blue");
  }, 300_000);

  test("a removed seat's runs are ended (seat_removed) before its mailboxes are deleted", async () => {
    const h = await waitFor("a holder of @engineer", holder, 60_000);
    const root = await post(h, "@engineer ask me again");
    const started = await runFor(root);
    await waitFor("parked", async () => ((await run(started.id))?.state === "parked" ? true : null), 60_000);
    const res = await h.post("/config/revisions", { company: company([]) });
    expect(res.status).toBe(201);
    const ended = await waitFor("the run ended", async () => {
      for (const n of live()) {
        const e = n.events("sandbox_run_ended").find((x) => x.run === started.id);
        if (e) return { node: n, line: e };
      }
      return null;
    }, 120_000);
    expect(ended.line).toMatchObject({ seat: "engineer", reason: "seat_removed" });
    const lines = ended.node.log().split("\n");
    const endedAt = lines.findIndex((l) => l.includes('"sandbox_run_ended"') && l.includes(started.id));
    const retiredAt = lines.findIndex((l) => l.includes('"seat_mailbox_retired"') && l.includes('"engineer"'));
    await waitFor("the mailbox retired", async () => (ended.node.log().includes('"seat_mailbox_retired"') ? true : null), 30_000);
    expect(endedAt).toBeGreaterThanOrEqual(0);
    expect(retiredAt === -1 || retiredAt > endedAt).toBe(true);
    expect(await run(started.id)).toBeNull();
    // The box heard its record go and ended.
    const sup = join(h.dir, "store", "runs", started.id, "supervisor.log");
    await waitFor("the box ended", async () => (existsSync(sup) && readFileSync(sup, "utf8").includes('"sandbox_run_cancelled"') ? true : null), 30_000);
  }, 300_000);
});
