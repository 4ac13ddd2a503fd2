// How the estate's answers become HTTP answers, shared by the work, pages and chat route
// groups: a write is 200 applied / 202 pending / 504 unknown with its position; a write
// the log order refused is the 4xx its reason names; nobody serving the estate is a 503
// that says so.
import type { Context } from "hono";
import { ApiError } from "./errors.ts";
import type { AuthEnv } from "./auth.ts";
import { EstateInvalid, EstateUnavailable, type WriteOutcome } from "../estate/router.ts";

/** Runs an estate call, turning the router's refusals into API errors. */
export async function estateCall<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof EstateUnavailable) throw new ApiError(503, "estate_unavailable", err.message);
    if (err instanceof EstateInvalid) {
      if (err.code === "too_large") throw new ApiError(413, "too_large", err.message, err.field);
      throw new ApiError(400, "invalid_input", err.message, err.field);
    }
    throw err;
  }
}

const REFUSAL_STATUS: Record<string, 404 | 409 | 422> = {
  unknown_project: 404,
  unknown_work_item: 404,
  unknown_container: 404,
  unknown_channel: 404,
  unknown_message: 404,
  unknown_page: 404,
  too_many_files: 409,
  revision_conflict: 409,
  message_deleted: 409,
};

export function writeReply(c: Context<AuthEnv>, out: WriteOutcome): Response {
  switch (out.status) {
    case "applied": {
      const o = out.outcome;
      if (!o.ok) throw new ApiError(REFUSAL_STATUS[o.code] ?? 422, o.code, o.message, o.field);
      const { ok: _ok, ...result } = o;
      return c.json({ status: "applied", op_id: out.op_id, position: out.position, ...result }, 200);
    }
    case "pending":
      return c.json({ status: "pending", op_id: out.op_id, position: out.position }, 202);
    case "unknown":
      return c.json({ status: "unknown", op_id: out.op_id, error: out.error }, 504);
  }
}

/** Who the caller is when the body names nobody: the API token's id. */
export function callerActor(c: Context<AuthEnv>): string {
  return `token:${c.get("principal").tokenId}`;
}
