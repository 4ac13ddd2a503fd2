// A scratch store (a leaf node's) is emptied at every boot: a leaf keeps nothing it could
// not fetch again. The wipe runs only under the store lock (so no live process's files go),
// keeps the lock file itself (deleting it would let a second process lock a fresh file
// beside the live one), and refuses a store that is not a leaf's: a data node's estate or
// a broker member's stream is the fleet's data, and a leaf pointed at it by mistake (the
// same working directory, no store.dir) must not be the thing that deletes it.
import { existsSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ESTATE_DB_FILE } from "../estate/estate.ts";
import { brokerPaths } from "../broker/plan.ts";
import { LOCK_FILE } from "./store-lock.ts";
import { STORE_ID_FILE } from "./store-identity.ts";
import { NodeRefusal } from "./refusal.ts";
import { SUPERVISOR_CREDENTIAL_FILE } from "../sandbox/credential.ts";
import { RUNS_DIR } from "../sandbox/launch.ts";

export class ScratchWipeRefused extends NodeRefusal {
  constructor(readonly path: string, what: string) {
    super(
      "scratch_wipe_refused",
      `store.scratch: ${path} holds ${what}, which a scratch store never has; refusing to wipe it (give this node its own store.dir)`,
      { path },
    );
    this.name = "ScratchWipeRefused";
  }
}

/** Entries a wipe keeps: the lock this process holds, the store's identity (so a
 * restarted leaf still proves its predecessor dead and takes its seats back at once), and
 * the coding runs with their supervisors' credential: a run outlives the node process by
 * design, and a wipe under it would delete its work dir and lock its supervisor out. */
const KEPT = new Set([LOCK_FILE, STORE_ID_FILE, RUNS_DIR, SUPERVISOR_CREDENTIAL_FILE]);

/** What in `dir` says it is not a scratch store, or null. Pure of writes. */
export function notScratch(dir: string): ScratchWipeRefused | null {
  const estate = join(dir, ESTATE_DB_FILE);
  if (existsSync(estate)) return new ScratchWipeRefused(estate, "a data node's estate");
  const stream = brokerPaths(dir).streamDir;
  if (existsSync(stream)) return new ScratchWipeRefused(stream, "a broker member's stream store");
  return null;
}

/** Empties a scratch store the caller holds the lock on; throws ScratchWipeRefused. */
export function wipeScratchStore(dir: string): string[] {
  const refused = notScratch(dir);
  if (refused) throw refused;
  const removed: string[] = [];
  for (const name of readdirSync(dir)) {
    if (KEPT.has(name)) continue;
    rmSync(join(dir, name), { recursive: true, force: true });
    removed.push(name);
  }
  return removed;
}
