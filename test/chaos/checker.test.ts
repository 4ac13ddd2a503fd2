// The chaos checker's rules, by table: each row a small story the logs, chat and broker
// could tell, and what the checker must say about it. The schedule's determinism too.
import { describe, expect, test } from "bun:test";
import { check, fencesByTouch, unrenewedMax, percentile, tenuresOf, type ApprovalFact, type ChaosFacts, type FaultRecord, type Reply, type Sent } from "./checker.ts";
import { FAULT_KINDS, planFaults } from "./schedule.ts";

const T0 = 1_000_000;

function facts(over: Partial<ChaosFacts>): ChaosFacts {
  return {
    seats: ["s1"],
    incarnations: [
      { node: "a", inc: 1, started_ms: T0, ended_ms: null, exit_code: null },
      { node: "b", inc: 1, started_ms: T0, ended_ms: null, exit_code: null },
    ],
    claims: [],
    detaches: [],
    turns: [],
    faults: [],
    sent: [],
    replies: [],
    heldByBroker: new Set(),
    streamReplicas: { CREWLET_AGENT: 3 },
    membersReplicas: 3,
    streamUpdates: [],
    leaf: "l",
    probeAnswered: new Set(["s1"]),
    run_started_ms: T0,
    run_ended_ms: T0 + 100_000,
    ...over,
  };
}

const claim = (node: string, epoch: number, ts: number, inc = 1, seat = "s1") => ({ node, inc, seat, epoch, ts: T0 + ts });
const detach = (node: string, epoch: number, ts: number, inc = 1, seat = "s1") => ({ node, inc, seat, epoch, ts: T0 + ts, mode: "voluntary" });
const turn = (node: string, epoch: number, ts: number, inc = 1, seat = "s1") => ({ node, inc, seat, epoch, ts: T0 + ts });
const fault = (kind: FaultRecord["kind"], target: string, at: number, healed: number | null = null, extra: Partial<FaultRecord> = {}): FaultRecord => ({
  kind,
  targets: [target],
  at_ms: T0 + at,
  healed_ms: healed === null ? null : T0 + healed,
  ...extra,
});
const sent = (id: string, acked: number, status = 200, seat = "s1"): Sent => ({ key: `k-${id}`, seat, status, message_id: id, acked_ms: T0 + acked });
const reply = (id: string, at: number, author = "s1"): Reply => ({ thread_parent: id, author, created_ms: T0 + at });

