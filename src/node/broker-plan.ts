// Tier A → BrokerPlan: the one place config decides what sidecar this node runs.
import { resolve } from "node:path";
import { mintClientCredential, type BrokerPlan } from "../broker/plan.ts";
import type { TierA } from "../config/tier-a.ts";
import { brokerKind } from "../config/topology.ts";

/**
 * The embedded member's JetStream limits are explicit, not the server's guess from the
 * machine: a Raspberry Pi and a 64 GiB VM would otherwise reserve wildly different shares.
 * 256 MiB of memory storage covers every stream we keep in memory (none today) with room;
 * 8 GiB of file storage is a company's years of chat on a small SD card.
 */
const JETSTREAM_MAX_MEM_BYTES = 256 * 1024 * 1024;
const JETSTREAM_MAX_FILE_BYTES = 8 * 1024 * 1024 * 1024;

export function brokerPlanFor(c: TierA, nodeId: string): BrokerPlan {
  const storeDir = resolve(c.store.dir);
  const kind = brokerKind(c);
  if (kind === "none") {
    return { kind: "none", servers: [c.stream.url!], credentialsFile: c.stream.credentials, replicas: c.stream.replicas };
  }
  const common = {
    nodeId,
    storeDir,
    client: { host: "127.0.0.1", port: c.stream.client_port },
    credential: mintClientCredential(),
    monitorPort: c.stream.monitor_port,
  };
  if (kind === "leaf") {
    return {
      kind: "leaf",
      ...common,
      leafRemotes: { urls: c.stream.leaf!.urls!, secret: c.stream.leaf!.secret ?? "" },
      jetstreamDomain: c.stream.domain,
    };
  }
  const cl = c.stream.cluster;
  const leaf = c.stream.leaf;
  return {
    kind: "member",
    ...common,
    jetstream: { max_mem_bytes: JETSTREAM_MAX_MEM_BYTES, max_file_bytes: JETSTREAM_MAX_FILE_BYTES, domain: c.stream.domain },
    cluster: cl ? { name: cl.name, host: cl.host, port: cl.port, routes: cl.peers, secret: cl.secret ?? "", ...(cl.advertise ? { advertise: cl.advertise } : {}) } : undefined,
    leafListener: leaf?.port !== undefined ? { host: leaf.host, port: leaf.port, secret: leaf.secret ?? "", ...(leaf.advertise ? { advertise: leaf.advertise } : {}) } : undefined,
    replicas: c.stream.replicas,
  };
}
