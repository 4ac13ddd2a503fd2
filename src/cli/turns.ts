// crewlet turns [--day D] [--seat H] [--outcome O] [--since T] [--until T] [--limit N]
// [--cursor C] [--json]: the turn ledger on a running node (GET /turns) — a receipt per turn,
// newest first, with its cost — and `crewlet turns week` (GET /turns/week).
import { parseFlags, UsageError } from "./args.ts";
import { apiRequest, resolveTarget } from "./api-client.ts";

const USAGE =
  "usage: crewlet turns [--day YYYY-MM-DD] [--seat H] [--outcome O] [--since T] [--until T] [--limit N] [--cursor C] | turns week [--days N]  [--url URL] [--token TOKEN] [--json]";

interface ListedReceipt {
  seat: string;
  ended_at: number;
  duration_ms: number;
  trigger: { type: string; from: string };
  summary: string;
  tools: { name: string; calls: number }[];
  input_tokens: number;
  output_tokens: number;
  cost_micros: number | null;
  outcome: string;
  error: string | null;
}

/** One line per turn: when, who, how it ended, tokens, cost, and its words (or why it failed). Pure. */
export function formatTurns(turns: ListedReceipt[], next: number | null): string {
  if (turns.length === 0) return "no turns";
  const table = [
    ["ENDED", "SEAT", "OUTCOME", "TRIGGER", "TOKENS", "COST", "WORDS"],
    ...turns.map((t) => [
      new Date(t.ended_at).toISOString(),
      `@${t.seat}`,
      t.outcome,
      `${t.trigger.type} from ${t.trigger.from}`,
      `${t.input_tokens}/${t.output_tokens}`,
      t.cost_micros === null ? "unpriced" : (t.cost_micros / 1_000_000).toFixed(4),
      (t.error ?? t.summary).split("\n")[0]!.slice(0, 100),
    ]),
  ];
  const widths = [0, 1, 2, 3, 4, 5].map((c) => Math.max(...table.map((row) => row[c]!.length)));
  const lines = table.map((row) => row.map((cell, c) => (c < 6 ? cell.padEnd(widths[c]!) : cell)).join("  ").trimEnd());
  return next === null ? lines.join("\n") : `${lines.join("\n")}\n(more: --cursor ${next})`;
}

export async function runTurnsCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(
    args,
    {
      url: { type: "string" },
      token: { type: "string" },
      json: { type: "boolean" },
      day: { type: "string" },
      seat: { type: "string" },
      outcome: { type: "string" },
      since: { type: "string" },
      until: { type: "string" },
      limit: { type: "string" },
      cursor: { type: "string" },
      days: { type: "string" },
    },
    1,
  );
  const [sub] = positionals;
  // Usage first: a mistyped command is named as one, not as a missing token.
  if (sub !== undefined && sub !== "list" && sub !== "week") throw new UsageError(`unknown turns command "${sub}"; ${USAGE}`);
  const target = resolveTarget(values);
  const q = new URLSearchParams();
  const names = sub === "week" ? (["days"] as const) : (["day", "seat", "outcome", "since", "until", "limit", "cursor"] as const);
  for (const name of names) if (typeof values[name] === "string") q.set(name, values[name]);
  // The node judges every parameter (a bad one is a 400 naming it); the CLI passes them on.
  const answer = await apiRequest(target, "GET", `/turns${sub === "week" ? "/week" : ""}${q.size > 0 ? `?${q}` : ""}`);
  if (!answer.ok) {
    console.error(`crewlet turns: ${answer.message}`);
    return 1;
  }
  if (values.json || sub === "week") {
    console.log(JSON.stringify(answer.body, null, values.json ? 0 : 2));
    return 0;
  }
  const body = answer.body as { turns: ListedReceipt[]; next: number | null };
  console.log(formatTurns(body.turns, body.next));
  return 0;
}
