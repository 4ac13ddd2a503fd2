// crewlet runs list [--seat H] [--state S] | show <id> | cancel <id> [--reason TEXT]: the
// seats' coding runs on a running node (GET /runs, GET /runs/{id}, POST /runs/{id}/cancel).
import { parseFlags, UsageError } from "./args.ts";
import { apiRequest, resolveTarget } from "./api-client.ts";

const USAGE = "usage: crewlet runs list [--seat H] [--state starting|running|parked|done] | show <id> | cancel <id> [--reason TEXT]  [--url URL] [--token TOKEN] [--json]";

interface ListedRun {
  id: string;
  seat: string;
  engine: string;
  state: string;
  node: string;
  created_at: number;
  question: { text: string } | null;
  result: { outcome: string; reason: string } | null;
}

/** One line per run: what a person scans for (a parked question, a failure's reason). Pure. */
export function formatRuns(runs: ListedRun[]): string {
  if (runs.length === 0) return "no runs";
  const table = [
    ["RUN", "SEAT", "ENGINE", "STATE", "NODE", "STARTED", "DETAIL"],
    ...runs.map((r) => [
      r.id,
      `@${r.seat}`,
      r.engine,
      r.result ? r.result.outcome : r.state,
      r.node,
      new Date(r.created_at).toISOString(),
      r.state === "parked" && r.question ? `asks: ${r.question.text.split("\n")[0]}` : (r.result?.reason ?? ""),
    ]),
  ];
  const widths = [0, 1, 2, 3, 4, 5].map((c) => Math.max(...table.map((row) => row[c]!.length)));
  return table.map((row) => row.map((cell, c) => (c < 6 ? cell.padEnd(widths[c]!) : cell)).join("  ").trimEnd()).join("\n");
}

export async function runRunsCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(
    args,
    { url: { type: "string" }, token: { type: "string" }, json: { type: "boolean" }, seat: { type: "string" }, state: { type: "string" }, reason: { type: "string" } },
    2,
  );
  const [sub, id] = positionals;
  // Usage first: a mistyped command is named as one, not as a missing token.
  if (sub !== undefined && !["list", "show", "cancel"].includes(sub)) throw new UsageError(`unknown runs command "${sub}"; ${USAGE}`);
  if ((sub === "show" || sub === "cancel") && id === undefined) throw new UsageError(USAGE);
  const target = resolveTarget(values);
  const fail = (message: string) => {
    console.error(`crewlet runs: ${message}`);
    return 1;
  };
  switch (sub ?? "list") {
    case "list": {
      if (id !== undefined) throw new UsageError(USAGE);
      const q = new URLSearchParams();
      if (typeof values.seat === "string") q.set("seat", values.seat);
      if (typeof values.state === "string") q.set("state", values.state);
      const answer = await apiRequest(target, "GET", `/runs${q.size > 0 ? `?${q}` : ""}`);
      if (!answer.ok) return fail(answer.message);
      const body = answer.body as { runs: ListedRun[] };
      console.log(values.json ? JSON.stringify(body) : formatRuns(body.runs));
      return 0;
    }
    case "show": {
      if (id === undefined) throw new UsageError(USAGE);
      const answer = await apiRequest(target, "GET", `/runs/${encodeURIComponent(id)}`);
      if (!answer.ok) return fail(answer.message);
      console.log(JSON.stringify(answer.body, null, values.json ? 0 : 2));
      return 0;
    }
    case "cancel": {
      if (id === undefined) throw new UsageError(USAGE);
      const answer = await apiRequest(target, "POST", `/runs/${encodeURIComponent(id)}/cancel`, typeof values.reason === "string" ? { reason: values.reason } : {});
      if (!answer.ok) return fail(answer.message);
      console.log(values.json ? JSON.stringify(answer.body) : `run ${id}: cancel requested`);
      return 0;
    }
    default:
      throw new UsageError(`unknown runs command "${sub}"; ${USAGE}`);
  }
}
