// crewlet agents pause|resume|stop <handle> [--url U] [--token T] [--json]: a person's
// controls over a seat, through a running node (agents:operate).
import { parseFlags, UsageError } from "./args.ts";
import { apiRequest, resolveTarget } from "./api-client.ts";
import { HANDLE_RE } from "../config/company.ts";

const USAGE = "usage: crewlet agents pause|resume|stop <handle> [--url URL] [--token TOKEN] [--json]";
const ACTIONS = new Set(["pause", "resume", "stop"]);

export async function runAgentsCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(args, { url: { type: "string" }, token: { type: "string" }, json: { type: "boolean" } }, 2);
  const [action, handle] = positionals;
  if (action === undefined || !ACTIONS.has(action)) throw new UsageError(`unknown agents command "${action ?? ""}"; ${USAGE}`);
  if (handle === undefined || !HANDLE_RE.test(handle)) throw new UsageError(`agents ${action}: a seat handle is required (got "${handle ?? ""}"); ${USAGE}`);
  const answer = await apiRequest(resolveTarget(values), "POST", `/agents/${handle}/${action}`, {});
  if (!answer.ok) {
    console.error(`crewlet agents ${action}: ${answer.message}`);
    return 1;
  }
  const body = answer.body as { changed?: boolean; stop?: { id: string | null } };
  if (values.json) console.log(JSON.stringify(body));
  else if (action === "stop") console.log(`stop requested for @${handle}: its turn in flight ends at its next fence check`);
  else console.log(`@${handle} ${action === "pause" ? "paused" : "resumed"}${body.changed === false ? " (it already was)" : ""}`);
  return 0;
}
