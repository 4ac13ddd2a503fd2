// A store dir's identity: a random id minted the first time a process locks the store,
// kept in it for good (a scratch wipe keeps it too). Lease owners carry it (see
// seat/incarnation.ts), which is how a process holding the store lock tells a dead
// predecessor on this store from a live process with the same node id on another one.
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";

export const STORE_ID_FILE = "store-id";
/** 8 bytes: unique among the stores one node id is ever run on, short in an owner string. */
const STORE_ID_BYTES = 8;
const STORE_ID_RE = /^[0-9a-f]{16}$/;

/** Reads the store's id, minting it when there is none. Call only under the store lock. */
export function storeIdentity(dir: string): { id: string; minted: boolean } {
  const path = join(dir, STORE_ID_FILE);
  if (existsSync(path)) {
    const id = readFileSync(path, "utf8").trim();
    if (STORE_ID_RE.test(id)) return { id, minted: false };
  }
  const id = randomBytes(STORE_ID_BYTES).toString("hex");
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, id + "\n", { mode: 0o600 });
  renameSync(tmp, path);
  return { id, minted: true };
}
