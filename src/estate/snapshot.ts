// Snapshots of a copy, for a copy the log can no longer bring current (its applied position
// is below the log's first record: a node off for longer than the trim held for, or a new
// data node joining a fleet whose log was trimmed). It restores the domain from a snapshot
// of a healthy copy, then replays the log's tail from the snapshot's position.
//
// Where: one object, `estate.db`, in a JetStream object store bucket (crewlet_snapshots) on
// the fleet's own broker, rather than a request/reply transfer from a peer. The bucket is
// replicated like the logs (stream.replicas), so a snapshot outlives the node that took it
// (a fleet whose only other data node is down can still repair); the client chunks the file
// and checks its SHA-256 digest end to end, so no transfer protocol of our own; and the trim
// uploads one BEFORE it purges, so a snapshot that joins the log always exists before any
// record a copy could need is gone. The cost is the estate's size held once more per member.
//
// What: the whole estate.db as `VACUUM INTO` writes it — one read transaction, so every
// domain's rows and its checkpoint (the applied position and the log's generation) agree
// exactly; a restore takes one domain's tables, its ledger rows and its checkpoint from it.
import { Database } from "bun:sqlite";
import { randomBytes } from "node:crypto";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { NatsConnection, ObjectStore } from "nats";
import { z } from "zod";
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import { openObjectBucket } from "../objects/bucket.ts";
import type { Domain } from "./schema.ts";

export const SNAPSHOT_BUCKET = "crewlet_snapshots";
export const SNAPSHOT_OBJECT = "estate.db";

/** Each domain's own tables (besides the shared ledger and checkpoints, filtered by domain). */
export const DOMAIN_TABLES: Record<Domain, readonly string[]> = {
  tracker: ["tracker_projects", "tracker_items", "tracker_comments", "tracker_activity", "turn_receipts"],
  pages: ["kb_containers", "kb_pages", "kb_revisions"],
  chat: ["chat_channels", "chat_messages", "chat_message_edits"],
};

export const snapshotMetaSchema = z.object({
  /** Per domain: the applied position the snapshot's rows are at, and the log generation they follow. */
  positions: z.record(z.string(), z.number().int().nonnegative()),
  generations: z.record(z.string(), z.string()),
  /** The newest estate migration in the file: a restore needs the same schema. */
  migration: z.number().int(),
  taken_by: z.string(),
  taken_at: z.number(),
});
export type SnapshotMeta = z.infer<typeof snapshotMetaSchema>;

/** What a snapshot file says about itself (read from the file, never from its label). */
export function readSnapshotFacts(path: string): { positions: Record<string, number>; generations: Record<string, string>; migration: number } {
  const db = new Database(path, { readonly: true });
  try {
    const rows = db.query<{ domain: string; stream_created: string; applied_seq: number }, []>("SELECT domain, stream_created, applied_seq FROM estate_checkpoints").all();
    const migration = db.query<{ m: number | null }, []>("SELECT MAX(id) AS m FROM estate_migrations").get()?.m ?? 0;
    return {
      positions: Object.fromEntries(rows.map((r) => [r.domain, r.applied_seq])),
      generations: Object.fromEntries(rows.map((r) => [r.domain, r.stream_created])),
      migration,
    };
  } finally {
    db.close();
  }
}

function quoted(path: string): string {
  return `'${path.replaceAll("'", "''")}'`;
}

/**
 * Replaces one domain of `sqlite` with the snapshot file's: its tables, its ledger rows and
 * its checkpoint, in ONE immediate transaction (the write lock is taken before the first
 * delete, and a failure anywhere leaves the copy as it was). The caller has stopped the
 * domain's applier. The search indexes (kb_fts, work_fts, chat_fts) follow their tables through
 * their triggers, row by row (test/estate/search.test.ts).
 */
export function restoreDomain(sqlite: Database, path: string, domain: Domain): void {
  sqlite.run(`ATTACH DATABASE ${quoted(path)} AS snap`);
  try {
    sqlite
      .transaction(() => {
        for (const t of DOMAIN_TABLES[domain]) {
          sqlite.run(`DELETE FROM main.${t}`);
          sqlite.run(`INSERT INTO main.${t} SELECT * FROM snap.${t}`);
        }
        // Files are one table for every domain: a domain's own rows, like its ledger rows.
        sqlite.query("DELETE FROM main.file_attachments WHERE domain = ?").run(domain);
        sqlite.query("INSERT INTO main.file_attachments SELECT * FROM snap.file_attachments WHERE domain = ?").run(domain);
        sqlite.query("DELETE FROM main.estate_ops WHERE domain = ?").run(domain);
        sqlite.query("INSERT INTO main.estate_ops SELECT * FROM snap.estate_ops WHERE domain = ?").run(domain);
        sqlite.query("DELETE FROM main.estate_checkpoints WHERE domain = ?").run(domain);
        sqlite.query("INSERT INTO main.estate_checkpoints SELECT * FROM snap.estate_checkpoints WHERE domain = ?").run(domain);
      })
      .immediate();
  } finally {
    sqlite.run("DETACH DATABASE snap");
  }
}

