// The audit log (issue 16): every operator action and every write made with a token, as
// this node's API served it — who (the token's id), what (an action name and the path),
// when, and the outcome (the HTTP status). Written to node.db first (ARCHITECTURE.md: the
// node store holds the audit), then shared on CREWLET_AUDIT (audit-stream.ts), which
// GET /audit reads, so any node answers for the whole fleet's actions. node.db rows are
// trimmed past AUDIT_RETENTION_MS, the stream's own age limit, on every node's maintenance
// tick (startAuditTrim) — not in the maintenance duty, which runs on one node: every node
// has its own audit rows.
import type { Database } from "bun:sqlite";
import { randomBytes } from "node:crypto";
import type { Clock, Timer } from "../clock.ts";
import type { Logger } from "../log.ts";
import { AUDIT_MAX_AGE_MS } from "../queue/streams.ts";

/** How long an audit row is kept in node.db: as long as the fleet's stream keeps it (a
 *  quarter: the usual review cycle and an incident found weeks later). */
export const AUDIT_RETENTION_MS = AUDIT_MAX_AGE_MS;
/** Rows one trim deletes at most, so a trim after a long outage never holds the file long. */
export const AUDIT_TRIM_BATCH = 10_000;
export const AUDIT_PAGE_MAX = 500;

export interface AuditEntry {
  id: number;
  at: number;
  token_id: string | null;
  action: string;
  method: string;
  path: string;
  status: number;
  outcome: "ok" | "refused" | "failed";
  /** Why, when the action carries a reason (an approval's decision); null otherwise. */
  detail: string | null;
}

/** A detail's bytes in the log: a decision's reason, cut like the record keeps it. */
export const AUDIT_DETAIL_MAX_CHARS = 4_096;

/** Operator actions by route, named; any other write is `write` (token use for writes). Pure. */
const ACTIONS: [string, RegExp, string][] = [
  ["POST", /^\/agents\/[^/]+\/pause$/, "agent.pause"],
  ["POST", /^\/agents\/[^/]+\/resume$/, "agent.resume"],
  ["POST", /^\/agents\/[^/]+\/stop$/, "agent.stop"],
  ["POST", /^\/fleet\/drain$/, "fleet.drain"],
  ["POST", /^\/config\/revisions\/[^/]+\/activate$/, "config.activate"],
  ["POST", /^\/config\/revisions$/, "config.propose"],
  ["POST", /^\/deadletters\/[^/]+\/replay$/, "deadletter.replay"],
  ["DELETE", /^\/deadletters\/[^/]+$/, "deadletter.delete"],
  ["POST", /^\/estate\/[^/]+\/skip$/, "estate.skip"],
  ["POST", /^\/estate\/[^/]+\/hold$/, "estate.hold"],
  ["POST", /^\/estate\/[^/]+\/release$/, "estate.release"],
  ["POST", /^\/approvals\/[^/]+\/approve$/, "approval.approve"],
  ["POST", /^\/approvals\/[^/]+\/reject$/, "approval.reject"],
];

export function actionOf(method: string, path: string): string {
  const m = method.toUpperCase();
  for (const [am, re, name] of ACTIONS) if (am === m && re.test(path)) return name;
  return "write";
}

export function outcomeOf(status: number): AuditEntry["outcome"] {
  if (status < 400) return "ok";
  if (status < 500) return "refused";
  return "failed";
}

const WRITE_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"]);
export function audited(method: string): boolean {
  return WRITE_METHODS.has(method.toUpperCase());
}