describe("ownership", () => {
  const cases: [string, Partial<ChaosFacts>, string[]][] = [
    ["a voluntary handover: detach, then the next claim", { claims: [claim("a", 1, 0), claim("b", 2, 5_000)], detaches: [detach("a", 1, 4_000)] }, []],
    ["two holders at once", { claims: [claim("a", 1, 0), claim("b", 2, 5_000)], detaches: [detach("a", 1, 6_000)] }, ["overlap"]],
    ["an epoch that does not increase", { claims: [claim("a", 2, 0), claim("b", 2, 5_000)], detaches: [detach("a", 2, 4_000)] }, ["epochs"]],
    [
      "kill -9 ends a tenure at the kill",
      {
        incarnations: [
          { node: "a", inc: 1, started_ms: T0, ended_ms: T0 + 3_000, exit_code: 137 },
          { node: "b", inc: 1, started_ms: T0, ended_ms: null, exit_code: null },
        ],
        claims: [claim("a", 1, 0), claim("b", 2, 9_000)],
        faults: [fault("kill9", "a", 3_000)],
      },
      [],
    ],
    [
      "a frozen holder: the tenure ends at the freeze; its fenced detach after SIGCONT is bookkeeping",
      {
        claims: [claim("a", 1, 0), claim("b", 2, 9_000)],
        detaches: [{ ...detach("a", 1, 20_000), mode: "fenced" }],
        faults: [fault("sigstop", "a", 2_000, 15_000, { frozen: { node: "a", inc: 1 } })],
        incarnations: [
          { node: "a", inc: 1, started_ms: T0, ended_ms: T0 + 21_000, exit_code: 75 },
          { node: "b", inc: 1, started_ms: T0, ended_ms: null, exit_code: null },
        ],
      },
      [],
    ],
    [
      "a frozen holder that runs a turn after SIGCONT under its old epoch overlaps its successor",
      {
        claims: [claim("a", 1, 0), claim("b", 2, 9_000)],
        turns: [turn("a", 1, 16_000)],
        faults: [fault("sigstop", "a", 2_000, 15_000, { frozen: { node: "a", inc: 1 } })],
        incarnations: [
          { node: "a", inc: 1, started_ms: T0, ended_ms: T0 + 21_000, exit_code: 75 },
          { node: "b", inc: 1, started_ms: T0, ended_ms: null, exit_code: null },
        ],
      },
      ["overlap"],
    ],
    [
      "a frozen node that does not exit 75",
      {
        claims: [claim("a", 1, 0)],
        faults: [fault("sigstop", "a", 2_000, 15_000, { frozen: { node: "a", inc: 1 } })],
        incarnations: [
          { node: "a", inc: 1, started_ms: T0, ended_ms: T0 + 21_000, exit_code: 1 },
          { node: "b", inc: 1, started_ms: T0, ended_ms: null, exit_code: null },
        ],
      },
      ["frozen"],
    ],
    [
      "a cut-off holder: the tenure ends at the cut, extended to a turn it still admitted before its successor",
      { claims: [claim("a", 1, 0), claim("b", 2, 9_000)], turns: [turn("a", 1, 3_000)], detaches: [{ ...detach("a", 1, 16_000), mode: "fenced" }], faults: [fault("cut_member", "a", 2_000, 15_000)] },
      [],
    ],
    [
      "a cut-off holder admitting a turn after its successor's claim",
      { claims: [claim("a", 1, 0), claim("b", 2, 9_000)], turns: [turn("a", 1, 10_000)], detaches: [{ ...detach("a", 1, 16_000), mode: "fenced" }], faults: [fault("cut_member", "a", 2_000, 15_000)] },
      ["overlap"],
    ],
    [
      "a grant revoked (seat_fenced) before its successor's claim, detached after it: the revocation ends the tenure",
      { claims: [claim("a", 1, 0), claim("b", 2, 6_000)], detaches: [{ ...detach("a", 1, 5_990), mode: "fenced" }, { ...detach("a", 1, 6_080), mode: "fenced" }] },
      [],
    ],
    [
      "…and one revoked only after the successor's claim is an overlap (seen, seed 7: a renew that hung past the lapse)",
      { claims: [claim("a", 1, 0), claim("b", 2, 6_000)], detaches: [{ ...detach("a", 1, 6_052), mode: "fenced" }, { ...detach("a", 1, 6_080), mode: "fenced" }] },
      ["overlap"],
    ],
    [
      "a claim fenced while establishing, its acquire_failed line after the successor's claim: no turn, no hold",
      { claims: [claim("a", 1, 0), claim("b", 2, 5_000)], detaches: [{ ...detach("a", 1, 6_500), mode: "fenced" }, { ...detach("a", 1, 7_000), mode: "acquire_failed" }] },
      [],
    ],
    [
      "a claim that failed before attaching (no detach line) ends at the same process's next claim",
      { claims: [claim("a", 1, 0), claim("b", 2, 5_000), claim("a", 3, 9_000)], detaches: [detach("b", 2, 8_000)] },
      ["overlap"],
    ],
    [
      "…and at its acquire_failed line",
      { claims: [claim("a", 1, 0), claim("b", 2, 5_000), claim("a", 3, 9_000)], detaches: [{ ...detach("a", 1, 1_000), mode: "acquire_failed" }, detach("b", 2, 8_000)] },
      [],
    ],
    [
      "an acquire_failed line logged after a successor's claim, with no turn admitted: the failed claim held nothing (seen: a 21 s hydration)",
      { claims: [claim("a", 1, 0), claim("b", 2, 5_000)], detaches: [{ ...detach("a", 1, 7_000), mode: "acquire_failed" }] },
      [],
    ],
    [
      "…but a turn it admitted after the successor's claim is an overlap",
      { claims: [claim("a", 1, 0), claim("b", 2, 5_000)], turns: [turn("a", 1, 6_000)], detaches: [{ ...detach("a", 1, 7_000), mode: "acquire_failed" }] },
      ["overlap"],
    ],
    [
      "a holder whose broker was killed: its drain's later detach is bookkeeping",
      { claims: [claim("a", 1, 0), claim("b", 2, 8_000)], detaches: [detach("a", 1, 11_000)], faults: [fault("broker_kill9", "a", 1_000)] },
      [],
    ],
    [
      "a cut the holder outlived keeps its tenure (nobody else claimed)",
      { claims: [claim("a", 1, 0), claim("b", 2, 30_000)], turns: [turn("a", 1, 10_000)], detaches: [detach("a", 1, 29_000)], faults: [fault("cut_member", "a", 2_000, 5_000)] },
      [],
    ],
  ];
  for (const [name, over, want] of cases) {
    test(name, () => {
      const v = check(facts(over));
      expect(v.violations.map((x) => x.split(":")[0])).toEqual(want);
    });
  }

  test("unowned time is the gap between one tenure's end and the next one's start", () => {
    const v = check(facts({ claims: [claim("a", 1, 0), claim("b", 2, 5_000)], detaches: [detach("a", 1, 4_000)] }));
    expect(v.figures.unowned_ms_total).toBe(1_000);
    expect(tenuresOf(facts({ claims: [claim("a", 1, 0)] }))[0]!.ended_by).toBe("running");
  });

  /** a holds s1 and s2 and is killed at 2 s; b claims them at 9 s and 11 s. */
  const killedA: Partial<ChaosFacts> = {
    seats: ["s1", "s2"],
    probeAnswered: new Set(["s1", "s2"]),
    claims: [claim("a", 1, 0), claim("a", 1, 0, 1, "s2"), claim("b", 2, 9_000), claim("b", 2, 11_000, 1, "s2")],
    incarnations: [
      { node: "a", inc: 1, started_ms: T0, ended_ms: T0 + 2_000, exit_code: 137 },
      { node: "b", inc: 1, started_ms: T0, ended_ms: null, exit_code: null },
    ],
    faults: [fault("kill9", "a", 2_000)],
  };

  test("failover: from the fault to the last of the target's seats claimed again", () => {
    const v = check(facts(killedA));
    expect(v.violations).toEqual([]);
    expect(v.figures.failover_ms.kill9).toEqual({ n: 1, p50: 9_000, p99: 9_000, max: 9_000 });
  });

  test("first turn: from the fault to each held seat's first successful turn on a later epoch", () => {
    const v = check(
      facts({
        ...killedA,
        // s1: a turn of the old epoch before the kill does not count; its first on epoch 2 does.
        completions: [turn("a", 1, 1_000), turn("b", 2, 9_500), turn("b", 2, 12_000), turn("b", 2, 14_000, 1, "s2")],
      }),
    );
    expect(v.figures.first_turn_ms.kill9).toEqual({ n: 2, p50: 7_500, p99: 12_000, max: 12_000 });
  });
});

