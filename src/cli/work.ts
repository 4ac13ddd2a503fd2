// crewlet work list [--project KEY] [--status S] [--assignee H] [--url U] [--token T] [--json]
// crewlet work search <text> [the same filters]: ranked full-text search (GET /work?q=)
import { parseFlags, UsageError } from "./args.ts";
import { apiRequest, resolveTarget } from "./api-client.ts";
import { formatHits } from "./search-hits.ts";

const USAGE = "usage: crewlet work list|search [<text>] [--project KEY] [--status STATUS] [--assignee HANDLE] [--url URL] [--token TOKEN] [--json]";
/** Items one `work list` prints: a screenful-ish; --json callers page with the API. */
const LIST_LIMIT = 200;

interface Item {
  key: string;
  status: string;
  priority: string;
  assignee: string | null;
  title: string;
}

export function formatItems(items: Item[]): string {
  if (items.length === 0) return "no work items";
  const rows = [["KEY", "STATUS", "PRIORITY", "ASSIGNEE", "TITLE"], ...items.map((i) => [i.key, i.status, i.priority, i.assignee ?? "-", i.title])];
  const widths = [0, 1, 2, 3].map((c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows.map((r) => r.map((cell, c) => (c < 4 ? cell.padEnd(widths[c]!) : cell)).join("  ")).join("\n");
}

export async function runWorkCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(
    args,
    {
      url: { type: "string" },
      token: { type: "string" },
      project: { type: "string" },
      status: { type: "string" },
      assignee: { type: "string" },
      json: { type: "boolean" },
    },
    2,
  );
  const [sub, text] = positionals;
  if (sub !== "list" && sub !== "search") throw new UsageError(sub === undefined ? USAGE : `unknown work command "${sub}"; ${USAGE}`);
  if ((sub === "search") !== (text !== undefined)) throw new UsageError(USAGE);
  const target = resolveTarget(values);
  const q = new URLSearchParams(sub === "search" ? { q: text! } : { limit: String(LIST_LIMIT) });
  for (const k of ["project", "status", "assignee"] as const) if (typeof values[k] === "string") q.set(k, values[k] as string);
  if (sub === "search") return printSearch(target, q, values.json === true);
  const answer = await apiRequest(target, "GET", `/work?${q}`);
  if (!answer.ok) {
    console.error(`crewlet work list: ${answer.message}`);
    return 1;
  }
  const body = answer.body as { items: Item[]; next: number | null };
  if (values.json) console.log(JSON.stringify(body));
  else console.log(formatItems(body.items) + (body.next !== null ? `\n… more: narrow with --project/--status/--assignee` : ""));
  return 0;
}

interface WorkHit {
  key: string;
  status: string;
  title: string;
  snippet: string;
}

async function printSearch(target: ReturnType<typeof resolveTarget>, q: URLSearchParams, json: boolean): Promise<number> {
  const answer = await apiRequest(target, "GET", `/work?${q}`);
  if (!answer.ok) {
    console.error(`crewlet work search: ${answer.message}`);
    return 1;
  }
  const body = answer.body as { searched: boolean; hits: WorkHit[] };
  if (json) console.log(JSON.stringify(body));
  else console.log(formatHits("work items", body, (h: WorkHit) => `${h.key}  ${h.status}  ${h.title}${h.snippet ? `  — ${h.snippet}` : ""}`));
  return 0;
}
