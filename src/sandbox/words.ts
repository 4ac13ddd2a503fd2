// A run's result in words: what the seat's turn is told, and what a person reads in the
// thread when the seat passes it on. Pure.
import { NOTICE_PREFIX } from "../agent/notice.ts";
import type { RunRecord } from "./runs.ts";

/** The diff shown to the model: the whole diff is on the run record (GET /runs/{id}). */
const DIFF_SHOWN_BYTES = 12 * 1024;
/** Output lines shown: the end of a CLI's output is where it says what it did or why not. */
const TAIL_LINES_SHOWN = 30;

export interface SeatGrantLike {
  handle: string;
  epoch: number;
}

const OUTCOME_WORDS = { succeeded: "finished", failed: "failed", limit: "was stopped at a limit", cancelled: "was cancelled" } as const;

export function resultWords(rec: RunRecord): string {
  const r = rec.result;
  if (!r) return `Coding run ${rec.id} (${rec.engine}) has no result yet.`;
  const lines = [`Coding run ${rec.id} (${rec.engine}) ${OUTCOME_WORDS[r.outcome]}${r.reason ? `: ${r.reason}` : "."}`];
  lines.push(`Task: ${firstLine(rec.task)}`);
  if (r.summary) lines.push(`Its last words: ${r.summary}`);
  if (r.commits.length > 0) lines.push(`Commits (${r.commits.length}):`, ...r.commits.slice(0, 20).map((c) => `  ${c}`));
  if (r.diff) lines.push("Diff:", cut(r.diff, DIFF_SHOWN_BYTES));
  if (r.outcome !== "succeeded" && r.output_tail) lines.push("Last output:", r.output_tail.split("\n").slice(-TAIL_LINES_SHOWN).join("\n"));
  return lines.join("\n");
}

/** What the thread is told, by the engine itself, when a run did not succeed: the seat's turn
 * comments on it, but the reason reaches the person even if that turn fails. Null: it succeeded. */
export function failureNotice(rec: RunRecord): string | null {
  const r = rec.result;
  if (!r || r.outcome === "succeeded") return null;
  return `${NOTICE_PREFIX}My coding run ${rec.id} (${rec.engine}) ${OUTCOME_WORDS[r.outcome]}${r.reason ? `: ${r.reason}` : "."}`;
}

function firstLine(s: string): string {
  const line = s.split("\n", 1)[0] ?? "";
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}

function cut(s: string, max: number): string {
  const b = Buffer.from(s, "utf8");
  return b.length <= max ? s : `${b.subarray(0, max).toString("utf8")}\n… (cut; the whole diff is on the run: crewlet runs show)`;
}