describe("every exit is a fault's", () => {
  /** b's first incarnation ran from T0 and ended at `ended` with `code`; a ran throughout. */
  const bEnded = (code: number, ended = 5_000, inc = 1) => ({
    incarnations: [
      { node: "a", inc: 1, started_ms: T0, ended_ms: null, exit_code: null },
      { node: "b", inc, started_ms: T0, ended_ms: T0 + ended, exit_code: code },
    ],
  });
  const fullRestart = (at: number): FaultRecord => ({ ...fault("full_restart", "a", at), targets: ["a", "b"] });
  const cases: [string, Partial<ChaosFacts>, string[]][] = [
    ["a killed node's 137", { ...bEnded(137), faults: [fault("kill9", "b", 5_000)] }, []],
    ["…or its -9", { ...bEnded(-9), faults: [fault("kill9", "b", 5_000)] }, []],
    ["a full restart's 137 on every node", { incarnations: [0, 1].map((i) => ({ node: ["a", "b"][i]!, inc: 1, started_ms: T0, ended_ms: T0 + 5_000, exit_code: 137 })), faults: [fullRestart(5_000)] }, []],
    ["a SIGTERM'd node's 0", { ...bEnded(0, 8_000), faults: [fault("sigterm", "b", 5_000)] }, []],
    ["a node whose broker was killed stops with 1", { ...bEnded(1, 8_000), faults: [fault("broker_kill9", "b", 5_000)] }, []],
    ["…or is killed by the harness when it outlives its sidecar", { ...bEnded(137, 50_000), faults: [fault("broker_kill9", "b", 5_000)] }, []],
    [
      "a frozen node's 75",
      { ...bEnded(75, 20_000), faults: [fault("sigstop", "b", 5_000, 15_000, { frozen: { node: "b", inc: 1 } })] },
      [],
    ],
    ["a frozen node's other code is the frozen rule's, said once", { ...bEnded(137, 40_000), faults: [fault("sigstop", "b", 5_000, 15_000, { frozen: { node: "b", inc: 1 } })] }, ["frozen"]],
    ["a running node is not judged", { faults: [fault("cut_member", "b", 5_000, 15_000)] }, []],
    ["exit 1 on its own", bEnded(1), ["exit"]],
    ["exit 1 after a kill of another node", { ...bEnded(1, 8_000), faults: [fault("kill9", "a", 5_000)] }, ["exit"]],
    ["a watchdog's 75 with no freeze", bEnded(75), ["exit"]],
    ["a SIGTERM'd node that exits 1 (its drain failed)", { ...bEnded(1, 8_000), faults: [fault("sigterm", "b", 5_000)] }, ["exit"]],
    ["a killed node's 0 (the kill is not what ended it)", { ...bEnded(0, 8_000), faults: [fault("kill9", "b", 5_000)] }, ["exit"]],
    ["a cut-off node that quits", { ...bEnded(1, 8_000), faults: [fault("cut_member", "b", 5_000, 15_000)] }, ["exit"]],
    ["a cut leaf that quits", { ...bEnded(1, 8_000), faults: [fault("cut_leaf", "b", 5_000, 15_000)] }, ["exit"]],
    ["a kill that came after the node had already exited 1 explains nothing", { ...bEnded(1, 4_000), faults: [fault("kill9", "b", 5_000)] }, ["exit"]],
    [
      "a fault on an earlier incarnation explains nothing in the next",
      {
        incarnations: [
          { node: "a", inc: 1, started_ms: T0, ended_ms: null, exit_code: null },
          { node: "b", inc: 1, started_ms: T0, ended_ms: T0 + 5_000, exit_code: 137 },
          { node: "b", inc: 2, started_ms: T0 + 6_000, ended_ms: T0 + 30_000, exit_code: 1 },
        ],
        faults: [fault("kill9", "b", 5_000)],
      },
      ["exit"],
    ],
  ];
  for (const [name, over, want] of cases) {
    test(name, () => {
      expect(check(facts(over)).violations.map((x) => x.split(":")[0])).toEqual(want);
    });
  }

  test("the violation names the node, the incarnation and the code", () => {
    const [v] = check(
      facts({
        incarnations: [
          { node: "a", inc: 1, started_ms: T0, ended_ms: null, exit_code: null },
          { node: "b", inc: 3, started_ms: T0, ended_ms: T0 + 8_000, exit_code: 1 },
        ],
        faults: [fault("sigterm", "b", 5_000)],
      }),
    ).violations;
    expect(v).toBe(`exit: b#3 exited 1 at ${T0 + 8_000}; the sigterm at ${T0 + 5_000} explains 0`);
    expect(check(facts(bEnded(1))).violations).toEqual([`exit: b#1 exited 1 at ${T0 + 5_000}; no fault hit it`]);
  });
});

