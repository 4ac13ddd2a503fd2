// The learning duty's decisions as one pure function: every seat's memory in, what each
// holder should write out. No I/O and no clock, and every id a digest of content, so a killed
// holder's successor decides exactly the same. The clustering rule is README's "Seats also
// learn skills"; each threshold's reason is at its constant below.
import { MAX_SKILLS_PER_SEAT, type SkillChange } from "./learning-due.ts";
import { cutBytes } from "./reflection.ts";
import { MAX_SKILL_BODY_BYTES, MAX_SKILL_EVIDENCE, skillId, skillVersionId, type EpisodeRow, type SkillRow, type SkillVersionRow } from "./records.ts";
import { normaliseTerms } from "./skill-terms.ts";

const DAY_MS = 24 * 60 * 60 * 1_000;
/** Twice is a coincidence; three turns that went well on one kind of work are a pattern. */
export const MIN_CLUSTER_EPISODES = 3;
/** One shared term groups too loosely ("customer"); three rarely recur in short summaries. */
export const CLUSTER_KEY_TERMS = 2;
/** A term in more than half of a seat's episodes is its everyday vocabulary, not a kind of
 * its work: clustering on it would fold everything the seat does into one "skill". */
export const MAX_TERM_SHARE = 0.5;
/** Below this many counted episodes every shared term counts: a new seat with one kind of
 * work (all its episodes alike) must still be able to learn it. */
export const MIN_EPISODES_FOR_SHARE = 8;
/** Summaries a skill's body shows: the newest five say what works now, within 2 KiB. */
export const MAX_SKILL_EXAMPLES = 5;
/** A summary's share of a body: five of them and the heading fit MAX_SKILL_BODY_BYTES. */
const EXAMPLE_BYTES = 360;
/**
 * An active skill's body is rewritten at most once a day: every new episode changes its
 * newest examples, and a version per tick would be 24 a day per skill on the changelog for
 * ever (versions are append-only). A stale or archived skill takes new evidence at once.
 */
export const VERSION_MIN_AGE_MS = DAY_MS;
/** Versions of one skill the holder keeps (the current one always among them): the history
 * a person reads on the memory screen; older ones are dropped like compacted episodes. */
export const SKILL_VERSIONS_KEPT = 20;
/** Two weeks unused and unrefreshed: the work it describes has stopped coming. */
export const STALE_AFTER_MS = 14 * DAY_MS;
/** A month stale: out of the prompt for good, unless new evidence brings it back. */
export const ARCHIVE_AFTER_MS = 30 * DAY_MS;
/** Episodes a seat keeps: recall shows five per work item; a thousand is months of work. */
export const EPISODE_KEEP = 1_000;
/** Half a year: a skill carries what older episodes taught; the episodes themselves can go. */
export const EPISODE_MAX_AGE_MS = 180 * DAY_MS;
/** Uses before a skill is worth a colleague's prompt: proven on real turns, not just learned. */
export const PROMOTE_MIN_USES = 5;

export interface SeatMemorySnapshot {
  handle: string;
  episodes: readonly EpisodeRow[];
  skills: readonly SkillRow[];
  /** The seat's skill versions by id (the current bodies are what promotion copies). */
  versions: ReadonlyMap<string, SkillVersionRow>;
}

export interface LearningInput {
  now_ms: number;
  seats: readonly SeatMemorySnapshot[];
  /** Per agent seat: the agent seats sharing a unit with it (promotion's reach). */
  peers: Readonly<Record<string, readonly string[]>>;
}

export interface SeatPlan {
  seat: string;
  skills: SkillChange[];
  compact_before: number | null;
}

/** Every seat's plan; seats with nothing to change are left out. Deterministic order. */
export function planLearning(input: LearningInput): SeatPlan[] {
  const seats = [...input.seats].sort((a, b) => cmp(a.handle, b.handle));
  const plans = new Map<string, SeatPlan>();
  for (const s of seats) {
    const compact_before = compactionCutoff(s.episodes, input.now_ms);
    const refreshed = clusterChanges(s, compact_before ?? 0, input.now_ms);
    const changes = [...refreshed, ...lifecycleChanges(s, new Set(refreshed.map((c) => c.skill.id)), input.now_ms)];
    plans.set(s.handle, { seat: s.handle, skills: changes, compact_before });
  }
  promote(seats, plans, input);
  return [...plans.values()].filter((p) => p.skills.length > 0 || p.compact_before !== null).map((p) => ({ ...p, skills: p.skills.slice(0, MAX_SKILLS_PER_SEAT) }));
}

