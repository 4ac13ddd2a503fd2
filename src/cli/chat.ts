// crewlet chat post <channel> <text> [--author h] [--url U] [--token T] [--json]
import { parseFlags, UsageError } from "./args.ts";
import { apiRequest, resolveTarget } from "./api-client.ts";

const USAGE = "usage: crewlet chat post <channel> <text> [--author handle] [--url URL] [--token TOKEN] [--json]";

export async function runChatCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(
    args,
    { url: { type: "string" }, token: { type: "string" }, author: { type: "string" }, json: { type: "boolean" } },
    3,
  );
  const [sub, channel, text] = positionals;
  if (sub !== "post") throw new UsageError(sub === undefined ? USAGE : `unknown chat command "${sub}"; ${USAGE}`);
  if (!channel || text === undefined) throw new UsageError(USAGE);
  const target = resolveTarget(values);
  const body = { body: text, ...(typeof values.author === "string" ? { author: values.author } : {}) };
  const answer = await apiRequest(target, "POST", `/chat/channels/${encodeURIComponent(channel)}/messages`, body);
  if (!answer.ok) {
    console.error(`crewlet chat post: ${answer.message}`);
    return 1;
  }
  const out = answer.body as { status: string; message_id?: string; op_id: string; position: number };
  if (values.json) console.log(JSON.stringify(out));
  else if (out.status === "applied") console.log(`posted to #${channel}: message ${out.message_id} (position ${out.position})`);
  else console.log(`on the log, not yet applied where asked: message ${out.op_id} (position ${out.position})`);
  return 0;
}
