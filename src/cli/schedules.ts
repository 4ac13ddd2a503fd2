// crewlet schedules [--url U] [--token T] [--json]: each schedule, its next fire and how
// its last fire went, from a running node.
import { parseFlags, UsageError } from "./args.ts";
import { apiRequest, resolveTarget } from "./api-client.ts";

interface Row {
  id: string;
  seat: string;
  cron: string;
  timezone: string;
  enabled: boolean;
  next_fire: string | null;
  last_fire: { instant_iso: string; outcome: string; missed: number } | null;
  error?: string;
}

export function formatSchedules(rows: Row[]): string {
  if (rows.length === 0) return "no schedules (company.schedules is empty)";
  const table = [
    ["ID", "SEAT", "CRON", "ZONE", "NEXT FIRE", "LAST FIRE"],
    ...rows.map((r) => [
      r.id,
      `@${r.seat}`,
      r.cron,
      r.timezone,
      r.enabled ? (r.next_fire ?? "never") : "disabled",
      r.error ? `unreadable: ${r.error}` : r.last_fire ? `${r.last_fire.instant_iso} ${r.last_fire.outcome}${r.last_fire.missed > 0 ? ` (caught up ${r.last_fire.missed})` : ""}` : "-",
    ]),
  ];
  const widths = [0, 1, 2, 3, 4].map((c) => Math.max(...table.map((r) => r[c]!.length)));
  return table.map((r) => r.map((cell, c) => (c < 5 ? cell.padEnd(widths[c]!) : cell)).join("  ")).join("\n");
}

export async function runSchedulesCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(args, { url: { type: "string" }, token: { type: "string" }, json: { type: "boolean" } }, 1);
  if (positionals.length > 0 && positionals[0] !== "list") throw new UsageError(`unknown schedules command "${positionals[0]}"; usage: crewlet schedules [list] [--url URL] [--token TOKEN] [--json]`);
  const answer = await apiRequest(resolveTarget(values), "GET", "/schedules");
  if (!answer.ok) {
    console.error(`crewlet schedules: ${answer.message}`);
    return 1;
  }
  const body = answer.body as { schedules: Row[] };
  console.log(values.json ? JSON.stringify(body) : formatSchedules(body.schedules));
  return 0;
}
