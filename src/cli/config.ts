// crewlet config list|show|apply|activate: the fleet's company revisions on a running node.
//   list                     every stored revision, newest first, the active one marked
//   show <digest>            one revision's company (YAML; --json for JSON)
//   apply <file>             validate a company (a crewlet.yaml's company:, or a company
//                            file), store it and make it the fleet's
//   activate <digest>        make a stored revision active again (a rollback)
// A digest may be shortened to any unique prefix of at least MIN_PREFIX characters.
import { readFileSync } from "node:fs";
import { stringify } from "yaml";
import { ConfigError, readCompanyText } from "../config/load.ts";
import { parseFlags, UsageError } from "./args.ts";
import { apiRequest, resolveTarget, type Target } from "./api-client.ts";

const USAGE = "usage: crewlet config list | show <digest> | apply <file> | activate <digest>  [--url URL] [--token TOKEN] [--json]";
/** A shortened digest names one revision among the few an operator keeps; 8 hex chars is git's habit. */
const MIN_PREFIX = 8;
const EXIT_BAD_INPUT = 2;

interface Summary {
  digest: string;
  name: string;
  seats: number;
  stored_at: number;
  stored_by: string | null;
  active: boolean;
}

export function formatRevisions(list: Summary[]): string {
  if (list.length === 0) return "no company revisions (the fleet has no company yet)";
  const rows = [
    ["", "DIGEST", "SEATS", "STORED", "BY", "NAME"],
    ...list.map((r) => [r.active ? "*" : "", r.digest.slice(0, 12), String(r.seats), new Date(r.stored_at).toISOString(), r.stored_by ?? "-", r.name]),
  ];
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows.map((r) => r.map((cell, c) => (c < r.length - 1 ? cell.padEnd(widths[c]!) : cell)).join("  ")).join("\n");
}

async function resolveDigest(target: Target, given: string): Promise<string> {
  if (/^[0-9a-f]{64}$/.test(given)) return given;
  if (!/^[0-9a-f]+$/.test(given) || given.length < MIN_PREFIX) {
    throw new UsageError(`"${given}" is not a revision digest (64 hex characters, or a unique prefix of at least ${MIN_PREFIX})`);
  }
  const answer = await apiRequest(target, "GET", "/config/revisions");
  if (!answer.ok) throw new UsageError(`cannot list revisions to resolve "${given}": ${answer.message}`);
  const matches = (answer.body as { revisions: Summary[] }).revisions.filter((r) => r.digest.startsWith(given));
  if (matches.length === 1) return matches[0]!.digest;
  throw new UsageError(matches.length === 0 ? `no revision starts with "${given}"` : `"${given}" names ${matches.length} revisions; give more of the digest`);
}

export async function runConfigCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(args, { url: { type: "string" }, token: { type: "string" }, json: { type: "boolean" } }, 2);
  const [sub, arg] = positionals;
  const json = values.json === true;
  const fail = (message: string, code = 1) => {
    if (json) console.log(JSON.stringify({ ok: false, error: message }));
    else console.error(`crewlet config ${sub}: ${message}`);
    return code;
  };
  switch (sub) {
    case "list": {
      if (arg !== undefined) throw new UsageError(USAGE);
      const answer = await apiRequest(resolveTarget(values), "GET", "/config/revisions");
      if (!answer.ok) return fail(answer.message);
      const body = answer.body as { revisions: Summary[] };
      console.log(json ? JSON.stringify(body) : formatRevisions(body.revisions));
      return 0;
    }
    case "show": {
      if (arg === undefined) throw new UsageError(USAGE);
      const target = resolveTarget(values);
      const digest = await resolveDigest(target, arg);
      const answer = await apiRequest(target, "GET", `/config/revisions/${digest}`);
      if (!answer.ok) return fail(answer.message);
      const body = answer.body as { digest: string; active: boolean; company: unknown };
      if (json) console.log(JSON.stringify(body));
      else process.stdout.write(`# revision ${body.digest}${body.active ? " (active)" : ""}\n${stringify({ company: body.company })}`);
      return 0;
    }
    case "apply": {
      if (arg === undefined) throw new UsageError(USAGE);
      let text: string;
      try {
        text = readFileSync(arg, "utf8");
      } catch (err) {
        return fail(`cannot read ${arg}: ${(err as Error).message}`, EXIT_BAD_INPUT);
      }
      let input: unknown;
      try {
        // Checked here first, so a bad file names its line; the node checks again and fills
        // in its own defaults, so what is sent is the document as written (readCompanyText).
        input = readCompanyText(text, arg).input;
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        if (json) console.log(JSON.stringify({ ok: false, file: arg, errors: err.problems }));
        else console.error(err.message);
        return EXIT_BAD_INPUT;
      }
      const answer = await apiRequest(resolveTarget(values), "POST", "/config/revisions", { company: input });
      if (!answer.ok) return fail(answer.message);
      const out = answer.body as { digest: string; epoch: number; changed: boolean; seats: number };
      if (json) console.log(JSON.stringify(out));
      else console.log(out.changed ? `activated ${out.digest} (epoch ${out.epoch}, ${out.seats} agent seats)` : `${out.digest} is already the active company (epoch ${out.epoch})`);
      return 0;
    }
    case "activate": {
      if (arg === undefined) throw new UsageError(USAGE);
      const target = resolveTarget(values);
      const digest = await resolveDigest(target, arg);
      const answer = await apiRequest(target, "POST", `/config/revisions/${digest}/activate`);
      if (!answer.ok) return fail(answer.message);
      const out = answer.body as { digest: string; epoch: number; changed: boolean; seats: number };
      if (json) console.log(JSON.stringify(out));
      else console.log(out.changed ? `activated ${out.digest} (epoch ${out.epoch}, ${out.seats} agent seats)` : `${out.digest} is already the active company (epoch ${out.epoch})`);
      return 0;
    }
    default:
      throw new UsageError(sub === undefined ? USAGE : `unknown config command "${sub}"; ${USAGE}`);
  }
}
