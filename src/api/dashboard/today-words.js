// The Today view's words, PURE (table-tested in test/api/today-words.test.ts): a receipt's
// trigger, tools, cost and duration as a person reads them, a day's tallies, and which
// outcomes read as trouble. Shared with the browser as one of the dashboard's parts (see
// src/api/dashboard/index.ts PARTS), so nothing here touches the DOM.

/** Outcomes that finished the work the turn was woken for (classify.ts). */
const DONE_OUTCOMES = new Set(["completed", "round_limit"]);
/** Outcomes that are not failures but are not done either: the turn runs again or moved. */
const PASSING_OUTCOMES = new Set(["deferred", "handed_back", "retry"]);

/** How a receipt's outcome is coloured: done, passing (it runs again), or trouble. */
export function outcomeKind(outcome) {
  if (DONE_OUTCOMES.has(outcome)) return "done";
  if (PASSING_OUTCOMES.has(outcome)) return "passing";
  return "trouble";
}

/** An outcome word as a person reads it. */
export function outcomeWords(outcome) {
  const words = {
    completed: "completed",
    round_limit: "stopped at the round limit",
    failed: "failed",
    retry: "failed, will retry",
    deferred: "handed to the seat's new holder",
    handed_back: "handed back (node draining)",
    budget_exhausted: "refused: budget spent",
    stopped: "stopped by a person",
  };
  return words[outcome] ?? String(outcome).replace(/_/g, " ");
}

function conversationPlace(conversation) {
  const [kind, ...rest] = String(conversation ?? "").split(":");
  if (kind === "chat") return (rest[0] ?? "").startsWith("dm.") ? " in a direct message" : ` in #${rest[0] ?? ""}`;
  if (kind === "work") return ` on ${rest.join(":")}`;
  return "";
}

/** What woke the turn: "founder mentioned it in #general", "ENG-3 assigned by founder". */
export function triggerWords(t) {
  const from = t.from;
  const more = t.count > 1 ? ` (and ${t.count - 1} more)` : "";
  const w = conversationPlace(t.conversation);
  switch (t.type) {
    case "chat_mention":
      return `${from} mentioned it${w}${more}`;
    case "chat_direct":
      return `${from} wrote to it directly${more}`;
    case "task_assigned":
      return `${String(t.conversation).replace(/^work:/, "")} assigned by ${from}${more}`;
    case "task_comment":
      return `${from} commented${w}${more}`;
    case "a2a_request":
      return `@${from} asked it${more}`;
    case "a2a_message":
      return `@${from} told it something${more}`;
    case "schedule":
      return `a schedule fired${more}`;
    case "sandbox_run":
      return `a coding run's result${w}${more}`;
    case "approval_decided":
      return `${from} decided on a call it asked approval for${more}`;
    case "external_notification":
      return `a notification from ${from}${more}`;
    default:
      return `${String(t.type).replace(/_/g, " ")} from ${from}${w}${more}`;
  }
}

/** Tools called: "work_create, chat_post ×2 (1 failed)", or "no tools". */
export function toolsWords(tools) {
  if (!tools || tools.length === 0) return "no tools";
  const failed = tools.reduce((n, x) => n + x.errors, 0);
  const list = tools.map((x) => (x.calls > 1 ? `${x.name} ×${x.calls}` : x.name)).join(", ");
  return failed > 0 ? `${list} (${failed} failed)` : list;
}

/** Money in the pricing's currency, from micro-units: four decimals below one, two above. */
export function moneyWords(micros) {
  const v = micros / 1_000_000;
  return v >= 1 ? v.toFixed(2) : v.toFixed(4);
}

/** A receipt's cost: money when its model is priced, "unpriced" when not. */
export function costWords(micros) {
  return micros === null || micros === undefined ? "unpriced" : moneyWords(micros);
}

/** A duration: "<1 s", "42 s", "3 min 5 s", "2 h 4 min". */
export function durationWords(ms) {
  if (typeof ms !== "number" || ms < 0) return "—";
  if (ms < 1000) return "<1 s";
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ""}`;
  const m = Math.round(s / 60);
  return `${Math.floor(m / 60)} h${m % 60 ? ` ${m % 60} min` : ""}`;
}

/** A set of receipts summed: turns, tokens, priced cost, how many were unpriced, troubled. */
export function tallies(receipts) {
  const t = { turns: 0, input_tokens: 0, output_tokens: 0, cost_micros: 0, unpriced: 0, trouble: 0 };
  for (const r of receipts) {
    t.turns += 1;
    t.input_tokens += r.input_tokens;
    t.output_tokens += r.output_tokens;
    if (r.cost_micros === null || r.cost_micros === undefined) t.unpriced += 1;
    else t.cost_micros += r.cost_micros;
    if (outcomeKind(r.outcome) === "trouble") t.trouble += 1;
  }
  return t;
}

/** A tally as a line: "3 turns · 1,200 tokens in / 300 out · cost 0.0123 (1 turn unpriced)". */
export function tallyWords(t) {
  const n = (x) => x.toLocaleString("en");
  const turns = `${n(t.turns)} turn${t.turns === 1 ? "" : "s"}`;
  const tokens = `${n(t.input_tokens)} tokens in / ${n(t.output_tokens)} out`;
  const priced = t.turns - t.unpriced;
  const cost = priced === 0 ? (t.turns === 0 ? "cost 0" : "cost unpriced (no price configured for its model)") : `cost ${moneyWords(t.cost_micros)}${t.unpriced ? ` (${n(t.unpriced)} turn${t.unpriced === 1 ? "" : "s"} unpriced)` : ""}`;
  const trouble = t.trouble ? ` · ${n(t.trouble)} did not finish` : "";
  return `${turns} · ${tokens} · ${cost}${trouble}`;
}

/** Receipts by seat, each seat's newest first; seats in `order` first, then any other. */
export function bySeat(receipts, order) {
  const groups = new Map(order.map((s) => [s, []]));
  for (const r of receipts) {
    if (!groups.has(r.seat)) groups.set(r.seat, []);
    groups.get(r.seat).push(r);
  }
  for (const list of groups.values()) list.sort((a, b) => b.ended_at - a.ended_at);
  return [...groups.entries()].map(([seat, list]) => ({ seat, receipts: list }));
}
