// The learning duty's figures, in process. Prints numbers; never fails on time.
//   bun bench/learning.ts [--seats 50] [--episodes 1000] [--rounds 5]
// 1. the pure plan (all four passes) over every seat's memory: what one tick decides on,
//    beside its replay (bench/memory.ts measures a replay of 10,000 rows);
// 2. the prompt's pick: choosing the skills that fit one trigger among a seat's 32.
// Latencies use performance.now(): finer than the product clock promises; nothing here
// schedules work.
import { z } from "zod";
import { benchArgs, countFlag } from "./args.ts";
import { MAX_SKILLS_PER_SEAT } from "../src/memory/learning-due.ts";
import { planLearning, type SeatMemorySnapshot } from "../src/memory/learning-plan.ts";
import type { EpisodeRow } from "../src/memory/records.ts";
import { pickSkills, type PromptSkill } from "../src/memory/skill-pick.ts";

const { seats: SEATS, episodes: EPISODES, rounds: ROUNDS } = benchArgs(
  "learning",
  "[--seats 50] [--episodes 1000] [--rounds 5]",
  z.object({ seats: countFlag(50, 10_000), episodes: countFlag(1_000, 100_000), rounds: countFlag(5, 1_000) }),
);

const NOW = Date.UTC(2026, 0, 1);
/** Twenty kinds of work, each summary naming one with its own customer: clusters to find. */
const KINDS = Array.from({ length: 20 }, (_, k) => [`kind${k}alpha`, `kind${k}beta`]);
function episodes(handle: string): EpisodeRow[] {
  return Array.from({ length: EPISODES }, (_, i) => {
    const [a, b] = KINDS[i % KINDS.length]!;
    return { id: `e${i}`, handle, work_key: `wk${i}`, turn_id: `t${i}`, trigger_ids: [], conversation: "c", counterparty: null, outcome: i % 7 === 0 ? "failed" : "completed", summary: `Handled ${a} and ${b} for customer${i} with care`, work_items: [], created_at: NOW - (EPISODES - i) * 60_000 };
  });
}

const seats: SeatMemorySnapshot[] = Array.from({ length: SEATS }, (_, s) => ({ handle: `seat${s}`, episodes: episodes(`seat${s}`), skills: [], versions: new Map() }));
const times: number[] = [];
let decided = 0;
for (let r = 0; r < ROUNDS; r++) {
  const t0 = performance.now();
  const plans = planLearning({ now_ms: NOW, seats, peers: {} });
  times.push(performance.now() - t0);
  decided = plans.reduce((n, p) => n + p.skills.length, 0);
}
times.sort((a, b) => a - b);
console.log(`plan: ${SEATS} seats × ${EPISODES} episodes → ${decided} skills decided; median ${times[Math.floor(times.length / 2)]!.toFixed(1)} ms, max ${times.at(-1)!.toFixed(1)} ms (${ROUNDS} rounds)`);

const skills: PromptSkill[] = Array.from({ length: MAX_SKILLS_PER_SEAT }, (_, k) => ({ id: `s${k}`, name: `kind${k}`, kind: "learned", terms: [`kind${k}alpha`, `kind${k}beta`], body: "What worked: ".repeat(20), state: "active", uses: k }));
const picks: number[] = [];
for (let i = 0; i < 10_000; i++) {
  const t0 = performance.now();
  pickSkills(`please handle kind${i % 40}alpha for the customer today`, skills);
  picks.push(performance.now() - t0);
}
picks.sort((a, b) => a - b);
console.log(`pick: one trigger among ${skills.length} skills: p50 ${(picks[5_000]! * 1000).toFixed(1)} µs, p99 ${(picks[9_900]! * 1000).toFixed(1)} µs`);