describe("probes are not mail", () => {
  test("probes sent and heard are counted apart; no message owed for them", () => {
    const v = check(facts({ sent: [sent("m1", 10)], replies: [reply("m1", 500)], mailboxProbes: { sent: 40, heard: 39 }, deafAlarms: [{ node: "a", seat: "s1", reason: "probe_unheard", ts: T0 }] }));
    expect(v.violations).toEqual([]);
    expect(v.figures).toMatchObject({ acked: 1, answered_once: 1, lost: 0, mailbox_probes: "39/40", deaf_alarms: { probe_unheard: 1 } });
  });
  test("a probe (or anything not a trigger) handed to the agent is a violation", () => {
    expect(check(facts({ invalidTriggers: 1 })).violations.map((x) => x.split(":")[0])).toEqual(["probes"]);
  });
  test("facts gathered before probes existed still judge", () => {
    expect(check(facts({})).figures).toMatchObject({ mailbox_probes: "not gathered", deaf_alarms: {}, first_turn_ms: {} });
  });
});

describe("mail", () => {
  const cases: [string, Partial<ChaosFacts>, string[]][] = [
    ["answered once", { sent: [sent("m1", 10)], replies: [reply("m1", 500)] }, []],
    ["never answered: lost", { sent: [sent("m1", 10)] }, ["lost"]],
    ["answered by another seat only: lost", { sent: [sent("m1", 10)], replies: [reply("m1", 500, "s2")] }, ["lost"]],
    ["not acknowledged: no promise", { sent: [{ ...sent("m1", 10, 504) }] }, []],
    ["202 pending is an acknowledgement", { sent: [sent("m1", 10, 202)] }, ["lost"]],
    ["held ack-pending by the broker after a kill: answered after the ack wait", { sent: [sent("m1", 10)], heldByBroker: new Set(["m1"]), faults: [fault("kill9", "b", 20)] }, []],
    ["held ack-pending, acknowledged while its holder was frozen", { sent: [sent("m1", 5_000)], heldByBroker: new Set(["m1"]), faults: [fault("sigstop", "b", 4_000, 15_000)] }, []],
    ["held ack-pending with no kill since: lost", { sent: [sent("m1", 10)], heldByBroker: new Set(["m1"]), faults: [fault("sigterm", "b", 20)] }, ["lost"]],
    ["twice around a kill -9", { sent: [sent("m1", 10)], replies: [reply("m1", 500), reply("m1", 9_000)], faults: [fault("kill9", "a", 600)] }, []],
    ["twice around a broker kill", { sent: [sent("m1", 10)], replies: [reply("m1", 500), reply("m1", 9_000)], faults: [fault("broker_kill9", "a", 600)] }, []],
    ["twice with no kill in between", { sent: [sent("m1", 10)], replies: [reply("m1", 500), reply("m1", 9_000)], faults: [fault("kill9", "a", 20_000)] }, ["duplicate"]],
    ["twice around a graceful drain", { sent: [sent("m1", 10)], replies: [reply("m1", 500), reply("m1", 9_000)], faults: [fault("sigterm", "a", 600)] }, ["duplicate"]],
    ["three times, whatever the kills", { sent: [sent("m1", 10)], replies: [reply("m1", 500), reply("m1", 9_000), reply("m1", 9_500)], faults: [fault("kill9", "a", 600)] }, ["duplicate"]],
    [
      "run in one turn with its call's decision: the decision's report answers it",
      { sent: [sent("m1", 10)], replies: [{ ...reply("m1", 9_000), report: true, approval: true }], answeredWithDecision: ["m1"] },
      [],
    ],
    [
      "run in one turn with its coding run's result (seen at 2,000 seats after a full restart): the run's report answers it",
      { sent: [sent("m1", 10)], replies: [{ ...reply("m1", 9_000), files: true }, { ...reply("m1", 9_100), report: true }], answeredWithRun: ["m1"] },
      [],
    ],
    ["a run's report alone, its turn not handed the message: lost", { sent: [sent("m1", 10)], replies: [{ ...reply("m1", 9_100), report: true }] }, ["lost"]],
    ["run with a decision, but no report in its thread: lost", { sent: [sent("m1", 10)], answeredWithDecision: ["m1"] }, ["lost"]],
    ["a decision's report alone, its turn not handed the message: lost", { sent: [sent("m1", 10)], replies: [{ ...reply("m1", 9_000), report: true, approval: true }] }, ["lost"]],
    ["a seat deaf at the probe", { probeAnswered: new Set() }, ["probe"]],
    ["a stream left at another replica count", { streamReplicas: { CREWLET_AGENT: 1 } }, ["streams"]],
    ["the leaf changed a stream", { streamUpdates: [{ node: "l", stream: "CREWLET_AGENT" }] }, ["streams"]],
    ["a member brought a stream to its settings", { streamUpdates: [{ node: "a", stream: "CREWLET_AGENT" }] }, []],
  ];
  for (const [name, over, want] of cases) {
    test(name, () => {
      expect(check(facts(over)).violations.map((x) => x.split(":")[0])).toEqual(want);
    });
  }

  test("counts", () => {
    const v = check(facts({ sent: [sent("m1", 10), sent("m2", 10), sent("m3", 10, 0)], replies: [reply("m1", 500)], heldByBroker: new Set(["m2"]), faults: [fault("kill9", "a", 20)] }));
    expect(v.figures).toMatchObject({ acked: 2, unacked: 1, answered_once: 1, held_by_broker: 1, lost: 0 });
  });
});

