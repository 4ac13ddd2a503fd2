// The broker credential a run's supervisor connects with. A supervisor outlives the node
// that launched it, and the node's own client password is minted each boot, so after a
// restart or a binary swap the supervisor could not reconnect to report. This one is minted
// once per store, kept 0600 in the store (never inside a box: the store is hidden from
// it), survives a scratch store's wipe, and the broker grants it only what a supervisor
// does: publish to seats' control subjects and read the run records.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import type { ClientCredential } from "../broker/plan.ts";

export const SUPERVISOR_CREDENTIAL_FILE = "sandbox-credential.json";
export const SUPERVISOR_USER = "crewlet-sandbox";
/** 24 random bytes, as the node's own client password. */
const PASSWORD_BYTES = 24;

const fileSchema = z.strictObject({ user: z.literal(SUPERVISOR_USER), password: z.string().min(32) });

export function supervisorCredential(storeDir: string): ClientCredential {
  const path = join(storeDir, SUPERVISOR_CREDENTIAL_FILE);
  if (existsSync(path)) {
    const parsed = fileSchema.safeParse(JSON.parse(readFileSync(path, "utf8")));
    if (parsed.success) return parsed.data;
  }
  const password = Buffer.from(crypto.getRandomValues(new Uint8Array(PASSWORD_BYTES))).toString("base64url");
  const cred = { user: SUPERVISOR_USER, password };
  writeFileSync(path, JSON.stringify(cred), { mode: 0o600 });
  return cred;
}