export class AuditLog {
  constructor(private readonly db: Database) {
    db.exec(`CREATE TABLE IF NOT EXISTS audit (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      at INTEGER NOT NULL,
      token_id TEXT,
      action TEXT NOT NULL,
      method TEXT NOT NULL,
      path TEXT NOT NULL,
      status INTEGER NOT NULL,
      outcome TEXT NOT NULL
    ); CREATE INDEX IF NOT EXISTS audit_at ON audit(at);
    CREATE TABLE IF NOT EXISTS audit_meta (id TEXT NOT NULL);`);
    // published: 0 until the entry is on the fleet's stream (a column added to older files).
    const cols = db.query<{ name: string }, []>("PRAGMA table_info(audit)").all();
    if (!cols.some((c) => c.name === "published")) db.exec("ALTER TABLE audit ADD COLUMN published INTEGER NOT NULL DEFAULT 0");
    if (!cols.some((c) => c.name === "detail")) db.exec("ALTER TABLE audit ADD COLUMN detail TEXT");
    db.exec("CREATE INDEX IF NOT EXISTS audit_unpublished ON audit(published, id)");
    // This file's name in the stream's message ids: a scratch wipe starts ids again at 1.
    const meta = db.query<{ id: string }, []>("SELECT id FROM audit_meta LIMIT 1").get();
    if (meta) this.fileId = meta.id;
    else {
      this.fileId = randomBytes(8).toString("hex");
      db.query("INSERT INTO audit_meta (id) VALUES (?)").run(this.fileId);
    }
  }

  /** This node.db's audit table, by a random id minted with it. */
  readonly fileId: string;

  /** Entries not yet on the fleet's stream, oldest first. */
  unpublished(limit: number): AuditEntry[] {
    return this.db
      .query<AuditEntry, [number]>("SELECT id, at, token_id, action, method, path, status, outcome, detail FROM audit WHERE published = 0 ORDER BY id LIMIT ?")
      .all(limit);
  }

  markPublished(id: number): void {
    this.db.query("UPDATE audit SET published = 1 WHERE id = ?").run(id);
  }

  /** An entry; `action` is named from the route unless given (an action no request made,
   *  such as an agent's request for approval). */
  append(e: Omit<AuditEntry, "id" | "action" | "outcome" | "detail"> & { action?: string; detail?: string | null }): void {
    this.db
      .query("INSERT INTO audit (at, token_id, action, method, path, status, outcome, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
      .run(e.at, e.token_id, e.action ?? actionOf(e.method, e.path), e.method.toUpperCase(), e.path.slice(0, 1024), e.status, outcomeOf(e.status), e.detail?.slice(0, AUDIT_DETAIL_MAX_CHARS) ?? null);
  }

  /** Newest first; `before` is the previous page's `next` (an id). */
  page(opts: { before?: number; limit: number }): { entries: AuditEntry[]; next: number | null } {
    const limit = Math.max(1, Math.min(AUDIT_PAGE_MAX, opts.limit));
    const rows = this.db
      .query<AuditEntry, [number, number]>("SELECT id, at, token_id, action, method, path, status, outcome, detail FROM audit WHERE id < ? ORDER BY id DESC LIMIT ?")
      .all(opts.before ?? Number.MAX_SAFE_INTEGER, limit + 1);
    const more = rows.length > limit;
    const entries = rows.slice(0, limit);
    return { entries, next: more ? entries[entries.length - 1]!.id : null };
  }

  /** The retention horizon: rows older than now − horizon go (at most AUDIT_TRIM_BATCH a call). */
  trim(now: number, horizon_ms = AUDIT_RETENTION_MS): number {
    const r = this.db.query("DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE at < ? ORDER BY id LIMIT ?)").run(now - horizon_ms, AUDIT_TRIM_BATCH);
    return r.changes;
  }
}

/**
 * Every node's own sweep of its node.db audit rows to AUDIT_RETENTION_MS, once per
 * `every_ms` (the node passes MAINTENANCE_TICK_MS). Each tick deletes at most
 * AUDIT_TRIM_BATCH rows; a backlog goes over the next ticks. Never throws.
 */
export function startAuditTrim(o: { audit: AuditLog; clock: Clock; log: Logger; every_ms: number }): Timer {
  return o.clock.setInterval(() => {
    try {
      const n = o.audit.trim(o.clock.now());
      if (n > 0) o.log.info("audit_trimmed", { rows: n, horizon_ms: AUDIT_RETENTION_MS });
    } catch (err) {
      o.log.warn("audit_trim_failed", { error: err as Error });
    }
  }, o.every_ms);
}
