// Opening a JetStream object store bucket, the one way every bucket of ours is opened (the
// estate's snapshots, the company's files). The bucket's stream is created here, not by the
// client's views.os(): nats.js 2.29 sends its own `replicas` option inside the stream
// config, which nats-server 2.15 refuses ("unknown field replicas").
import { DiscardPolicy, StorageType, type NatsConnection, type ObjectStore } from "nats";

/** JetStream API errors: stream not found; stream name in use with another configuration. */
const STREAM_NOT_FOUND = 10059;
const STREAM_NAME_IN_USE = 10058;

export interface ObjectBucketSpec {
  bucket: string;
  description: string;
  /** stream.replicas: the bucket's copies when this node creates it. */
  replicas: number;
  /** Each API call's bound (an upload as a whole takes longer; this bounds one call). */
  timeout_ms: number;
  /** False on a leaf: the members create the fleet's assets; a leaf adopts them only. */
  creates: boolean;
}

function apiCode(err: unknown): number | undefined {
  return (err as { api_error?: { err_code?: number } }).api_error?.err_code;
}

/**
 * The bucket, created when missing (and `creates`). Reads go to the stream's leader (no
 * direct gets): a follower's direct answer can be stale, and an object just stored through
 * another member must read as there.
 */
export async function openObjectBucket(nc: NatsConnection, s: ObjectBucketSpec): Promise<ObjectStore> {
  const jsm = await nc.jetstreamManager({ timeout: s.timeout_ms, checkAPI: false });
  const stream = `OBJ_${s.bucket}`;
  try {
    await jsm.streams.info(stream);
  } catch (err) {
    if (apiCode(err) !== STREAM_NOT_FOUND || !s.creates) throw err;
    try {
      await jsm.streams.add({
        name: stream,
        description: s.description,
        subjects: [`$O.${s.bucket}.C.>`, `$O.${s.bucket}.M.>`],
        storage: StorageType.File,
        num_replicas: s.replicas,
        discard: DiscardPolicy.New,
        allow_rollup_hdrs: true,
        allow_direct: false,
        max_age: 0,
      });
    } catch (e) {
      if (apiCode(e) !== STREAM_NAME_IN_USE) throw e;
    }
  }
  return nc.jetstream({ timeout: s.timeout_ms }).views.os(s.bucket);
}
