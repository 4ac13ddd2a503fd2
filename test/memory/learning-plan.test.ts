// The learning duty's decisions, by table: the clustering rule, the lifecycle, compaction,
// promotion, and the holder's merge. Pure: rows in, decisions out.
import { describe, expect, test } from "bun:test";
import { mergeSkill, type SkillChange } from "../../src/memory/learning-due.ts";
import {
  ARCHIVE_AFTER_MS,
  clusterEpisodes,
  compactionCutoff,
  EPISODE_KEEP,
  EPISODE_MAX_AGE_MS,
  nextState,
  planLearning,
  PROMOTE_MIN_USES,
  STALE_AFTER_MS,
  VERSION_MIN_AGE_MS,
  type SeatMemorySnapshot,
} from "../../src/memory/learning-plan.ts";
import { skillId, skillVersionId, type EpisodeRow, type SkillRow, type SkillVersionRow } from "../../src/memory/records.ts";
import { normaliseTerms } from "../../src/memory/skill-terms.ts";

const DAY = 24 * 60 * 60 * 1_000;
const NOW = 1_800_000_000_000;

function ep(handle: string, id: string, summary: string, at = NOW - DAY, outcome = "completed"): EpisodeRow {
  return { id, handle, work_key: `wk-${id}`, turn_id: id, trigger_ids: [], conversation: "c", counterparty: null, outcome, summary, work_items: [], created_at: at };
}

function seat(handle: string, episodes: EpisodeRow[], skills: SkillRow[] = [], versions: SkillVersionRow[] = []): SeatMemorySnapshot {
  return { handle, episodes, skills, versions: new Map(versions.map((v) => [v.id, v])) };
}

const refunds = (h: string, n: number, at = NOW - DAY) =>
  Array.from({ length: n }, (_, i) => ep(h, `r${i}`, `Refund the invoice for ${COMPANIES[i % COMPANIES.length]}`, at + i));
const COMPANIES = ["acme", "globex", "initech", "umbrella", "hooli"];

describe("terms", () => {
  test.each([
    ["Refund the invoices, please!", ["refund", "invoice"]],
    ["The API and the ENG-12 bug", []],
    ["Deploys deployed DEPLOYS", ["deploy", "deployed"]],
    ["class glass 2024", ["class", "glass"]],
    ["Überweisung prüfen", ["überweisung", "prüfen"]],
  ])("%p → %p", (text, want) => {
    expect(normaliseTerms(text)).toEqual(want);
  });
});

describe("clustering", () => {
  test("three completed episodes sharing terms are one cluster; its key is the heaviest two (ties: the earlier in the summaries), sorted", () => {
    const cs = clusterEpisodes(refunds("ann", 3), 0);
    expect(cs.map((c) => [c.terms, c.episodes.length])).toEqual([[["invoice", "refund"], 3]]);
  });
  test.each([
    ["two episodes are a coincidence, not a skill", refunds("ann", 2), 0],
    ["failed turns teach nothing", refunds("ann", 3).map((e) => ({ ...e, outcome: "failed" })), 0],
    ["episodes before the horizon are not counted", refunds("ann", 3, NOW - 200 * DAY), 0],
    ["unrelated summaries share no term", [ep("a", "1", "wrote release notes"), ep("a", "2", "fixed login timeout"), ep("a", "3", "booked travel")], 0],
  ])("%s", (_, episodes, clusters) => {
    expect(clusterEpisodes(episodes, NOW - EPISODE_MAX_AGE_MS).length).toBe(clusters);
  });
  test("two kinds of work are two clusters, biggest first", () => {
    const deploys = Array.from({ length: 4 }, (_, i) => ep("ann", `d${i}`, `Deployed staging for ${COMPANIES[i]}, smoke tests green`));
    const cs = clusterEpisodes([...refunds("ann", 3), ...deploys], 0);
    expect(cs.map((c) => c.terms.join("+"))).toEqual(["deployed+staging", "invoice+refund"]);
  });
  test("a seat's everyday words (in over half its episodes, once it has eight) key no cluster", () => {
    const everyday = (kind: string, i: number) => ep("ann", `${kind}${i}`, `Handled the customer request: ${kind} for ${COMPANIES[i % COMPANIES.length]}`);
    const eps = [0, 1, 2, 3, 4].flatMap((i) => [everyday("refund invoice", i), everyday("deploy staging", i)]);
    expect(clusterEpisodes(eps, 0).map((c) => [c.terms.join("+"), c.episodes.length])).toEqual([
      ["deploy+staging", 5],
      ["invoice+refund", 5],
    ]);
    // Seven alike episodes (under the eight): their shared words still make the skill.
    expect(clusterEpisodes(eps.filter((e) => e.id.startsWith("refund")).slice(0, 4), 0).map((c) => c.terms.join("+"))).toEqual(["customer+handled"]);
  });
  test("the order episodes arrive in does not change the clusters (any node decides the same)", () => {
    const eps = [...refunds("ann", 5), ...Array.from({ length: 3 }, (_, i) => ep("ann", `d${i}`, `Deployed staging build ${i}`))];
    const key = (xs: EpisodeRow[]) => JSON.stringify(clusterEpisodes(xs, 0).map((c) => [c.terms, c.episodes.map((e) => e.id)]));
    expect(key([...eps].reverse())).toBe(key(eps));
  });
});

