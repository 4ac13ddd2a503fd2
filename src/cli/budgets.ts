// crewlet budgets [--url U] [--token T] [--json]: each cap (org and seats), its window's
// spend and when it resets, from a running node.
import { parseFlags, UsageError } from "./args.ts";
import { apiRequest, resolveTarget } from "./api-client.ts";
import type { ScopeStatus } from "../spend/counters.ts";

export function formatBudgets(rows: ScopeStatus[]): string {
  if (rows.length === 0) return "no budgets (company.budgets names no caps)";
  const capOf = (r: ScopeStatus) => [r.cap.tokens !== undefined ? `${r.cap.tokens} tokens` : null, r.cap.money !== undefined ? `${r.cap.money} money` : null].filter((x) => x !== null).join(" + ");
  const spentOf = (r: ScopeStatus) => [r.cap.tokens !== undefined || r.cap.money === undefined ? `${r.spent.tokens} tokens` : null, r.cap.money !== undefined ? `${r.spent.money.toFixed(4)} money` : null].filter((x) => x !== null).join(" + ");
  const table = [
    ["SCOPE", "WINDOW", "CAP", "SPENT", "USED", "RESETS"],
    ...rows.map((r) => [r.scope, r.window, capOf(r), spentOf(r), `${Math.round(r.fraction * 100)}%${r.exhausted ? " EXHAUSTED" : ""}`, r.reset_at]),
  ];
  const widths = [0, 1, 2, 3, 4].map((c) => Math.max(...table.map((r) => r[c]!.length)));
  return table.map((r) => r.map((cell, c) => (c < 5 ? cell.padEnd(widths[c]!) : cell)).join("  ")).join("\n");
}

export async function runBudgetsCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(args, { url: { type: "string" }, token: { type: "string" }, json: { type: "boolean" } }, 1);
  if (positionals.length > 0 && positionals[0] !== "list") throw new UsageError(`unknown budgets command "${positionals[0]}"; usage: crewlet budgets [list] [--url URL] [--token TOKEN] [--json]`);
  const answer = await apiRequest(resolveTarget(values), "GET", "/budgets");
  if (!answer.ok) {
    console.error(`crewlet budgets: ${answer.message}`);
    return 1;
  }
  const body = answer.body as { budgets: ScopeStatus[] };
  console.log(values.json ? JSON.stringify(body) : formatBudgets(body.budgets));
  return 0;
}
