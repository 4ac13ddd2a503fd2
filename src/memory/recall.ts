// What a turn is told of the seat's memory: its newest diary notes, its episodes for the
// work the turn is about, and its note on whoever woke it — inside a token budget. Pure:
// rows in, text out, so the same memory reads the same on any node.
import type { CounterpartyRow, DiaryRow, EpisodeRow, OnboardingRow } from "./records.ts";

/**
 * Tokens the memory block may take of a turn's prompt. The smallest models the company
 * runs on (a local 8k-context model behind Ollama) must still fit the system prompt, the
 * thread (up to 50 messages), the work item and a dozen tool schemas; 1,500 tokens of
 * memory is under a fifth of that context, enough for the counterparty note, the work's
 * history and ten or so diary notes. Older memory is a memory_search away.
 */
export const MEMORY_PROMPT_TOKENS = 1_500;
/** Bytes per token when estimating: English prose averages about four on BPE tokenizers. */
export const BYTES_PER_TOKEN = 4;
/** Diary notes offered to the block (newest first) before the budget cuts. */
export const RECALL_DIARY_NOTES = 20;
/** Episodes on the work item (or in the conversation) offered, newest first: the latest few
 * turns on one piece of work say where it stands; its whole history is a memory_search away. */
export const RECALL_EPISODES = 5;

export interface RecallInput {
  diary: readonly DiaryRow[];
  /** The episodes on the current work item (or in the conversation), newest first. */
  episodes: readonly EpisodeRow[];
  counterparty: CounterpartyRow | null;
  onboarding: readonly OnboardingRow[];
}

export const estimateTokens = (s: string): number => Math.ceil(Buffer.byteLength(s, "utf8") / BYTES_PER_TOKEN);

/**
 * The memory block, or null when the seat remembers nothing relevant. Sections in order of
 * how much they are worth to this turn: who is asking, what was done on this work before,
 * then the diary newest first — each line added only while the budget holds.
 */
export function memoryBlock(input: RecallInput, budget_tokens = MEMORY_PROMPT_TOKENS): string | null {
  const lines: string[] = [];
  let used = 0;
  const add = (line: string): boolean => {
    const cost = estimateTokens(line) + 1;
    if (used + cost > budget_tokens) return false;
    lines.push(line);
    used += cost;
    return true;
  };
  const header = "Your memory (notes you kept; memory_search finds older ones):";
  if (!add(header)) return null;
  const start = lines.length;
  const cp = input.counterparty;
  if (cp && (cp.note !== "" || cp.interactions > 0)) {
    add(`About ${cp.counterparty}: ${cp.note || "no note yet"} (${cp.interactions} earlier piece${cp.interactions === 1 ? "" : "s"} of work together).`);
  }
  if (input.episodes.length > 0) {
    add("Earlier on this work:");
    for (const e of input.episodes) if (!add(`- [${e.outcome}] ${oneLine(e.summary) || "(no summary)"}`)) break;
  }
  if (input.onboarding.length > 0) add(`Onboarding done: ${input.onboarding.map((o) => `${o.id} (${oneLine(o.detail)})`).join("; ")}`);
  if (input.diary.length > 0) {
    add("Diary (newest first):");
    for (const d of input.diary) if (!add(`- ${oneLine(d.content)}`)) break;
  }
  return lines.length > start ? lines.join("\n") : null;
}

function oneLine(s: string): string {
  return s.replace(/\s+/g, " ").trim();
}