describe("the plan", () => {
  test("a new cluster is a new active skill with its first version; ids derive from content", () => {
    const [plan] = planLearning({ now_ms: NOW, seats: [seat("ann", refunds("ann", 3))], peers: {} });
    const c = plan!.skills[0]!;
    expect(c.skill).toMatchObject({ id: skillId("ann", ["invoice", "refund"]), state: "active", origin: "clustered", uses: 0 });
    expect(c.version!.id).toBe(skillVersionId(c.skill.id, c.version!.body));
    expect(c.version!.body).toContain("what worked in 3 earlier turns");
    expect(c.seen).toBeNull();
  });
  test("the same memory planned twice (a successor) decides the same rows", () => {
    const input = { now_ms: NOW, seats: [seat("ann", refunds("ann", 4))], peers: {} };
    expect(planLearning(input)).toEqual(planLearning(input));
  });
  test("a skill whose version is current is left alone; new evidence is a new version, at most daily", () => {
    const first = planLearning({ now_ms: NOW, seats: [seat("ann", refunds("ann", 3))], peers: {} })[0]!.skills[0]!;
    const held = seat("ann", refunds("ann", 3), [first.skill], [first.version!]);
    expect(planLearning({ now_ms: NOW + 1, seats: [held], peers: {} })).toEqual([]);
    const more = seat("ann", refunds("ann", 4), [first.skill], [first.version!]);
    // Within a day of its current version an active skill keeps its body.
    expect(planLearning({ now_ms: NOW + VERSION_MIN_AGE_MS - 1, seats: [more], peers: {} })).toEqual([]);
    const next = planLearning({ now_ms: NOW + VERSION_MIN_AGE_MS, seats: [more], peers: {} })[0]!.skills[0]!;
    expect(next.version!.id).not.toBe(first.version!.id);
    expect(next.seen).toEqual({ state: "active", last_used_at: null });
    // A stale skill takes new evidence at once, and is active again.
    const stale = seat("ann", refunds("ann", 4), [{ ...first.skill, state: "stale" }], [first.version!]);
    expect(planLearning({ now_ms: NOW + 1, seats: [stale], peers: {} })[0]!.skills[0]!.skill.state).toBe("active");
  });
});

describe("lifecycle", () => {
  test.each([
    ["active, used yesterday", "active", NOW - 30 * DAY, NOW - DAY, "active"],
    ["active, unused for two weeks", "active", NOW - STALE_AFTER_MS, null, "stale"],
    ["active, refreshed recently, never used", "active", NOW - DAY, null, "active"],
    ["stale, used since it went stale", "stale", NOW - 5 * DAY, NOW - DAY, "active"],
    ["stale for a month", "stale", NOW - ARCHIVE_AFTER_MS, null, "archived"],
    ["stale for a week", "stale", NOW - 7 * DAY, null, "stale"],
    ["archived stays archived", "archived", NOW - 400 * DAY, NOW - DAY, "archived"],
  ] as const)("%s", (_, state, state_at, last_used_at, want) => {
    expect(nextState({ state, state_at, last_used_at }, NOW)).toBe(want);
  });
});

