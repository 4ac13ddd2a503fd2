// The boot's `objects` step: which store the company's files are in. The first node records
// its configured store in the `objects` slot; every later node must be configured with the
// same one, or it refuses to boot naming both (exit 2, `objects_store_mismatch`). A member
// creates the bucket (replicated like the logs); a leaf only reaches it.
import type { NatsConnection } from "nats";
import type { Clock } from "../clock.ts";
import type { TierA } from "../config/tier-a.ts";
import type { KvSlot } from "../coord/contract.ts";
import type { Logger } from "../log.ts";
import { recordStore, storeIdentity } from "../objects/identity.ts";
import { FileStore } from "../objects/store.ts";
import { NodeRefusal } from "./refusal.ts";

export interface OpenFilesOptions {
  config: TierA;
  nc: NatsConnection;
  slot: KvSlot;
  nodeId: string;
  decidesStreams: boolean;
  clock: Clock;
  log: Logger;
  /** Runs a call that needs the cluster's quorum (the node's whileClusterForms). */
  wait: <T>(fn: () => Promise<T>) => Promise<T>;
}

export async function openFiles(o: OpenFilesOptions): Promise<FileStore> {
  const configured = storeIdentity(o.config.objects);
  const { record, judgement } = await o.wait(() => recordStore(o.slot, configured, o.nodeId, o.clock.now()));
  if (!judgement.ok) throw new NodeRefusal("objects_store_mismatch", judgement.message, { recorded: record.store, configured });
  const files = new FileStore({ nc: o.nc, bucket: o.config.objects.bucket, replicas: o.config.stream.replicas, creates: o.decidesStreams });
  // A member creates the bucket now (a quorum step, like the logs); a leaf opens it on first use.
  if (o.decidesStreams) await o.wait(() => files.open());
  o.log.info("objects_store_ready", { store: configured, recorded_by: record.recorded_by });
  return files;
}