export interface SnapshotStoreOptions {
  nc: NatsConnection;
  /** stream.replicas: the bucket's replicas when this node creates it. */
  replicas: number;
  nodeId: string;
  /** Where temporary snapshot files are written (the node's store dir). */
  dir: string;
  clock: Clock;
  log: Logger;
}

/** Waits this long for an object store call (an upload or download of a large estate takes longer as a whole; this bounds each API call). */
const OS_TIMEOUT_MS = 30_000;

export class SnapshotStore {
  private osP: Promise<ObjectStore> | null = null;

  constructor(private readonly o: SnapshotStoreOptions) {}

  private os(): Promise<ObjectStore> {
    this.osP ??= this.open().catch((err) => {
      this.osP = null;
      throw err;
    });
    return this.osP;
  }

  private open(): Promise<ObjectStore> {
    return openObjectBucket(this.o.nc, {
      bucket: SNAPSHOT_BUCKET,
      description: "crewlet estate snapshots (the trim uploads one before it purges)",
      replicas: this.o.replicas,
      timeout_ms: OS_TIMEOUT_MS,
      creates: true,
    });
  }

  /** Runs `fn` on the bucket; a failure forgets the handle, so the next call opens (and if need be creates) the bucket again — one deleted under a running node is recreated rather than failing every later call. */
  private async withOs<T>(fn: (os: ObjectStore) => Promise<T>): Promise<T> {
    try {
      return await fn(await this.os());
    } catch (err) {
      this.osP = null;
      throw err;
    }
  }

  /** The stored snapshot's label, or null when there is none. */
  async info(): Promise<SnapshotMeta | null> {
    const info = await this.withOs((os) => os.info(SNAPSHOT_OBJECT));
    if (!info || info.deleted) return null;
    try {
      const parsed = snapshotMetaSchema.safeParse(JSON.parse(info.description ?? ""));
      return parsed.success ? parsed.data : null;
    } catch {
      return null;
    }
  }

  /** Writes a consistent snapshot of `sqlite` and uploads it as the stored snapshot. */
  async take(sqlite: Database): Promise<SnapshotMeta> {
    const tmp = join(this.o.dir, `estate-snapshot-${process.pid}-${randomBytes(6).toString("hex")}.db`);
    try {
      sqlite.run(`VACUUM INTO ${quoted(tmp)}`);
      const facts = readSnapshotFacts(tmp);
      const meta: SnapshotMeta = { ...facts, taken_by: this.o.nodeId, taken_at: this.o.clock.now() };
      const info = await this.withOs((os) => os.put({ name: SNAPSHOT_OBJECT, description: JSON.stringify(meta) }, Bun.file(tmp).stream() as ReadableStream<Uint8Array>));
      this.o.log.info("estate_snapshot_uploaded", { bytes: info.size, positions: meta.positions, digest: info.digest });
      return meta;
    } finally {
      rmSync(tmp, { force: true });
    }
  }

  /**
   * Downloads the stored snapshot into a temporary file (digest checked by the client) and
   * reads its facts from the file itself. Null when there is none. The caller removes `path`.
   */
  async fetch(): Promise<{ path: string; meta: SnapshotMeta } | null> {
    const got = await this.withOs((os) => os.get(SNAPSHOT_OBJECT));
    if (!got) return null;
    const path = join(this.o.dir, `estate-restore-${process.pid}-${randomBytes(6).toString("hex")}.db`);
    try {
      await Bun.write(path, new Response(got.data));
      const err = await got.error;
      if (err) throw err;
      const label = snapshotMetaSchema.safeParse(JSON.parse(got.info.description ?? "null"));
      const facts = readSnapshotFacts(path);
      const meta: SnapshotMeta = { ...facts, taken_by: label.success ? label.data.taken_by : "unknown", taken_at: label.success ? label.data.taken_at : 0 };
      return { path, meta };
    } catch (err) {
      if (existsSync(path)) rmSync(path, { force: true });
      throw err;
    }
  }
}