/** The clusters of one seat's counted episodes, biggest first (ties: by key). */
export function clusterEpisodes(episodes: readonly EpisodeRow[], since_ms: number): { terms: string[]; episodes: EpisodeRow[] }[] {
  const counted = episodes.filter((e) => e.outcome === "completed" && e.created_at >= since_ms);
  const termsOf = new Map(counted.map((e) => [e, normaliseTerms(e.summary)]));
  const df = new Map<string, number>();
  const at = new Map<string, number>(); // summed position: a summary leads with its work
  for (const ts of termsOf.values()) ts.forEach((t, i) => (df.set(t, (df.get(t) ?? 0) + 1), at.set(t, (at.get(t) ?? 0) + i)));
  const earlier = (a: string, b: string) => at.get(a)! / df.get(a)! - at.get(b)! / df.get(b)!;
  const ceiling = counted.length >= MIN_EPISODES_FOR_SHARE ? counted.length * MAX_TERM_SHARE : Infinity;
  const shared = (t: string) => (df.get(t) ?? 0) >= MIN_CLUSTER_EPISODES && df.get(t)! <= ceiling;
  const groups = new Map<string, { terms: string[]; episodes: EpisodeRow[] }>();
  for (const [e, ts] of termsOf) {
    const mine = ts.filter(shared).sort((a, b) => df.get(b)! - df.get(a)! || earlier(a, b) || cmp(a, b));
    if (mine.length === 0) continue;
    const key = mine.slice(0, CLUSTER_KEY_TERMS).sort(cmp);
    const g = groups.get(key.join(" ")) ?? { terms: key, episodes: [] };
    g.episodes.push(e);
    groups.set(key.join(" "), g);
  }
  return [...groups.values()]
    .filter((g) => g.episodes.length >= MIN_CLUSTER_EPISODES)
    .map((g) => ({ terms: g.terms, episodes: g.episodes.sort(newestFirst) }))
    .sort((a, b) => b.episodes.length - a.episodes.length || cmp(a.terms.join(" "), b.terms.join(" ")));
}

/** A skill's body: its name, then what worked, newest first, within MAX_SKILL_BODY_BYTES. */
export function skillBody(terms: readonly string[], newest: readonly EpisodeRow[], total: number): string {
  const lines = [`${skillName(terms)}: what worked in ${total} earlier turn${total === 1 ? "" : "s"} like this.`];
  for (const e of newest.slice(0, MAX_SKILL_EXAMPLES)) lines.push(`- ${cutBytes(e.summary.replace(/\s+/g, " ").trim(), EXAMPLE_BYTES)}`);
  return cutBytes(lines.join("\n"), MAX_SKILL_BODY_BYTES);
}

export const skillName = (terms: readonly string[]): string => terms.join(", ");

/** Pass 1: a change for every cluster that is new or whose body moved (a new version). */
function clusterChanges(s: SeatMemorySnapshot, since_ms: number, now: number): SkillChange[] {
  const byId = new Map(s.skills.map((k) => [k.id, k]));
  const live = s.skills.filter((k) => k.state !== "archived").length;
  const out: SkillChange[] = [];
  let room = MAX_SKILLS_PER_SEAT - live;
  for (const c of clusterEpisodes(s.episodes, since_ms)) {
    const id = skillId(s.handle, c.terms);
    const body = skillBody(c.terms, c.episodes, c.episodes.length);
    const version: SkillVersionRow = { id: skillVersionId(id, body), handle: s.handle, skill_id: id, body, evidence: c.episodes.slice(0, MAX_SKILL_EVIDENCE).map((e) => e.id), created_at: now };
    const cur = byId.get(id);
    if (cur && cur.version === version.id) continue;
    if (cur && cur.state === "active" && now - (s.versions.get(cur.version)?.created_at ?? -Infinity) < VERSION_MIN_AGE_MS) continue;
    if (!cur && room <= 0) continue;
    if (!cur || cur.state === "archived") room -= 1;
    const base: SkillRow = cur ?? { id, handle: s.handle, terms: c.terms, name: skillName(c.terms), state: "active", origin: "clustered", promoted_from: null, version: version.id, uses: 0, last_used_at: null, state_at: now, updated_at: now };
    out.push({ skill: { ...base, version: version.id, state: "active", state_at: now, updated_at: now }, version, seen: cur ? { state: cur.state, last_used_at: cur.last_used_at } : null });
  }
  return out;
}

