// The soft alert (once per window and scope, fleet-wide: counters.ts marks the record with
// the one write that crossed the fraction): a `budget_alert` event, and for a seat's own cap
// a chat post to the seat's manager, if it has one, in their DM.
import type { EventSink } from "../agent/events.ts";
import type { EstatePort } from "../agent/tools/estate-port.ts";
import { dmChannelId } from "../estate/mentions.ts";
import { MAX_MESSAGE_BYTES, truncateToBytes } from "../estate/records.ts";
import { automaticOpId } from "../estate/wakes.ts";
import type { Logger } from "../log.ts";
import type { Org } from "../org/org.ts";
import { MICROS, scopeName } from "./budget.ts";
import type { BudgetAlert } from "./counters.ts";

/** Pure: what the manager reads. */
export function alertWords(a: BudgetAlert, timezone: string): string {
  const pct = Math.floor(a.fraction * 100);
  const tokens = a.spent.input_tokens + a.spent.output_tokens;
  const caps = [a.cap.tokens !== undefined ? `${tokens.toLocaleString("en-US")} of ${a.cap.tokens.toLocaleString("en-US")} tokens` : null, a.cap.money !== undefined ? `${(a.spent.cost_micros / MICROS).toFixed(2)} of ${a.cap.money} in money` : null].filter((x) => x !== null);
  const at = new Date(a.reset_at).toLocaleString("en-GB", { timeZone: timezone, dateStyle: "medium", timeStyle: "short" });
  return `⚠ I have used ${pct}% of my ${a.window} model budget (${caps.join(", ")}); it resets ${at} (${timezone}).`;
}

export function budgetAlerter(o: { events: EventSink; estate: EstatePort; org: () => Org; timezone: () => string; log: Logger; node_id: string }): (a: BudgetAlert) => void {
  return (a) => {
    o.events.emit("budget_alert", {
      node: o.node_id,
      scope: scopeName(a.scope),
      window: a.window,
      fraction: Math.round(a.fraction * 10_000) / 10_000,
      cap: a.cap,
      spent_tokens: a.spent.input_tokens + a.spent.output_tokens,
      spent_money: a.spent.cost_micros / MICROS,
      reset_at: new Date(a.reset_at).toISOString(),
    });
    if (a.scope.kind !== "seat") return;
    const handle = a.scope.handle;
    const manager = o.org().seat(handle)?.manager ?? null;
    if (manager === null) return;
    const channel = dmChannelId([handle, manager]);
    void (async () => {
      const existing = await o.estate.read({ q: "chat.channel", id: channel });
      await o.estate.write("chat", {
        op: "chat.post",
        channel,
        author: handle,
        body: truncateToBytes(alertWords(a, o.timezone()), MAX_MESSAGE_BYTES),
        thread_parent: null,
        mentions: [],
        dm: existing ? null : { members: [handle, manager] },
      }, { op_id: automaticOpId("alert", `${scopeName(a.scope)}\n${a.window}\n${a.reset_at}`) });
    })().catch((err) => o.log.warn("budget_alert_post_failed", { seat: handle, manager, error: (err as Error).message }));
  };
}
