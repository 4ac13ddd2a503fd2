// company.approvals: what needs a person's yes before it happens, by tool, seat or unit and
// spend; `company_changes: true` offers (and always parks) propose_company_change. No rules,
// nothing waits. Pure: matchRule; the parking and the resume are in src/approvals/.
import { z } from "zod";

/** How long a request waits for a decision before it is rejected as expired: three days
 *  covers a weekend and a public holiday, so work asked for on Friday is still decidable on
 *  Monday; past that, the work's context has moved on and the agent should ask again. */
export const DEFAULT_EXPIRES_AFTER_HOURS = 72;
/** The longest a company may let a request wait: a month, the spend windows' longest. */
export const MAX_EXPIRES_AFTER_HOURS = 31 * 24;

/** The tool a seat proposes company changes with (offered only under a company_changes rule). */
export const COMPANY_CHANGE_TOOL = "propose_company_change";

const toolPattern = z
  .string()
  .regex(/^(mcp:\*|[A-Za-z0-9_*-]{1,64})$/, "a tool name, a name with * wildcards, or mcp:* (any MCP tool not annotated read-only)");

export const approvalRuleSchema = z
  .strictObject({
    name: z.string().min(1).max(80).optional().describe("Shown to the person deciding; defaults to the rule's position"),
    tools: z.array(toolPattern).min(1).optional().describe("Tools whose calls need a yes; unset: every tool that is not read-only"),
    seats: z.array(z.string().min(1).max(48)).min(1).optional().describe("Only calls by these seats"),
    units: z.array(z.string().regex(/^[a-z0-9][a-z0-9_\-]*$/, "a unit id")).min(1).optional().describe("Only calls by seats in these units (or units inside them)"),
    spend_over: z.number().min(0).optional().describe("Only once the turn has spent more than this, in the currency of providers.llm.*.pricing"),
    company_changes: z.boolean().default(false).describe("Agents may propose hires and goal changes; each waits for a yes"),
  })
  .refine((r) => !(r.company_changes && (r.tools !== undefined || r.spend_over !== undefined)), "a company_changes rule names no tools and no spend (it governs propose_company_change)");
export type ApprovalRule = z.output<typeof approvalRuleSchema>;

export const approvalsSchema = z
  .strictObject({
    expires_after_hours: z.number().min(0.01).max(MAX_EXPIRES_AFTER_HOURS).default(DEFAULT_EXPIRES_AFTER_HOURS).describe("A request with no decision by then is rejected as expired, and the person told"),
    rules: z.array(approvalRuleSchema).default([]),
  })
  .default({ expires_after_hours: DEFAULT_EXPIRES_AFTER_HOURS, rules: [] });
export type ApprovalsConfig = z.output<typeof approvalsSchema>;

/** A tool call as the rules see it. */
export interface CallFacts {
  tool: string;
  source: "builtin" | "mcp";
  readOnly: boolean;
  seat: string;
  /** The seat's units and every unit they sit inside. */
  units: readonly string[];
  /** What the turn has spent so far (null: no pricing, so no spend rule can match). */
  spent: number | null;
}

export interface MatchedRule {
  index: number;
  name: string;
}

/** The first rule that says this call needs a yes, or null. Read-only calls never do. Pure. */
export function matchRule(rules: readonly ApprovalRule[], call: CallFacts): MatchedRule | null {
  if (call.readOnly) return null;
  for (const [index, r] of rules.entries()) {
    if (!ruleCovers(r, call)) continue;
    return { index, name: r.name ?? `rules[${index}]` };
  }
  return null;
}

function ruleCovers(r: ApprovalRule, call: CallFacts): boolean {
  if (r.company_changes) return call.tool === COMPANY_CHANGE_TOOL && seatFits(r, call);
  if (call.tool === COMPANY_CHANGE_TOOL) return false;
  if (r.tools !== undefined && !r.tools.some((p) => toolFits(p, call))) return false;
  if (!seatFits(r, call)) return false;
  if (r.spend_over !== undefined && (call.spent === null || call.spent <= r.spend_over)) return false;
  return true;
}

function seatFits(r: ApprovalRule, call: CallFacts): boolean {
  if (r.seats !== undefined && !r.seats.includes(call.seat)) return false;
  if (r.units !== undefined && !r.units.some((u) => call.units.includes(u))) return false;
  return true;
}

function toolFits(pattern: string, call: CallFacts): boolean {
  if (pattern === "mcp:*") return call.source === "mcp";
  if (!pattern.includes("*")) return pattern === call.tool;
  const re = new RegExp(`^${pattern.split("*").map(escapeRe).join(".*")}$`);
  return re.test(call.tool);
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Whether any rule lets `seat` propose company changes (the tool is offered only then). Pure. */
export function mayProposeChanges(rules: readonly ApprovalRule[], seat: string, units: readonly string[]): boolean {
  return rules.some((r) => r.company_changes && seatFits(r, { tool: COMPANY_CHANGE_TOOL, source: "builtin", readOnly: false, seat, units, spent: null }));
}

/** Config problems a schema cannot see alone: rules naming seats or units the company lacks. Pure. */
export function approvalReferenceProblems(a: ApprovalsConfig, handles: ReadonlySet<string>, unitIds: ReadonlySet<string>): { path: (string | number)[]; message: string }[] {
  const out: { path: (string | number)[]; message: string }[] = [];
  a.rules.forEach((r, i) => {
    r.seats?.forEach((h, j) => {
      if (!handles.has(h)) out.push({ path: ["approvals", "rules", i, "seats", j], message: `unknown handle "${h}"` });
    });
    r.units?.forEach((u, j) => {
      if (!unitIds.has(u)) out.push({ path: ["approvals", "rules", i, "units", j], message: `unknown unit id "${u}"` });
    });
  });
  return out;
}
