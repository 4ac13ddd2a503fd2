// crewlet validate [file] [--json]: exit 0 when valid, 1 with every problem when not.
import { ConfigError, loadConfigFile } from "../config/load.ts";
import { parseFlags } from "./args.ts";

export function runValidate(args: string[]): number {
  const { values, positionals } = parseFlags(args, { json: { type: "boolean" } }, 1);
  const file = positionals[0] ?? "crewlet.yaml";
  try {
    const { config, nodeId } = loadConfigFile(file);
    if (values.json) console.log(JSON.stringify({ valid: true, file, node: nodeId, roles: config.node.roles, errors: [] }));
    else console.log(`${file}: valid (node ${nodeId}, roles ${config.node.roles.join(", ")})`);
    return 0;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    if (values.json) console.log(JSON.stringify({ valid: false, file, errors: err.problems }));
    else console.error(err.message);
    return 1;
  }
}
