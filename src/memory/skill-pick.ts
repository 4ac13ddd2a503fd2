// Which skills a turn's prompt carries: the ones that fit its trigger, by the same terms the
// clustering keyed them on (skill-terms.ts), bounded. Pure: the trigger's words and the
// seat's skills in, the chosen skills and their prompt block out — the same on any node.
import { estimateTokens } from "./recall.ts";
import { normaliseTerms } from "./skill-terms.ts";

/**
 * Skills one prompt carries. A skill is advice on one kind of work and a turn is about one
 * or two; past three, the advice competes with the thread and the work item for the
 * model's attention more than it helps.
 */
export const MAX_PROMPT_SKILLS = 3;
/**
 * Tokens the skills block may take. The memory block takes 1,500 of the smallest context we
 * serve (an 8k local model, recall.ts MEMORY_PROMPT_TOKENS); 600 more is three short skill
 * bodies and keeps memory and skills together under a quarter of that context.
 */
export const SKILLS_PROMPT_TOKENS = 600;

export interface PromptSkill {
  id: string;
  name: string;
  /** A skill learned from this seat's (or a peer's) episodes, or a tool skill from the source. */
  kind: "learned" | "tool";
  terms: readonly string[];
  body: string;
  /** Learned skills: active first; a stale one is carried only when nothing active fits. */
  state: "active" | "stale";
  uses: number;
}

export interface SkillPick {
  picked: PromptSkill[];
  block: string | null;
}

/**
 * A skill fits when at least half its terms (rounded up) are among the trigger's. Ranked by
 * how many fit, then active before stale, then by use, then by id (so ties are stable).
 */
export function pickSkills(trigger_text: string, candidates: readonly PromptSkill[], budget_tokens = SKILLS_PROMPT_TOKENS): SkillPick {
  const words = new Set(normaliseTerms(trigger_text));
  const scored = candidates
    .map((s) => ({ s, hits: s.terms.filter((t) => words.has(t)).length }))
    .filter(({ s, hits }) => s.terms.length > 0 && hits >= Math.ceil(s.terms.length / 2))
    .sort((a, b) => b.hits - a.hits || rank(a.s.state) - rank(b.s.state) || b.s.uses - a.s.uses || (a.s.id < b.s.id ? -1 : a.s.id > b.s.id ? 1 : 0));
  const header = "Skills that fit this (what worked before):";
  let used = estimateTokens(header) + 1;
  const picked: PromptSkill[] = [];
  const lines = [header];
  for (const { s } of scored) {
    if (picked.length >= MAX_PROMPT_SKILLS) break;
    const text = `[${s.kind === "tool" ? "tool skill" : "skill"}: ${s.name}]\n${s.body.trim()}`;
    const cost = estimateTokens(text) + 1;
    if (used + cost > budget_tokens) continue;
    used += cost;
    picked.push(s);
    lines.push(text);
  }
  return { picked, block: picked.length > 0 ? lines.join("\n") : null };
}

const rank = (state: PromptSkill["state"]): number => (state === "active" ? 0 : 1);