describe("schedule", () => {
  const shape = { members: ["a", "b", "c"], leaf: "l", ttl_ms: 6_000 };
  test("the same seed plans the same faults; another seed plans others", () => {
    expect(planFaults({ ...shape, seed: 5, count: 20 })).toEqual(planFaults({ ...shape, seed: 5, count: 20 }));
    expect(planFaults({ ...shape, seed: 5, count: 20 })).not.toEqual(planFaults({ ...shape, seed: 6, count: 20 }));
  });
  test("every kind first; freezes and cuts outlast the TTL; cuts of members hit members", () => {
    const plan = planFaults({ ...shape, seed: 9, count: 60, everyKindFirst: true });
    expect(plan.slice(0, FAULT_KINDS.length).map((f) => f.kind).sort()).toEqual([...FAULT_KINDS].sort());
    for (const f of plan) {
      if (f.kind === "sigstop" || f.kind.startsWith("cut_")) expect(f.hold_ms).toBeGreaterThan(shape.ttl_ms);
      if (f.kind === "cut_member") expect(shape.members).toContain(f.target);
      if (f.kind === "cut_leaf") expect(f.target).toBe("l");
      if (f.kind === "full_restart") expect(f.restart!.map((r) => r.node).sort()).toEqual(["a", "b", "c", "l"]);
    }
  });
  test("percentile", () => {
    expect(percentile([], 50)).toBe(0);
    expect(percentile([1, 2, 3, 4], 50)).toBe(2);
    expect(percentile([1, 2, 3, 4], 99)).toBe(4);
  });
});

