// Token auth for every route but /health, /ready and signed webhooks. A token carries
// grants; no token → 401, a token without the route's grant → 403.
import { createHash, timingSafeEqual } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { MiddlewareHandler } from "hono";
import { GRANTS, type Grant } from "../config/tier-a.ts";
import { ApiError } from "./errors.ts";

export interface ApiToken {
  id: string;
  token: string;
  grants: readonly Grant[];
}

export interface Principal {
  tokenId: string;
  grants: ReadonlySet<Grant>;
}

/** `op_id`: the estate operation id an Idempotency-Key names (see idempotency.ts), when one was sent. */
/** audit_detail: why, for the audit log (a route that takes a reason sets it). */
export type AuthEnv = { Variables: { principal: Principal; op_id: string | undefined; audit_detail?: string } };

/** 32 random bytes: far past guessing, and comfortably over the 24-char floor. */
const MINTED_TOKEN_BYTES = 32;
const MINTED_TOKEN_FILE = "api-token";

/** The token a node minted and kept in `storeDir`, if there is one this user can read. */
export function readMintedToken(storeDir: string): string | null {
  const path = join(storeDir, MINTED_TOKEN_FILE);
  if (!existsSync(path)) return null;
  try {
    const token = readFileSync(path, "utf8").trim();
    return token.length >= 24 ? token : null;
  } catch {
    return null; // another user's store (0600): not ours to read
  }
}

/**
 * The token a node with none configured mints at first boot and keeps in its store dir,
 * so restarts keep working with what the boot summary printed once.
 */
export function loadOrMintToken(storeDir: string): { token: ApiToken; minted: boolean } {
  const kept = readMintedToken(storeDir);
  if (kept) return { token: { id: "minted", token: kept, grants: GRANTS }, minted: false };
  const path = join(storeDir, MINTED_TOKEN_FILE);
  mkdirSync(storeDir, { recursive: true });
  const token = "cwl_" + Buffer.from(crypto.getRandomValues(new Uint8Array(MINTED_TOKEN_BYTES))).toString("base64url");
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, token + "\n", { mode: 0o600 });
  renameSync(tmp, path);
  return { token: { id: "minted", token, grants: GRANTS }, minted: true };
}

/** Constant time in the secret's content and its length: both sides are hashed to 32 bytes
 *  first (a plain length check would tell a guesser how long the token is). */
function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(createHash("sha256").update(a).digest(), createHash("sha256").update(b).digest());
}

export class TokenAuth {
  constructor(private readonly tokens: readonly ApiToken[]) {}

  identify(header: string | undefined): Principal | null {
    const m = /^Bearer\s+(\S+)$/i.exec(header ?? "");
    if (!m) return null;
    const presented = m[1]!;
    for (const t of this.tokens) {
      if (sameSecret(presented, t.token)) return { tokenId: t.id, grants: new Set(t.grants) };
    }
    return null;
  }

  /** Middleware: the caller must present a token holding `grant`. */
  require(grant: Grant): MiddlewareHandler<AuthEnv> {
    return async (c, next) => {
      const principal = this.identify(c.req.header("authorization"));
      if (!principal) throw new ApiError(401, "unauthorized", "send Authorization: Bearer <token>");
      // Set before the grant check: the audit log names the token a refusal was for.
      c.set("principal", principal);
      if (!principal.grants.has(grant)) throw new ApiError(403, "forbidden", `this token lacks the ${grant} grant`);
      await next();
    };
  }
}
