// crewlet chat post <channel> <text> [--author h] [--url U] [--token T] [--json]
// crewlet chat search <text> [--channel C] [--member H]: ranked full-text search (GET /chat/messages?q=)
import { parseFlags, UsageError } from "./args.ts";
import { apiRequest, resolveTarget } from "./api-client.ts";
import { formatHits } from "./search-hits.ts";

const USAGE =
  "usage: crewlet chat post <channel> <text> [--author handle] | crewlet chat search <text> [--channel C] [--member handle]  [--url URL] [--token TOKEN] [--json]";

export async function runChatCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(
    args,
    { url: { type: "string" }, token: { type: "string" }, author: { type: "string" }, channel: { type: "string" }, member: { type: "string" }, json: { type: "boolean" } },
    3,
  );
  const [sub, channel, text] = positionals;
  if (sub === "search") return search(positionals.slice(1), values);
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

interface ChatHit {
  channel: string;
  author: string;
  id: string;
  snippet: string;
}

async function search(words: string[], values: Record<string, string | boolean | undefined>): Promise<number> {
  if (words.length !== 1) throw new UsageError(USAGE);
  const q = new URLSearchParams({ q: words[0]! });
  for (const k of ["channel", "member"] as const) if (typeof values[k] === "string") q.set(k, values[k] as string);
  const answer = await apiRequest(resolveTarget(values), "GET", `/chat/messages?${q}`);
  if (!answer.ok) {
    console.error(`crewlet chat search: ${answer.message}`);
    return 1;
  }
  const body = answer.body as { searched: boolean; hits: ChatHit[] };
  if (values.json) console.log(JSON.stringify(body));
  else console.log(formatHits("messages", body, (h: ChatHit) => `#${h.channel}  ${h.author}: ${h.snippet}  (${h.id})`));
  return 0;
}
