// crewlet validate [file] [--json]: exit 0 when valid, 1 with every problem when not. It
// runs the very checks `crewlet run` runs before it boots (parseConfig: the schema and
// config/checks.ts), so a file it accepts is one run accepts. With --json the answer is
// always one JSON object on stdout, whatever went wrong.
import { ConfigError, loadConfigFile } from "../config/load.ts";
import { parseFlags, UsageError } from "./args.ts";

const EXIT_INVALID = 1;
const EXIT_USAGE = 2;

export function runValidate(args: string[]): number {
  const json = args.includes("--json");
  let file = "crewlet.yaml";
  try {
    const { positionals } = parseFlags(args, { json: { type: "boolean" } }, 1);
    file = positionals[0] ?? file;
    const { config, nodeId } = loadConfigFile(file);
    if (json) console.log(JSON.stringify({ valid: true, file, node: nodeId, roles: config.node.roles, errors: [] }));
    else console.log(`${file}: valid (node ${nodeId}, roles ${config.node.roles.join(", ")})`);
    return 0;
  } catch (err) {
    if (err instanceof ConfigError) {
      if (json) console.log(JSON.stringify({ valid: false, file, errors: err.problems }));
      else console.error(err.message);
      return EXIT_INVALID;
    }
    if (!json) throw err;
    // Usage or an unforeseen failure: still one JSON answer, never a stack trace on stdout.
    console.log(JSON.stringify({ valid: false, file, errors: [{ path: "", message: (err as Error).message }] }));
    return err instanceof UsageError ? EXIT_USAGE : EXIT_INVALID;
  }
}
