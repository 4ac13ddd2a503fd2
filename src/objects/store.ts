// The company's files: one object per upload in one JetStream object store bucket the
// whole fleet shares (Scaling Out: "Files are the exception"). Its copies follow
// stream.replicas on the broker's members, so an object outlives the node that stored it.
// This module is the bucket's I/O only; what to delete is collect.ts's decision.
import { createHash } from "node:crypto";
import type { NatsConnection, ObjectInfo, ObjectStore } from "nats";
import { openObjectBucket } from "./bucket.ts";

/**
 * Each object store API call's bound. An upload is many calls (a chunk is 128 KiB), so a
 * 32 MiB file is ~256 publishes each within this; one stuck for 30 s is a broker that is
 * not answering (a member's election is ~4 s).
 */
export const OBJECT_CALL_TIMEOUT_MS = 30_000;

/**
 * The largest file one upload stores. An upload is held in memory whole while it is hashed
 * and chunked into the store (and the HTTP server buffers up to this), so the bound is
 * memory: a photo, a recording, a log or a run's diff fit many times over, and a few at
 * once stay far under a Raspberry Pi's RAM. Larger files belong in a file share.
 */
export const MAX_FILE_BYTES = 32 * 1024 * 1024;

/**
 * Unfinished uploads one listing looks at (one read each): a bounded pass, and more than
 * this many dead uploads at once is a fleet that lost many nodes mid-upload — the next
 * pass takes the rest.
 */
export const UNFINISHED_PER_PASS_MAX = 100;

/** What the bucket says of one stored object. */
export interface StoredObject {
  key: string;
  size: number;
  /** When its upload finished, on the storing node's wall clock (the client stamps it). */
  stored_at_ms: number;
}

/** Chunks no live object names: an upload whose node died before it wrote the object's record. */
export interface UnfinishedUpload {
  nuid: string;
  /** The server's time of the newest chunk: an upload under way keeps adding them. */
  last_chunk_ms: number;
  chunks: number;
}

export interface FileStoreOptions {
  nc: NatsConnection;
  bucket: string;
  replicas: number;
  /** False on a leaf: the members create the bucket. */
  creates: boolean;
}

export class FileStore {
  private osP: Promise<ObjectStore> | null = null;

  constructor(private readonly o: FileStoreOptions) {}

  get bucket(): string {
    return this.o.bucket;
  }

  /** Opens (and on a member creates) the bucket; every call after reuses it. */
  open(): Promise<ObjectStore> {
    this.osP ??= openObjectBucket(this.o.nc, {
      bucket: this.o.bucket,
      description: "crewlet files: attachments and run artifacts (rows in the estate name them)",
      replicas: this.o.replicas,
      timeout_ms: OBJECT_CALL_TIMEOUT_MS,
      creates: this.o.creates,
    }).catch((err) => {
      this.osP = null;
      throw err;
    });
    return this.osP;
  }

  /** Stores `data` under `key` (a retry with the same key stores the same bytes again). */
  async put(key: string, data: Uint8Array, meta: { name: string; content_type: string }): Promise<{ size: number; sha256: string }> {
    const os = await this.open();
    await os.putBlob({ name: key, description: JSON.stringify(meta) }, data, { timeout: OBJECT_CALL_TIMEOUT_MS });
    return { size: data.byteLength, sha256: createHash("sha256").update(data).digest("hex") };
  }

  /** The object's bytes as a stream (the client checks its digest at the end), or null. */
  async get(key: string): Promise<{ data: ReadableStream<Uint8Array>; size: number } | null> {
    const os = await this.open();
    const got = await os.get(key);
    if (!got || got.info.deleted) return null;
    // A digest mismatch fails the stream; the error promise is the same failure, awaited
    // here so it is never an unhandled rejection.
    got.error.catch(() => undefined);
    return { data: got.data, size: got.info.size };
  }

  /** Deletes the object; one already gone is not an error (two collectors are safe). */
  async delete(key: string): Promise<boolean> {
    const os = await this.open();
    const r = await os.delete(key);
    return r.success;
  }

  /** Every live object. */
  async list(): Promise<StoredObject[]> {
    const os = await this.open();
    return (await os.list()).filter((i) => !i.deleted).map(toStored);
  }

  /** Chunk sets that no live object names (deleted objects' chunks are purged with them). */
  async unfinished(live: readonly ObjectInfo[] | null = null): Promise<UnfinishedUpload[]> {
    const os = await this.open();
    const infos = live ?? (await os.list());
    const named = new Set(infos.filter((i) => !i.deleted).map((i) => i.nuid));
    const jsm = await this.o.nc.jetstreamManager({ timeout: OBJECT_CALL_TIMEOUT_MS, checkAPI: false });
    const stream = `OBJ_${this.o.bucket}`;
    const prefix = `$O.${this.o.bucket}.C.`;
    const si = await jsm.streams.info(stream, { subjects_filter: `${prefix}>` });
    const out: UnfinishedUpload[] = [];
    for (const [subject, chunks] of Object.entries(si.state.subjects ?? {})) {
      const nuid = subject.slice(prefix.length);
      if (named.has(nuid)) continue;
      if (out.length >= UNFINISHED_PER_PASS_MAX) break;
      const last = await jsm.streams.getMessage(stream, { last_by_subj: subject });
      out.push({ nuid, last_chunk_ms: last.time.getTime(), chunks });
    }
    return out;
  }

  /** Drops an unfinished upload's chunks. */
  async abandon(nuid: string): Promise<number> {
    const jsm = await this.o.nc.jetstreamManager({ timeout: OBJECT_CALL_TIMEOUT_MS, checkAPI: false });
    const r = await jsm.streams.purge(`OBJ_${this.o.bucket}`, { filter: `$O.${this.o.bucket}.C.${nuid}` });
    return r.purged;
  }
}

function toStored(i: ObjectInfo): StoredObject {
  const t = Date.parse(i.mtime);
  // An unreadable time is no age at all: such an object never looks old enough to delete.
  return { key: i.name, size: i.size, stored_at_ms: Number.isFinite(t) ? t : Number.MAX_SAFE_INTEGER };
}
