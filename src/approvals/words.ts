// What an approval says to people and to the agent. Pure: facts in, words out.
import type { ApprovalRecord } from "./records.ts";

/** The arguments as the person reads them: JSON, cut so a request stays a chat message. */
const ARGS_SHOWN_CHARS = 1_500;

/** Marks the engine's own approval lines in a thread, as NOTICE_PREFIX marks failures. */
export const REQUEST_PREFIX = "🔐 ";

export function argsShown(args: Record<string, unknown>): string {
  const json = JSON.stringify(args, null, 2);
  return json.length <= ARGS_SHOWN_CHARS ? json : `${json.slice(0, ARGS_SHOWN_CHARS)}\n… (${json.length - ARGS_SHOWN_CHARS} more characters; the full call is in GET /approvals/{id})`;
}

/** The request posted where the work came from. */
export function requestWords(r: ApprovalRecord): string {
  const why = r.summary.trim() === "" ? "" : `\n\n${r.summary.trim()}`;
  return (
    `${REQUEST_PREFIX}Approval needed (${r.id}): I would like to call \`${r.tool}\` — rule "${r.rule}" asks a person first.${why}\n\n` +
    `\`\`\`json\n${argsShown(r.args)}\n\`\`\`\n` +
    `Decide in the dashboard's Approvals view, or: crewlet approvals approve ${r.id} | crewlet approvals reject ${r.id} --reason "…". ` +
    `It expires ${new Date(r.expires_at).toISOString()}.`
  );
}

/** What the model reads back instead of the call's result when the call parks. */
export function parkedWords(r: ApprovalRecord, created: boolean): string {
  const state =
    r.decision === null
      ? created
        ? `I asked for it in the conversation as request ${r.id} (expires ${new Date(r.expires_at).toISOString()}).`
        : `Request ${r.id} for exactly this call is already waiting for a decision.`
      : `Request ${r.id} for exactly this call was already decided (${r.decision.verdict}); you are told the outcome in its own turn.`;
  return `Not run: ${r.tool} needs a person's approval (rule "${r.rule}"). ${state} You will be woken with the decision and, if approved, the call's result. Tell the person briefly; do not call it again.`;
}

/** The turn the decision resumes the seat with. */
export function decisionWords(r: ApprovalRecord): string {
  const d = r.decision!;
  const reason = d.reason.trim() === "" ? "" : ` Reason: ${d.reason.trim()}`;
  const head =
    d.verdict === "approved"
      ? `Your request ${r.id} to call ${r.tool} was approved by ${d.by}.${reason}`
      : d.verdict === "rejected"
        ? `Your request ${r.id} to call ${r.tool} was rejected by ${d.by}.${reason} The call did not run.`
        : `Your request ${r.id} to call ${r.tool} expired with no decision.${reason} The call did not run.`;
  const res = r.result;
  if (d.verdict !== "approved" || res === null) return `${head}\nArguments: ${JSON.stringify(r.args)}`;
  const ran = res.ran === "yes" ? (res.is_error ? "It ran and failed:" : "It ran. Its result:") : res.ran === "unknown" ? "Whether it ran is unknown:" : "It did not run:";
  return `${head}\nArguments: ${JSON.stringify(r.args)}\n${ran}\n${res.content}`;
}

/** Told in the thread when a request expires, so the person hears it even if the agent says nothing. */
export function expiredNotice(r: ApprovalRecord): string {
  return `${REQUEST_PREFIX}Request ${r.id} (\`${r.tool}\`) expired with no decision; the call did not run.`;
}

/**
 * The result a request keeps when the sweep closes it: its deciding turn was recorded over
 * without settling it. Decided: the call never started (a take marks it running first);
 * running: it started and its result was never written. Null: nothing was to run. Pure.
 */
export function closedResult(r: ApprovalRecord, outcome: string): ApprovalRecord["result"] {
  if (r.decision?.verdict !== "approved") return null;
  return r.state === "running"
    ? { content: `its turn ended (${outcome}) while running the call, before the result was written: whether it ran is unknown; check before asking again`, is_error: true, ran: "unknown" }
    : { content: `its turn ended (${outcome}) before running the call: it did not run; ask again if it is still wanted`, is_error: true, ran: "no" };
}

/** Told in the thread when the sweep closes an approved request, so the person is not left
 *  reading "approved" for a call that never ran. */
export function closedNotice(r: ApprovalRecord, result: NonNullable<ApprovalRecord["result"]>): string {
  return `${REQUEST_PREFIX}Request ${r.id} (\`${r.tool}\`) was approved by ${r.decision!.by}, but ${result.content}.`;
}
