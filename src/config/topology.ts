// The fleet shapes Tier A refuses at load (spec: Single node; Scaling Out: What a node is).
// A pure function of the parsed file: each rule names the field to change and why.
import { DEFAULT_NODE_ID, type TierA } from "./tier-a.ts";

export interface ConfigProblem {
  path: string;
  message: string;
}

const LOOPBACK = new Set(["127.0.0.1", "localhost", "::1", "[::1]"]);
export function isLoopback(host: string): boolean {
  return LOOPBACK.has(host) || host.startsWith("127.");
}

export type BrokerKind = "member" | "leaf" | "none";

/** What kind of broker this node runs: its own member, a leaf of the members, or none. */
export function brokerKind(c: TierA): BrokerKind {
  if (c.stream.type === "nats") return "none";
  return c.stream.leaf?.urls ? "leaf" : "member";
}

export function topologyProblems(c: TierA): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const add = (path: string, message: string) => problems.push({ path, message });
  const kind = brokerKind(c);
  const clustered = c.stream.cluster !== undefined;
  const roles = new Set(c.node.roles);

  // Leases held in-process make this node believe it owns the whole company: right
  // alone, catastrophic beside any other node sharing the stream.
  if (c.coordination.type === "local" && (clustered || kind !== "member")) {
    const shape = kind === "none" ? "an external NATS stream" : kind === "leaf" ? "a leaf stream" : "a clustered stream";
    add("coordination.type", `local coordination cannot run beside ${shape}: set coordination.type: embedded-kv`);
  }
  if (c.stream.cluster) {
    const members = c.stream.cluster.peers.length + 1;
    // Raft needs a majority: two members stop writing when either is down, which is
    // worse than one.
    if (members === 2) add("stream.cluster.peers", "a two-member cluster loses quorum when either member is down: run one member or three");
    if (!isLoopback(c.stream.cluster.host) && !c.stream.cluster.secret) {
      add("stream.cluster.secret", `the cluster listener on ${c.stream.cluster.host} is beyond loopback and needs a secret`);
    }
  }
  if (c.stream.replicas > 1) {
    const members = c.stream.cluster ? c.stream.cluster.peers.length + 1 : 1;
    if (kind === "member" && members < c.stream.replicas) {
      add("stream.replicas", `replicas ${c.stream.replicas} needs at least ${c.stream.replicas} cluster members (stream.cluster.peers lists ${members - 1})`);
    }
  }
  if (kind === "leaf") {
    if (clustered) add("stream.cluster", "a leaf node joins the members' cluster through leaf.urls and has no cluster block");
    if (roles.has("data")) add("node.roles", "a leaf node holds no data: remove data (and ingress/workers, which need it)");
    // The members decide the fleet's streams; a leaf holds no replica and changes none.
    if (c.stream.replicas !== 1) add("stream.replicas", "a leaf holds no replica and never changes the fleet's streams: the members' stream.replicas decides; remove it here");
  }
  if (c.stream.leaf?.port !== undefined && c.stream.leaf.urls) {
    add("stream.leaf", "set leaf.port (a member listening for leaves) or leaf.urls (a leaf), not both");
  }
  if (c.stream.leaf?.port !== undefined && !isLoopback(c.stream.leaf.host) && !c.stream.leaf.secret) {
    add("stream.leaf.secret", `the leafnode listener on ${c.stream.leaf.host} is beyond loopback and needs a secret`);
  }
  if (kind === "leaf" && c.stream.leaf?.urls?.some((u) => !/\/\/(127\.|localhost|\[::1\])/.test(u)) && !c.stream.leaf.secret) {
    add("stream.leaf.secret", "a leaf dialling members beyond loopback needs the members' leaf secret");
  }
  if (kind === "none" && !c.stream.url) add("stream.url", "stream.type: nats needs the external server's url");
  for (const r of ["ingress", "workers"] as const) {
    if (roles.has(r) && !roles.has("data")) add("node.roles", `${r} needs data: it reads this node's own copy of the estate`);
  }
  const fleet = clustered || kind !== "member" || c.stream.leaf?.port !== undefined;
  if (fleet && (c.node.id === undefined || c.node.id === DEFAULT_NODE_ID)) {
    add("node.id", "every node in a fleet needs its own stable id (e.g. ${CREWLET_NODE_ID}); node-0 is what every unset node is called");
  }
  return problems;
}
