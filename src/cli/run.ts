// crewlet run [crewlet.yaml]: boot this node and keep it up until a signal. The first
// SIGINT/SIGTERM drains gracefully (the sidecar stops last); a second exits at once.
import { ConfigError, loadConfigFile } from "../config/load.ts";
import { createLogger, fileSink, streamSink, type LogSink } from "../log.ts";
import { CrewletNode, EXIT_FAILURE } from "../node/node.ts";
import { NodeRefusal } from "../node/refusal.ts";
import { parseFlags } from "./args.ts";

/** The store dir holds the estate, the API token and the sidecar's credentials: every file
 * this process (and its sidecar, which inherits the mask) creates is its owner's alone. */
const STORE_UMASK = 0o077;

export const EXIT_BAD_CONFIG = 2;
/** What a process killed by a second signal reports: 128 + SIGINT, as a shell would. */
const EXIT_SECOND_SIGNAL = 130;

export async function runRun(args: string[]): Promise<number> {
  const { positionals } = parseFlags(args, {}, 1);
  const file = positionals[0] ?? "crewlet.yaml";
  let loaded;
  try {
    loaded = loadConfigFile(file);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      return EXIT_BAD_CONFIG;
    }
    throw err;
  }
  process.umask(STORE_UMASK);
  const lc = loaded.config.logging;
  const sinks: LogSink[] = [];
  if (lc.stderr) sinks.push(streamSink(2, lc.format));
  if (lc.file) sinks.push(fileSink(lc.file, lc.format));
  const log = createLogger({ level: lc.level, sinks, fields: { node: loaded.nodeId } });

  let node: CrewletNode | null = null;
  let signals = 0;
  const onSignal = (sig: string) => {
    signals++;
    if (signals > 1 || !node) {
      process.stderr.write(`crewlet: second ${sig}, exiting now\n`);
      process.exit(EXIT_SECOND_SIGNAL);
    }
    log.info("node_signal", { signal: sig, action: "drain" });
    void node.stop(0, sig);
  };
  process.on("SIGINT", () => onSignal("SIGINT"));
  process.on("SIGTERM", () => onSignal("SIGTERM"));

  try {
    node = await CrewletNode.start({
      loaded,
      log,
      announce: (lines) => process.stdout.write(lines.join("\n") + "\n"),
    });
  } catch (err) {
    console.error(`crewlet: ${loaded.nodeId} failed to start: ${(err as Error).message}`);
    // A refusal is the operator's setup (a store or node id that is another process's):
    // restarting would only meet it again.
    // The failed boot stopped what it started; a handle one component failed to close
    // must not keep the process alive (seen: a node whose boot failed kept its appliers
    // retrying for minutes, never exiting, so its supervisor never restarted it).
    process.exit(err instanceof NodeRefusal ? EXIT_BAD_CONFIG : EXIT_FAILURE);
  }
  const code = await node.stopped;
  // Everything the node started has been stopped and every log line written (the sinks
  // write synchronously). A handle some component failed to close must not keep a stopped
  // node's process alive: a supervisor waits on the exit, and a drained node that never
  // exits looks wedged.
  process.exit(code);
}