describe("coding runs", () => {
  const run = (id: string, state = "done", reported = true) => ({ id, seat: "s1", thread: "m1", state, reported });
  const report = (at: number): Reply => ({ ...reply("m1", at), report: true });
  const filesPost = (at: number): Reply => ({ ...reply("m1", at), files: true });
  test.each([
    ["done, told once, one report", [run("r1")], { r1: 1 }, [reply("m1", 10), report(20)], []],
    ["its files posted once beside the report: no second answer", [run("r1")], { r1: 1 }, [reply("m1", 10), report(20), filesPost(21)], []],
    ["its files posted twice", [run("r1")], { r1: 1 }, [reply("m1", 10), report(20), filesPost(21), filesPost(22)], ["run files: r1 of s1 posted its files 2 times in its thread"]],
    ["still running at the end", [run("r1", "running", false)], {}, [reply("m1", 10)], ["run lost: r1 of s1 ended the run running, never told"]],
    ["collected twice", [run("r1")], { r1: 2 }, [reply("m1", 10), report(20)], ["run told twice: r1 of s1 (2 results collected)"]],
    ["told, but two reports in the thread", [run("r1")], { r1: 1 }, [reply("m1", 10), report(20), report(30)], ["run report: r1 of s1 reported 2 times in its thread"]],
  ] as const)("%s", (_name, runs, runTold, replies, want) => {
    const v = check(facts({ sent: [sent("m1", 5)], replies: [...replies], runs: [...runs], runTold: { ...runTold } }));
    expect(v.violations).toEqual([...want]);
  });

  test("a run's report in the thread is not a second answer to the message", () => {
    const v = check(facts({ sent: [sent("m1", 5)], replies: [reply("m1", 10), report(20)], runs: [run("r1")], runTold: { r1: 1 } }));
    expect(v.figures.answered_once).toBe(1);
    expect(v.figures.runs).toBe("1/1");
  });
});

