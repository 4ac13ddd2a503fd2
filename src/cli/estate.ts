// crewlet estate status                                  this node's copy, per domain
// crewlet estate skip <domain> <position> --reason TEXT  pass over a record no copy can apply
// crewlet estate hold <domain> [--reason TEXT]           keep the domain's log from where it starts now (a backup)
// crewlet estate release <domain>                        let the trim go on
// [--url U] [--token T] [--json]. Skip needs a token with fleet:operate.
import { z } from "zod";
import { DOMAINS } from "../estate/schema.ts";
import { parseFlags, UsageError } from "./args.ts";
import { apiRequest, resolveTarget } from "./api-client.ts";

const USAGE =
  "usage: crewlet estate status | crewlet estate skip <tracker|pages|chat> <position> --reason TEXT | crewlet estate hold <tracker|pages|chat> [--reason TEXT] | crewlet estate release <tracker|pages|chat> [--url URL] [--token TOKEN] [--json]";
const domainArg = z.enum(DOMAINS, { error: `domain: one of ${DOMAINS.join(", ")}` });

const skipArgs = z.object({
  domain: z.enum(DOMAINS, { error: `domain: one of ${DOMAINS.join(", ")}` }),
  position: z.coerce.number({ error: "position: a log position (a positive integer)" }).int("position: a log position (a positive integer)").min(1, "position: a log position (a positive integer)"),
  reason: z.string({ error: "--reason: say why (it is kept with the marker)" }).min(1, "--reason: say why (it is kept with the marker)"),
});

export async function runEstateCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(
    args,
    { url: { type: "string" }, token: { type: "string" }, reason: { type: "string" }, json: { type: "boolean" } },
    3,
  );
  const [sub, domain, position] = positionals;
  if (sub === "status") {
    const answer = await apiRequest(resolveTarget(values), "GET", "/estate");
    if (!answer.ok) {
      console.error(`crewlet estate status: ${answer.message}`);
      return 1;
    }
    console.log(JSON.stringify(answer.body, null, values.json ? 0 : 2));
    return 0;
  }
  if (sub === "hold" || sub === "release") {
    const parsed = domainArg.safeParse(domain);
    if (!parsed.success) throw new UsageError(`${parsed.error.issues[0]?.message ?? "invalid domain"}; ${USAGE}`);
    if (sub === "release" && values.reason !== undefined) throw new UsageError(`--reason: only a hold takes one; ${USAGE}`);
    const body = sub === "hold" && values.reason !== undefined ? { reason: values.reason } : {};
    const answer = await apiRequest(resolveTarget(values), "POST", `/estate/${parsed.data}/${sub}`, body);
    if (!answer.ok) {
      console.error(`crewlet estate ${sub}: ${answer.message}`);
      return 1;
    }
    const out = answer.body as { status: string; already?: boolean; hold: { position: number; by: string; at: number; reason: string | null } | null };
    if (values.json) console.log(JSON.stringify(out));
    else if (sub === "hold") console.log(`${out.already ? "already held" : "held"}: the ${parsed.data} log is kept from ${(out.hold?.position ?? 0) + 1} on (by ${out.hold?.by}, ${new Date(out.hold?.at ?? 0).toISOString()}${out.hold?.reason ? `: ${out.hold.reason}` : ""})`);
    else console.log(out.hold ? `released the hold on ${parsed.data} (taken by ${out.hold.by})` : `no hold on ${parsed.data}`);
    return 0;
  }
  if (sub !== "skip") throw new UsageError(sub === undefined ? USAGE : `unknown estate command "${sub}"; ${USAGE}`);
  const parsed = skipArgs.safeParse({ domain, position, reason: values.reason });
  if (!parsed.success) throw new UsageError(`${parsed.error.issues[0]?.message ?? "invalid arguments"}; ${USAGE}`);
  const { domain: d, position: p, reason } = parsed.data;
  const answer = await apiRequest(resolveTarget(values), "POST", `/estate/${d}/skip`, { position: p, reason });
  if (!answer.ok) {
    console.error(`crewlet estate skip: ${answer.message}`);
    return 1;
  }
  const out = answer.body as { status: string; marker_position: number; applied: number };
  if (values.json) console.log(JSON.stringify(out));
  else if (out.status === "skipped") console.log(`skipped ${d} record ${p} (marker at ${out.marker_position}); this copy has applied to ${out.applied}`);
  else console.log(`skip marker appended at ${out.marker_position}; this copy has not passed ${p} yet (applied ${out.applied}) — check \`crewlet estate status\``);
  return 0;
}
