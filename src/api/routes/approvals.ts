// GET /approvals (?seat=, ?state=): calls agents parked for a person's yes, from the fleet's
// records, so any node answers; GET /approvals/{id}: one, with its arguments and result;
// POST /approvals/{id}/approve and /reject: a person decides (grant approvals:decide). The
// decision resumes the seat on whichever node holds it (src/approvals/desk.ts); the audit
// log records who decided, when, and the reason.
import { Hono } from "hono";
import { z } from "zod";
import { approvalIdSchema, verdictOf, WORDS_MAX_BYTES, type ApprovalRecord, type ApprovalStore } from "../../approvals/records.ts";
import type { ApprovalDesk } from "../../approvals/desk.ts";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import { ApiError, coordCall, parseNoQuery, parseOptionalJsonBody, parseQuery } from "../errors.ts";

/** Requests one listing returns: newest first. */
export const APPROVALS_LIST_MAX = 500;

export const APPROVAL_VIEW_STATES = ["pending", "approved", "rejected", "expired"] as const;

export interface ApprovalsSource {
  store: Pick<ApprovalStore, "list" | "find">;
  desk: Pick<ApprovalDesk, "decide">;
}

const listQuery = z.strictObject({
  seat: z.string().regex(/^[a-z0-9][a-z0-9_\-]{0,47}$/, "a seat handle").optional(),
  state: z.enum(APPROVAL_VIEW_STATES).optional(),
});
const reason = z.string().trim().min(1, "say why").refine((s) => Buffer.byteLength(s, "utf8") <= WORDS_MAX_BYTES, `is over ${WORDS_MAX_BYTES} bytes`);
const approveBody = z.strictObject({ reason: reason.optional() });
const rejectBody = z.strictObject({ reason });

/** A request as people read it: the decision flattened, the record's stage kept. */
export function approvalView(r: ApprovalRecord) {
  return {
    id: r.id,
    seat: r.seat,
    tool: r.tool,
    args: r.args,
    summary: r.summary,
    rule: r.rule,
    conversation: r.conversation,
    from: r.from,
    requested_at: r.requested_at,
    expires_at: r.expires_at,
    state: verdictOf(r),
    decided_by: r.decision?.by ?? null,
    decided_at: r.decision?.at ?? null,
    reason: r.decision?.reason ?? null,
    /** pending → decided → running → done: where the seat's side is. */
    stage: r.state,
    result: r.result,
  };
}

export function approvalsGroup(src: ApprovalsSource): RouteGroup {
  return {
    prefix: "/approvals",
    routes: (auth) => {
      const app = new Hono<AuthEnv>();
      app.get("/", auth.require("state:read"), async (c) => {
        const q = parseQuery(c, listQuery);
        const { approvals, invalid } = await coordCall("approvals", () => src.store.list(q.seat));
        const picked = approvals.filter((r) => q.state === undefined || verdictOf(r) === q.state).reverse();
        return c.json({ approvals: picked.slice(0, APPROVALS_LIST_MAX).map(approvalView), truncated: picked.length > APPROVALS_LIST_MAX, invalid });
      });
      const idParam = (raw: string) => {
        const parsed = approvalIdSchema.safeParse(raw);
        if (!parsed.success) throw new ApiError(400, "invalid_input", `params.id: ${parsed.error.issues[0]?.message ?? "invalid"}`, "id");
        return parsed.data;
      };
      const found = async (id: string) => {
        const r = await coordCall("approvals", () => src.store.find(id));
        if (!r) throw new ApiError(404, "unknown_approval", `no approval request "${id}"`, "id");
        return r;
      };
      app.get("/:id", auth.require("state:read"), async (c) => {
        parseNoQuery(c);
        return c.json(approvalView(await found(idParam(c.req.param("id")))));
      });
      for (const verdict of ["approve", "reject"] as const) {
        app.post(`/:id/${verdict}`, auth.require("approvals:decide"), async (c) => {
          parseNoQuery(c);
          const id = idParam(c.req.param("id"));
          const body = verdict === "approve" ? await parseOptionalJsonBody(c, approveBody) : await parseOptionalJsonBody(c, rejectBody);
          const r = await found(id);
          const by = `token:${c.get("principal").tokenId}`;
          const why = body.reason ?? "";
          c.set("audit_detail", `${verdict === "approve" ? "approved" : "rejected"} ${r.id} (${r.seat} → ${r.tool})${why ? `: ${why}` : ""}`);
          const out = await coordCall("approvals", () => src.desk.decide(r, { verdict: verdict === "approve" ? "approved" : "rejected", by, reason: why }));
          if (!out.decided) {
            const d = out.record.decision!;
            throw new ApiError(409, "already_decided", `request "${r.id}" was already ${d.verdict} by ${d.by}`, "id");
          }
          return c.json(approvalView(out.record));
        });
      }
      return app;
    },
  };
}
