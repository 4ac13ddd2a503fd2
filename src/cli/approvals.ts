// crewlet approvals list [--seat H] [--state S] | show <id> | approve <id> [--reason TEXT] |
// reject <id> --reason TEXT: calls agents parked for a person's yes, on a running node
// (GET /approvals, GET /approvals/{id}, POST /approvals/{id}/approve|reject).
import { parseFlags, UsageError } from "./args.ts";
import { apiRequest, resolveTarget } from "./api-client.ts";

const USAGE =
  "usage: crewlet approvals list [--seat H] [--state pending|approved|rejected|expired] | show <id> | approve <id> [--reason TEXT] | reject <id> --reason TEXT  [--url URL] [--token TOKEN] [--json]";

interface ListedApproval {
  id: string;
  seat: string;
  tool: string;
  rule: string;
  state: string;
  requested_at: number;
  expires_at: number;
  decided_by: string | null;
  reason: string | null;
}

/** One line per request: what waits on whom, and what was decided. Pure. */
export function formatApprovals(list: ListedApproval[]): string {
  if (list.length === 0) return "no approval requests";
  const table = [
    ["REQUEST", "SEAT", "TOOL", "STATE", "ASKED", "DETAIL"],
    ...list.map((a) => [
      a.id,
      `@${a.seat}`,
      a.tool,
      a.state,
      new Date(a.requested_at).toISOString(),
      a.state === "pending" ? `rule "${a.rule}", expires ${new Date(a.expires_at).toISOString()}` : `${a.decided_by ?? ""}${a.reason ? `: ${a.reason.split("\n")[0]}` : ""}`,
    ]),
  ];
  const widths = [0, 1, 2, 3, 4].map((c) => Math.max(...table.map((row) => row[c]!.length)));
  return table.map((row) => row.map((cell, c) => (c < 5 ? cell.padEnd(widths[c]!) : cell)).join("  ").trimEnd()).join("\n");
}

export async function runApprovalsCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(
    args,
    { url: { type: "string" }, token: { type: "string" }, json: { type: "boolean" }, seat: { type: "string" }, state: { type: "string" }, reason: { type: "string" } },
    2,
  );
  const [sub, id] = positionals;
  // Usage first: a mistyped command is named as one, not as a missing token.
  if (sub !== undefined && !["list", "show", "approve", "reject"].includes(sub)) throw new UsageError(`unknown approvals command "${sub}"; ${USAGE}`);
  if (sub !== undefined && sub !== "list" && id === undefined) throw new UsageError(USAGE);
  if (sub === "list" && id !== undefined) throw new UsageError(USAGE);
  if (sub === "reject" && typeof values.reason !== "string") throw new UsageError(`a rejection says why (--reason TEXT): the agent reads it. ${USAGE}`);
  const target = resolveTarget(values);
  const fail = (message: string) => {
    console.error(`crewlet approvals: ${message}`);
    return 1;
  };
  if ((sub ?? "list") === "list") {
    const q = new URLSearchParams();
    if (typeof values.seat === "string") q.set("seat", values.seat);
    if (typeof values.state === "string") q.set("state", values.state);
    const answer = await apiRequest(target, "GET", `/approvals${q.size > 0 ? `?${q}` : ""}`);
    if (!answer.ok) return fail(answer.message);
    const body = answer.body as { approvals: ListedApproval[] };
    console.log(values.json ? JSON.stringify(body) : formatApprovals(body.approvals));
    return 0;
  }
  const path = `/approvals/${encodeURIComponent(id!)}`;
  const answer = sub === "show" ? await apiRequest(target, "GET", path) : await apiRequest(target, "POST", `${path}/${sub}`, typeof values.reason === "string" ? { reason: values.reason } : {});
  if (!answer.ok) return fail(answer.message);
  if (sub === "show" || values.json) console.log(JSON.stringify(answer.body, null, values.json ? 0 : 2));
  else console.log(`request ${id}: ${sub === "approve" ? "approved" : "rejected"}; the seat is told`);
  return 0;
}