/** Pass 2: the state moves of skills pass 1 did not refresh. */
function lifecycleChanges(s: SeatMemorySnapshot, refreshed: ReadonlySet<string>, now: number): SkillChange[] {
  const out: SkillChange[] = [];
  for (const k of [...s.skills].sort((a, b) => cmp(a.id, b.id))) {
    if (refreshed.has(k.id)) continue;
    const next = nextState(k, now);
    if (next === k.state) continue;
    out.push({ skill: { ...k, state: next, state_at: now, updated_at: now }, version: null, seen: { state: k.state, last_used_at: k.last_used_at } });
  }
  return out;
}

/** One skill's lifecycle step (a table test's unit). */
export function nextState(k: Pick<SkillRow, "state" | "state_at" | "last_used_at">, now: number): SkillRow["state"] {
  const used = k.last_used_at ?? -Infinity;
  if (k.state === "active") return now - Math.max(used, k.state_at) >= STALE_AFTER_MS ? "stale" : "active";
  if (k.state === "stale") {
    if (used > k.state_at) return "active";
    return now - k.state_at >= ARCHIVE_AFTER_MS ? "archived" : "stale";
  }
  return "archived";
}

/**
 * Pass 3, compaction: the cutoff before which the holder drops episodes, or null when none
 * is that old. Quantised down to a day, so ticks within a day decide the same cutoff.
 */
export function compactionCutoff(episodes: readonly EpisodeRow[], now: number): number | null {
  const sorted = [...episodes].sort(newestFirst);
  const byCap = sorted.length > EPISODE_KEEP ? sorted[EPISODE_KEEP - 1]!.created_at : 0;
  const cutoff = Math.floor(Math.max(byCap, now - EPISODE_MAX_AGE_MS) / DAY_MS) * DAY_MS;
  return sorted.some((e) => e.created_at < cutoff) ? cutoff : null;
}

/** Pass 4, promotion: a proven skill is offered to the seat's unit peers that lack it. */
function promote(seats: readonly SeatMemorySnapshot[], plans: Map<string, SeatPlan>, input: LearningInput): void {
  const bySeat = new Map(seats.map((s) => [s.handle, s]));
  for (const s of seats) {
    for (const k of [...s.skills].sort((a, b) => cmp(a.id, b.id))) {
      const body = s.versions.get(k.version)?.body;
      if (k.state !== "active" || k.origin !== "clustered" || k.uses < PROMOTE_MIN_USES || body === undefined) continue;
      for (const peer of [...(input.peers[s.handle] ?? [])].sort(cmp)) {
        const target = bySeat.get(peer);
        const plan = plans.get(peer);
        if (!target || !plan || peer === s.handle) continue;
        const id = skillId(peer, k.terms);
        const has = target.skills.some((x) => x.id === id) || plan.skills.some((c) => c.skill.id === id);
        if (has || target.skills.filter((x) => x.state !== "archived").length + plan.skills.length >= MAX_SKILLS_PER_SEAT) continue;
        const version: SkillVersionRow = { id: skillVersionId(id, body), handle: peer, skill_id: id, body, evidence: [k.version], created_at: input.now_ms };
        const skill: SkillRow = { id, handle: peer, terms: k.terms, name: k.name, state: "active", origin: "promoted", promoted_from: s.handle, version: version.id, uses: 0, last_used_at: null, state_at: input.now_ms, updated_at: input.now_ms };
        plan.skills.push({ skill, version, seen: null });
      }
    }
  }
}

function newestFirst(a: EpisodeRow, b: EpisodeRow): number {
  return b.created_at - a.created_at || cmp(b.id, a.id);
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
