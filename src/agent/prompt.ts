// What a turn tells the model: the system prompt built from the org (mission, policies,
// the seat's role, goal, backstory, manager, reports, colleagues) and the turn's opening
// message (the triggers and the context read from the estate). Pure: org and facts in,
// text out, so the same turn on any node says the same thing.
import type { Comment, Message, WorkItem } from "../estate/queries.ts";
import type { Org, Seat } from "../org/org.ts";
import type { Trigger } from "../org/trigger.ts";

/** Colleagues named in the prompt; the rest are one list_colleagues call away. */
export const PROMPT_MAX_COLLEAGUES = 40;

export interface ThreadContext {
  channel: string;
  root_id: string;
  /** The thread's newest messages, oldest first (bounded by the reader). */
  messages: Message[];
  /** True when older messages were left out. */
  truncated: boolean;
}

export interface WorkContext {
  item: WorkItem;
  /** Newest comments, oldest first (bounded by the reader). */
  comments: Comment[];
  truncated: boolean;
}

export interface TurnContextData {
  thread: ThreadContext | null;
  work: WorkContext | null;
}

export function systemPrompt(org: Org, seat: Seat): string {
  const lines: string[] = [];
  lines.push(`You are ${seat.name} (@${seat.handle}) at ${org.company_name}.`);
  if (org.mission) lines.push(`Company mission: ${org.mission}`);
  if (seat.goal) lines.push(`Your goal: ${seat.goal}`);
  if (seat.backstory) lines.push(`Your background: ${seat.backstory}`);
  if (org.policies.length > 0) {
    lines.push("Company policies:");
    for (const p of org.policies) lines.push(`- ${p}`);
  }
  const mgr = seat.manager ? org.seat(seat.manager) : undefined;
  lines.push(mgr ? `You report to ${mgr.name} (@${mgr.handle}).` : "You report to nobody in the org chart.");
  if (seat.reports.length > 0) lines.push(`Your reports: ${seat.reports.map((h) => `@${h}`).join(", ")}.`);
  const units = seat.units.map((id) => org.unit(id)).filter((u) => u !== undefined);
  for (const u of units) {
    const extra = [u.project ? `project ${u.project}` : null, u.channel ? `channel #${u.channel}` : null, u.space ? `space "${u.space}"` : null].filter(Boolean);
    lines.push(`You belong to the ${u.name} unit${extra.length ? ` (${extra.join(", ")})` : ""}.`);
  }
  const colleagues = org.colleaguesOf(seat.handle);
  if (colleagues.length > 0) {
    const shown = colleagues.slice(0, PROMPT_MAX_COLLEAGUES).map((c) => `@${c.handle} (${c.name}${c.kind === "human" ? ", a person" : ""})`);
    lines.push(`Colleagues: ${shown.join(", ")}${colleagues.length > shown.length ? `, and ${colleagues.length - shown.length} more (list_colleagues)` : ""}.`);
  }
  lines.push(
    "Work through the tools you are given. Track work as work items. When you were asked in chat, your final answer is posted as your reply in that thread unless you already replied there. Keep answers short and concrete.",
  );
  return lines.join("\n");
}

function describeTrigger(t: Trigger): string {
  const ref = [t.refs.work_key, t.refs.channel ? `#${t.refs.channel}` : undefined].filter(Boolean).join(" ");
  return `[${t.type}] from ${t.from}${ref ? ` (${ref})` : ""}: ${t.text}`;
}

/** The opening user message: what woke the seat and what it is about. */
export function turnMessage(triggers: readonly Trigger[], ctx: TurnContextData): string {
  const out: string[] = [];
  out.push(triggers.length === 1 ? "You were woken by:" : `You were woken by ${triggers.length} events in one conversation:`);
  for (const t of triggers) out.push(describeTrigger(t));
  if (ctx.work) {
    const it = ctx.work.item;
    out.push("");
    out.push(`Work item ${it.key}: ${it.title}`);
    out.push(`status ${it.status}, priority ${it.priority}, assignee ${it.assignee ?? "none"}, reporter ${it.reporter}`);
    if (it.body) out.push(it.body);
    if (ctx.work.comments.length > 0) {
      out.push(`Comments${ctx.work.truncated ? " (newest only)" : ""}:`);
      for (const c of ctx.work.comments) out.push(`- ${c.author}: ${c.body}`);
    }
  }
  if (ctx.thread) {
    out.push("");
    out.push(`Thread in #${ctx.thread.channel}${ctx.thread.truncated ? " (newest messages only)" : ""}:`);
    for (const m of ctx.thread.messages) out.push(`- [${m.id}] ${m.author}: ${m.deleted ? "(deleted)" : m.body}`);
  }
  return out.join("\n");
}

/**
 * The waiting messages a thread showed this turn (spec: the completion ledger's second
 * key): somebody else's, after the seat's own last reply, before the message that woke
 * it — never one the bound dropped (only `shown` is looked at) and never a constituent.
 */
export function waitingMessages(seat: string, shown: readonly Message[], woke_by: ReadonlySet<string>): string[] {
  const firstWake = shown.findIndex((m) => woke_by.has(m.id));
  if (firstWake < 0) return [];
  let lastOwn = -1;
  for (let i = 0; i < firstWake; i++) if (shown[i]!.author === seat) lastOwn = i;
  const out: string[] = [];
  for (let i = lastOwn + 1; i < firstWake; i++) {
    const m = shown[i]!;
    if (m.author !== seat && !m.deleted && !woke_by.has(m.id)) out.push(m.id);
  }
  return out;
}
