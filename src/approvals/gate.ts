// The seat's side of approvals: a covered call is parked (recorded once, asked in the
// thread) instead of run; a decided request is taken under the holder's grant and an
// approved call run at most once — the record's state guards the call, the ledger the turn.
import type { Clock } from "../clock.ts";
import { StoreUnavailable } from "../coord/contract.ts";
import type { SeatWriter } from "../coord/fenced-records.ts";
import { RIDE_OUT_MS, rideOut } from "../coord/ride-out.ts";
import { matchRule, type ApprovalsConfig } from "../config/approvals.ts";
import { MAX_TRIGGER_TEXT_BYTES, type Trigger } from "../org/trigger.ts";
import { truncateToBytes } from "../estate/records.ts";
import type { Logger } from "../log.ts";
import type { Org } from "../org/org.ts";
import type { EventSink } from "../agent/events.ts";
import { postInConversation } from "../agent/conversation-post.ts";
import type { ToolResult } from "../agent/tools/contract.ts";
import type { EstatePort } from "../agent/tools/estate-port.ts";
import type { ApprovalPort, ParkRequest } from "../agent/turn.ts";
import { ApprovalFenced, approvalId, RESULT_MAX_BYTES, WORDS_MAX_BYTES, type ApprovalRecord, type ApprovalStore } from "./records.ts";
import { decisionWords, parkedWords, requestWords } from "./words.ts";

export const DECIDED_TRIGGER = "approval_decided";

/** What an audit line of an approval says (the node appends it to the fleet's audit log). */
export interface ApprovalAudit {
  action: "approval.request" | "approval.approve" | "approval.reject" | "approval.expire";
  id: string;
  detail: string;
}

export interface ApprovalGateOptions {
  store: ApprovalStore;
  estate: EstatePort;
  config: () => ApprovalsConfig;
  org: () => Org;
  /** This node's incarnation, the owner the fence writes. */
  owner: string;
  node_id: string;
  clock: Clock;
  log: Logger;
  events: EventSink;
  audit?: (e: ApprovalAudit) => void;
}

export class ApprovalGate implements ApprovalPort {
  constructor(private readonly o: ApprovalGateOptions) {}

  async intercept(p: ParkRequest): Promise<ToolResult | null> {
    const cfg = this.o.config();
    if (cfg.rules.length === 0) return null;
    const rule = matchRule(cfg.rules, { tool: p.tool, source: p.source, readOnly: p.readOnly, seat: p.seat, units: unitsAround(this.o.org(), p.seat), spent: p.spent });
    if (!rule) return null;
    const now = this.o.clock.now();
    const id = approvalId(p.seat, p.trigger_ids, p.tool, p.args);
    const fresh: ApprovalRecord = {
      v: 1,
      id,
      seat: p.seat,
      tool: p.tool,
      args: p.args,
      summary: truncateToBytes(p.summary, WORDS_MAX_BYTES),
      rule: rule.name,
      conversation: p.conversation,
      from: p.from,
      turn_id: p.turn_id,
      owner: this.o.owner,
      owner_epoch: p.epoch,
      state: "pending",
      posted: false,
      decision: null,
      told: false,
      result: null,
      requested_at: now,
      expires_at: now + Math.round(cfg.expires_after_hours * 3_600_000),
      updated_at: now,
    };
    const { record, created } = await this.o.store.park(fresh);
    if (created) {
      this.o.events.emit("approval_requested", { seat: p.seat, id, tool: p.tool, rule: rule.name, node: this.o.node_id, turn_id: p.turn_id, conversation: p.conversation });
      this.o.audit?.({ action: "approval.request", id, detail: `${p.seat} asks to call ${p.tool} (rule "${rule.name}")` });
    }
    if (!record.posted && record.decision === null) await this.post(record, p.epoch);
    return { content: parkedWords(record, created), is_error: false, reached: false };
  }