describe("approvals", () => {
  const ap = (o: Partial<ApprovalFact> = {}): ApprovalFact => ({ id: "ap1", seat: "s1", thread: "m1", state: "approved", stage: "done", ran: "yes", effects: 1, ...o });
  const told = (at: number): Reply => ({ ...reply("m1", at), report: true, approval: true });
  test.each([
    ["approved, ran once, told once", ap(), [reply("m1", 10), told(20)], []],
    ["rejected, never ran, told once", ap({ state: "rejected", ran: null, effects: 0 }), [reply("m1", 10), told(20)], []],
    ["its holder died mid-call and it did land", ap({ ran: "unknown", effects: 1 }), [reply("m1", 10), told(20)], []],
    ["its holder died mid-call and it did not land", ap({ ran: "unknown", effects: 0 }), [reply("m1", 10), told(20)], []],
    ["ran twice", ap({ effects: 2 }), [reply("m1", 10), told(20)], ["approval effect: ap1 of s1 (approved, ran yes) had 2 effects"]],
    ["rejected, yet it ran", ap({ state: "rejected", ran: null, effects: 1 }), [reply("m1", 10), told(20)], ["approval effect: ap1 of s1 (rejected, ran -) had 1 effects"]],
    ["never decided", ap({ state: "pending", stage: "pending", ran: null, effects: 0 }), [reply("m1", 10)], ["approval unsettled: ap1 of s1 ended pending, pending"]],
    ["decided, never taken by its seat", ap({ stage: "decided", ran: null, effects: 0 }), [reply("m1", 10)], ["approval unsettled: ap1 of s1 ended approved, decided"]],
    ["told twice", ap(), [reply("m1", 10), told(20), told(30)], ["approval told: ap1 of s1 told its decision 2 times in its thread"]],
  ] as const)("%s", (_name, a, replies, want) => {
    const v = check(facts({ sent: [sent("m1", 5)], replies: [...replies], approvals: [a] }));
    expect(v.violations).toEqual([...want]);
    // The decision told in the thread is not a second answer to the message.
    if (want.length === 0) expect(v.figures.answered_once).toBe(1);
  });
});

describe("fences by touch", () => {
  const fault = (kind: FaultRecord["kind"], target: string, at_ms: number): FaultRecord => ({ kind, targets: [target], at_ms, healed_ms: null });
  test.each([
    ["a fence on the killed node, in its fault's window", [{ node: "a", seat: "s", reason: "ttl_grace_expired", ts: 150 }], { untouched: {}, on_targets: 1 }],
    ["a fence on a healthy node while another was killed", [{ node: "b", seat: "s", reason: "ttl_grace_expired", ts: 150 }], { untouched: { ttl_grace_expired: 1 }, on_targets: 0 }],
    ["a fence on the first target after the next fault began", [{ node: "a", seat: "s", reason: "ttl_grace_expired", ts: 250 }], { untouched: { ttl_grace_expired: 1 }, on_targets: 0 }],
    ["a fence before any fault", [{ node: "a", seat: "s", reason: "renew_refused", ts: 50 }], { untouched: { renew_refused: 1 }, on_targets: 0 }],
    ["a fence on the second target in its window", [{ node: "c", seat: "s", reason: "ttl_grace_expired", ts: 260 }], { untouched: {}, on_targets: 1 }],
  ] as const)("%s", (_n, fences, want) => {
    expect(fencesByTouch({ faults: [fault("kill9", "a", 100), fault("sigstop", "c", 200)], fences: [...fences], run_ended_ms: 1_000 })).toMatchObject(want);
  });

  test("each untouched fence says where it fell, so a red run names the fault behind it", () => {
    const cut = { ...fault("cut_member", "c", 1_000), healed_ms: 44_800 };
    const got = fencesByTouch({ faults: [cut, fault("cut_leaf", "l", 50_000)], fences: [{ node: "a", seat: "s1", reason: "ttl_grace_expired", ts: 62_300 }, { node: "l", seat: "s2", reason: "ttl_grace_expired", ts: 51_000 }], run_ended_ms: 90_000 });
    expect(got.where).toEqual(["a s1 ttl_grace_expired 12.3 s into fault 2 (cut_leaf l)"]);
    expect(unrenewedMax({ faults: [cut], storeAnswering: [{ node: "b", ts: 46_000, unrenewed_ms: 9_000 }, { node: "a", ts: 47_000, unrenewed_ms: 12_500 }], run_ended_ms: 90_000 })).toEqual({
      ms: 12_500,
      where: "node a, 46.0 s into fault 1 (cut_member c, healed at +43.8 s)",
    });
    expect(unrenewedMax({ faults: [cut], run_ended_ms: 90_000 })).toBeNull();
  });

  // Below the config's floor a healthy node's fence is a figure; at or above it, a violation.
  test.each([
    [6_000, 0],
    [19_000, 0], // the floor before the heal's elections were counted: below it now
    [28_000, 1],
    [undefined, 0],
  ] as const)("a healthy node fenced at TTL %p: %d violation(s)", (ttl_ms, n) => {
    const v = check(facts({ ttl_ms, faults: [fault("kill9", "a", 100)], fences: [{ node: "b", seat: "s", reason: "ttl_grace_expired", ts: 150 }] }));
    expect(v.violations.filter((x) => x.startsWith("fences:"))).toHaveLength(n);
  });
});