describe("compaction", () => {
  test.each([
    ["nothing old: nothing dropped", [ep("a", "1", "x", NOW - DAY)], null],
    ["older than the horizon: dropped before the day the horizon falls in", [ep("a", "1", "x", NOW - 200 * DAY)], Math.floor((NOW - EPISODE_MAX_AGE_MS) / DAY) * DAY],
  ] as const)("%s", (_, eps, want) => {
    expect(compactionCutoff(eps, NOW)).toBe(want);
  });
  test("past the cap, the oldest go (cutoff quantised to a day, so ties and the day's own stay)", () => {
    const eps = Array.from({ length: EPISODE_KEEP + 10 }, (_, i) => ep("a", `e${i}`, "x", NOW - (EPISODE_KEEP + 10 - i) * DAY / 10));
    const cut = compactionCutoff(eps, NOW)!;
    const kept = eps.filter((e) => e.created_at >= cut).length;
    expect(kept).toBeGreaterThanOrEqual(EPISODE_KEEP);
    expect(kept).toBeLessThan(EPISODE_KEEP + 10);
  });
});

describe("promotion", () => {
  function proven(uses: number) {
    const c = planLearning({ now_ms: NOW, seats: [seat("ann", refunds("ann", 3))], peers: {} })[0]!.skills[0]!;
    return { skill: { ...c.skill, uses, last_used_at: NOW - DAY }, version: c.version! };
  }
  test("a proven skill is offered to unit peers that lack it, once", () => {
    const p = proven(PROMOTE_MIN_USES);
    const seats = [seat("ann", refunds("ann", 3), [p.skill], [p.version]), seat("bob", []), seat("cat", [])];
    const plans = planLearning({ now_ms: NOW, seats, peers: { ann: ["bob"], bob: ["ann"], cat: [] } });
    expect(plans.map((x) => x.seat)).toEqual(["bob"]);
    const c = plans[0]!.skills[0]!;
    expect(c.skill).toMatchObject({ id: skillId("bob", p.skill.terms), origin: "promoted", promoted_from: "ann", state: "active" });
    expect(c.version!.body).toBe(p.version.body);
    // Once bob holds it, nothing more is offered.
    const seats2 = [seats[0]!, seat("bob", [], [c.skill], [c.version!]), seats[2]!];
    expect(planLearning({ now_ms: NOW, seats: seats2, peers: { ann: ["bob"] } })).toEqual([]);
  });
  test("not yet proven: not offered", () => {
    const p = proven(PROMOTE_MIN_USES - 1);
    expect(planLearning({ now_ms: NOW, seats: [seat("ann", refunds("ann", 3), [p.skill], [p.version]), seat("bob", [])], peers: { ann: ["bob"] } })).toEqual([]);
  });
});

describe("the holder's merge", () => {
  const base: SkillRow = { id: "s1", handle: "ann", terms: ["invoice"], name: "invoice", state: "active", origin: "clustered", promoted_from: null, version: "k1", uses: 7, last_used_at: NOW - 20 * DAY, state_at: NOW - 30 * DAY, updated_at: 0 };
  const change = (skill: Partial<SkillRow>, seen: SkillChange["seen"], version: SkillChange["version"] = null): SkillChange => ({ skill: { ...base, uses: 0, last_used_at: null, ...skill }, version, seen });
  test.each([
    ["a new skill starts unused", null, change({}, null), { state: "active", uses: 0 }],
    ["a stale move as seen takes", base, change({ state: "stale", state_at: NOW }, { state: "active", last_used_at: base.last_used_at }), { state: "stale", uses: 7, state_at: NOW }],
    ["a stale move after a use since is void", { ...base, last_used_at: NOW - 1 }, change({ state: "stale", state_at: NOW }, { state: "active", last_used_at: base.last_used_at }), { state: "active", uses: 7 }],
    [
      "a new version revives an archived skill and keeps its uses",
      { ...base, state: "archived" as const },
      change({ state: "active", version: "k2", state_at: NOW }, { state: "archived", last_used_at: base.last_used_at }, { id: "k2", handle: "ann", skill_id: "s1", body: "b", evidence: [], created_at: NOW }),
      { state: "active", version: "k2", uses: 7 },
    ],
  ] as const)("%s", (_, local, c, want) => {
    expect(mergeSkill(local, c, NOW)).toMatchObject(want);
  });
});