  /** Posts the request where the work came from (once: its op id is derived), then says so. */
  private async post(r: ApprovalRecord, epoch: number): Promise<void> {
    try {
      const posted = await postInConversation(this.o, { seat: r.seat, conversation: r.conversation, body: requestWords(r), op_id: `approval-${r.id}` });
      if (posted) await this.o.store.mutate(r.seat, r.id, { owner: this.o.owner, epoch }, (cur) => (cur.posted ? null : { ...cur, posted: true }));
    } catch (err) {
      // The request stands on the record (GET /approvals, the dashboard) either way.
      this.o.log.warn("approval_request_not_posted", { seat: r.seat, id: r.id, error: (err as Error).message });
    }
  }

  async resume(seat: string, epoch: number, triggers: Trigger[], run: (tool: string, args: Record<string, unknown>) => Promise<ToolResult>): Promise<Trigger[]> {
    const out: Trigger[] = [];
    for (const t of triggers) {
      const id = t.type === DECIDED_TRIGGER ? idOfTrigger(t) : null;
      if (id === null) {
        out.push(t);
        continue;
      }
      const rec = await this.take(seat, id, epoch, run);
      if (!rec) continue;
      out.push({ ...t, text: truncateToBytes(decisionWords(rec), MAX_TRIGGER_TEXT_BYTES) });
    }
    return out;
  }

  /**
   * Takes a decided request under this grant and settles it: an approved call runs here,
   * once — a request found `running` was taken by a holder that died mid-call, so whether
   * it ran is unknown and it is not run again. Null: no such request (forgotten).
   */
  private async take(seat: string, id: string, epoch: number, run: (tool: string, args: Record<string, unknown>) => Promise<ToolResult>): Promise<ApprovalRecord | null> {
    const writer = { owner: this.o.owner, epoch };
    let rec = await this.o.store.get(seat, id);
    if (!rec || rec.decision === null) return rec;
    if (rec.state === "done") return rec;
    if (rec.state === "running") {
      return this.o.store.mutate(seat, id, writer, (cur) => (cur.state === "running" ? { ...cur, state: "done", result: { content: "the node running this call stopped during it; check before asking again", is_error: true, ran: "unknown" } } : null));
    }
    if (rec.decision.verdict !== "approved") return this.settle(seat, id, writer, (cur) => (cur.state === "decided" ? { ...cur, state: "done" } : null));
    rec = await this.o.store.mutate(seat, id, writer, (cur) => (cur.state === "decided" ? { ...cur, state: "running" } : null));
    if (rec.state !== "running" || rec.owner_epoch !== epoch) return rec;
    const result = await run(rec.tool, rec.args);
    this.o.events.emit("approval_call_ran", { seat, id, tool: rec.tool, ok: !result.is_error, node: this.o.node_id });
    const ran = result.reached === false && result.is_error ? "no" : "yes";
    return this.settle(seat, id, writer, (cur) => (cur.state === "running" ? { ...cur, state: "done", result: { content: truncateToBytes(result.content, RESULT_MAX_BYTES), is_error: result.is_error, ran } } : null));
  }

  /** The write that makes a request done: after the call ran, a store election must not
   *  leave it running for good, so it is ridden out (the change is a no-op once landed). */
  private async settle(seat: string, id: string, writer: SeatWriter, change: (r: ApprovalRecord) => ApprovalRecord | null): Promise<ApprovalRecord> {
    const until = this.o.clock.now() + RIDE_OUT_MS;
    return (await rideOut(this.o.clock, until, () => this.o.store.mutate(seat, id, writer, change), (err) => err instanceof StoreUnavailable)).value;
  }
}

/** The request a decided trigger names (`approval.{id}.decided`). */
function idOfTrigger(t: Trigger): string | null {
  return /^approval\.(ap-[a-f0-9]{20})\.decided$/.exec(t.event_id)?.[1] ?? null;
}

/** The seat's units and every unit they sit inside: a rule on a unit covers its sub-units. */
export function unitsAround(org: Org, seat: string): string[] {
  const s = org.seat(seat);
  if (!s) return [];
  const byId = new Map(org.units.map((u) => [u.id, u]));
  const out = new Set<string>();
  for (const u of s.units) {
    for (let at = byId.get(u); at && !out.has(at.id); at = at.parent ? byId.get(at.parent) : undefined) out.add(at.id);
  }
  return [...out];
}

export { ApprovalFenced };
