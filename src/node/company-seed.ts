// The file's `company:` is a seed, not an order: a restart must not roll the company
// back. A node remembers, in node.db, the digest of the file company it last
// booted with; at boot the file is activated only when the fleet has no company yet, or
// when the file changed since this node last saw it (an operator edited it). Otherwise
// the fleet's active revision stands, whatever an old file on a restarted box says.
//
// decideSeed is pure (a table test); SeedMemory is the node.db row it reads and writes;
// seedCompany is the boot's step that acts on the decision.
import { Database } from "bun:sqlite";
import { join } from "node:path";
import type { NatsConnection } from "nats";
import type { Clock } from "../clock.ts";
import type { Company } from "../config/company.ts";
import { companyDigest, REVISION_ACTIVATED_SUBJECT, type CompanyRevisions } from "../config/company-revisions.ts";
import type { Logger } from "../log.ts";
import { NODE_DB_FILE } from "./engine.ts";

export type SeedReason =
  /** The fleet has no active revision: the file is the first company. */
  | "fleet_has_none"
  /** An operator edited the file since this node last booted with it. */
  | "file_changed"
  /** The file is the active company already: nothing to do. */
  | "already_active"
  /** The file is what this node booted with last time, and the fleet has moved on since. */
  | "file_unchanged"
  /** This store never booted with a company file (a new or scratch store): the fleet's
   * company stands; `crewlet config apply` makes a file the fleet's. */
  | "not_seeded_here";

export interface SeedDecision {
  apply: boolean;
  reason: SeedReason;
}

export function decideSeed(input: { file: string; lastSeeded: string | null; active: string | null }): SeedDecision {
  if (input.active === null) return { apply: true, reason: "fleet_has_none" };
  if (input.file === input.active) return { apply: false, reason: "already_active" };
  if (input.lastSeeded === null) return { apply: false, reason: "not_seeded_here" };
  if (input.lastSeeded !== input.file) return { apply: true, reason: "file_changed" };
  return { apply: false, reason: "file_unchanged" };
}

const DDL = `CREATE TABLE IF NOT EXISTS company_seed (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  digest TEXT NOT NULL,
  seen_at INTEGER NOT NULL
)`;

/** The one row of node.db saying which file company this node last booted with. */
export class SeedMemory {
  private readonly db: Database;

  constructor(storeDir: string) {
    this.db = new Database(join(storeDir, NODE_DB_FILE), { create: true, strict: true });
    // The engine opens node.db in WAL too; a second connection waits rather than fails.
    this.db.exec("PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000;");
    this.db.run(DDL);
  }

  last(): string | null {
    const row = this.db.query("SELECT digest FROM company_seed WHERE id = 1").get() as { digest: string } | null;
    return row?.digest ?? null;
  }

  remember(digest: string, now: number): void {
    this.db
      .query("INSERT INTO company_seed (id, digest, seen_at) VALUES (1, $digest, $now) ON CONFLICT (id) DO UPDATE SET digest = $digest, seen_at = $now")
      .run({ $digest: digest, $now: now });
  }

  close(): void {
    this.db.close();
  }
}

/**
 * Activates the file's company when the fleet has none or the operator edited the file
 * since this node last booted with it, never merely because this node restarted with an
 * older file. `wait` asks a store call again while the cluster forms.
 */
export async function seedCompany(o: {
  fileCompany: Company;
  revisions: CompanyRevisions;
  storeDir: string;
  nc: NatsConnection;
  clock: Clock;
  log: Logger;
  wait: <T>(fn: () => Promise<T>) => Promise<T>;
}): Promise<void> {
  const { fileCompany, revisions } = o;
  const memory = new SeedMemory(o.storeDir);
  try {
    const file = companyDigest(fileCompany);
    const current = await o.wait(() => revisions.active());
    const decision = decideSeed({ file, lastSeeded: memory.last(), active: current?.digest ?? null });
    if (decision.apply) {
      const result = await o.wait(() =>
        decision.reason === "fleet_has_none" ? revisions.activateIfNone(fileCompany) : revisions.activate(fileCompany),
      );
      if (result?.changed) o.nc.publish(REVISION_ACTIVATED_SUBJECT);
      if (result) o.log.info("config_file_applied", { digest: file, reason: decision.reason, epoch: result.active.epoch });
      // A peer's first boot won the race to seed the fleet: its company stands.
      else o.log.warn("config_file_not_applied", { file_digest: file, active_digest: (await revisions.active())?.digest ?? null, reason: "fleet_seeded_by_peer" });
    } else if (decision.reason !== "already_active") {
      o.log.warn("config_file_not_applied", {
        file_digest: file,
        active_digest: current?.digest ?? null,
        reason: decision.reason,
        hint: "the fleet's active revision stands; `crewlet config apply` makes a file the fleet's company",
      });
    }
    memory.remember(file, o.clock.now());
  } finally {
    memory.close();
  }
}
