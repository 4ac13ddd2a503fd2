// Every check a Tier A file must pass, in one list that `crewlet validate` and `crewlet
// run` both run (through parseConfig): a file validate accepts is one run accepts, and run
// refuses what validate would (exit 2) rather than failing at the first bind or write.
// The zod schemas hold what one field can say about itself (a scripted rule's pattern
// compiles, a port is a port); these are the rules across fields, and the one that looks
// at the machine (a log file that can be written).
import { accessSync, constants, existsSync, statSync } from "node:fs";
import { isIP } from "node:net";
import { dirname, resolve } from "node:path";
import { ELECTION_WORST_MS } from "../coord/contract.ts";
import { replicatedLeaseTtlFloorMs } from "../coord/ttl.ts";
import { revisionSizeProblem } from "./revision-body.ts";
import { bwrapProblem } from "./sandbox.ts";
import { DEFAULT_NODE_ID, type TierA } from "./tier-a.ts";
import { brokerKind, topologyProblems, type ConfigProblem } from "./topology.ts";

export interface ConfigCheck {
  name: string;
  run(c: TierA): ConfigProblem[];
}

/** A host name as DNS writes it: labels of letters, digits and inner hyphens. */
const HOSTNAME_RE = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** api.host is what Bun.serve binds: an IPv4 or IPv6 address (no brackets), or a host name. */
export function apiHostProblems(c: TierA): ConfigProblem[] {
  const host = c.api.host;
  if (isIP(host) !== 0 || HOSTNAME_RE.test(host)) return [];
  const hint = /^\[.*\]$/.test(host) && isIP(host.slice(1, -1)) !== 0 ? ` (write the IPv6 address without brackets: ${host.slice(1, -1)})` : "";
  return [{ path: "api.host", message: `"${host}" is not an IP address or host name${hint}` }];
}

interface Listener {
  path: string;
  host: string;
  port: number;
}

const WILDCARD = new Set(["", "0.0.0.0", "::", "[::]", "*"]);
const LOOPBACK_NAMES: Record<string, string> = { localhost: "127.0.0.1", "[::1]": "::1" };

/** Two listeners meet when they bind the same address, or either binds every address. */
function overlap(a: string, b: string): boolean {
  if (WILDCARD.has(a) || WILDCARD.has(b)) return true;
  return (LOOPBACK_NAMES[a] ?? a) === (LOOPBACK_NAMES[b] ?? b);
}

/** The TCP listeners this node opens: the API, and the sidecar's (client, monitor, cluster, leaf). */
export function listenersOf(c: TierA): Listener[] {
  const out: Listener[] = [];
  // Port 0 asks the kernel for a free port: it cannot collide.
  if (c.api.port !== 0) out.push({ path: "api.port", host: c.api.host, port: c.api.port });
  if (brokerKind(c) === "none") return out;
  // The sidecar's client and monitor listeners are loopback only (see broker-plan.ts).
  out.push({ path: "stream.client_port", host: "127.0.0.1", port: c.stream.client_port });
  out.push({ path: "stream.monitor_port", host: "127.0.0.1", port: c.stream.monitor_port });
  if (brokerKind(c) === "member") {
    if (c.stream.cluster) out.push({ path: "stream.cluster.port", host: c.stream.cluster.host, port: c.stream.cluster.port });
    if (c.stream.leaf?.port !== undefined) out.push({ path: "stream.leaf.port", host: c.stream.leaf.host, port: c.stream.leaf.port });
  }
  return out;
}

export function portCollisions(c: TierA): ConfigProblem[] {
  const listeners = listenersOf(c);
  const problems: ConfigProblem[] = [];
  listeners.forEach((l, i) => {
    const earlier = listeners.slice(0, i).find((e) => e.port === l.port && overlap(e.host, l.host));
    if (earlier) problems.push({ path: l.path, message: `port ${l.port} is also ${earlier.path}: each listener needs its own port` });
  });
  return problems;
}

/** logging.file must be writable by this process: the file, or the nearest directory that exists. */
export function loggingFileProblems(c: TierA): ConfigProblem[] {
  const file = c.logging.file;
  if (file === undefined) return [];
  const path = resolve(file);
  try {
    if (existsSync(path)) {
      if (statSync(path).isDirectory()) return [{ path: "logging.file", message: `${path} is a directory` }];
      accessSync(path, constants.W_OK);
      return [];
    }
    // fileSink creates missing directories: the nearest one that exists must take writes.
    let dir = dirname(path);
    while (!existsSync(dir) && dirname(dir) !== dir) dir = dirname(dir);
    if (!statSync(dir).isDirectory()) return [{ path: "logging.file", message: `${dir} is not a directory` }];
    accessSync(dir, constants.W_OK | constants.X_OK);
    return [];
  } catch (err) {
    return [{ path: "logging.file", message: `${path} cannot be written: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` }];
  }
}

/** A company no stored revision can hold: run would fail storing it at boot. */
export function companySizeProblems(c: TierA): ConfigProblem[] {
  if (!c.company) return [];
  const problem = revisionSizeProblem(c.company, c.node.id ?? DEFAULT_NODE_ID);
  return problem ? [problem] : [];
}

/** A sandbox that asks for bubblewrap on a machine where it cannot run would fail every run. */
export function sandboxIsolationProblems(c: TierA): ConfigProblem[] {
  const sandbox = c.company?.providers.sandbox;
  if (!sandbox || sandbox.isolation !== "bwrap") return [];
  const problem = bwrapProblem();
  return problem ? [{ path: "company.providers.sandbox.isolation", message: problem }] : [];
}

/** A replicated lease bucket elects a leader when its leader dies; a TTL shorter than the
 * election's worst case lets one member's death fence every seat in the fleet at once. */
export function leaseTtlProblems(c: TierA): ConfigProblem[] {
  if (c.coordination.type !== "embedded-kv" || c.stream.replicas < 2) return [];
  const floor_s = c.testing?.lease_ttl_floor_seconds ?? replicatedLeaseTtlFloorMs() / 1000;
  const ttl_s = c.coordination.lease_ttl_seconds;
  if (ttl_s >= floor_s) return [];
  return [
    {
      path: "coordination.lease_ttl_seconds",
      message:
        `${ttl_s} s is below ${floor_s} s, the smallest TTL a lease keeps through the lease bucket's leader election ` +
        `(replicas ${c.stream.replicas}: nats-server elects within ${ELECTION_WORST_MS / 1000} s of a leader's death, measured 4–6.5 s after a kill, 7 s after a healed partition); ` +
        `under it one member's death can fence every seat in the fleet`,
    },
  ];
}

export const CONFIG_CHECKS: readonly ConfigCheck[] = [
  { name: "topology", run: topologyProblems },
  { name: "ports", run: portCollisions },
  { name: "api_host", run: apiHostProblems },
  { name: "logging_file", run: loggingFileProblems },
  { name: "company_size", run: companySizeProblems },
  { name: "sandbox_isolation", run: sandboxIsolationProblems },
  { name: "lease_ttl", run: leaseTtlProblems },
];

export function configProblems(c: TierA): ConfigProblem[] {
  return CONFIG_CHECKS.flatMap((check) => check.run(c));
}
