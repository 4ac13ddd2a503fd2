// The engine's events as sentences a person reads ("cto answered founder in #general",
// "seat cto failed over from node-a to node-b"), for the Events view. Pure: an event's
// name and body in, words out; no DOM, so it is table-tested under bun (test/api/
// event-sentences.test.ts). Event names and fields are those the engine publishes
// (src/agent/turn.ts, src/agent/notice.ts, src/spend/, src/node/seat-events.ts,
// src/sandbox/seat-runs.ts, src/duty/retirement.ts); an event this file does not know is
// still shown, plainly, as its name and fields.

/** Characters of an error or reason kept in a sentence; the whole is in the details. */
const REASON_MAX = 160;

function cut(text, max = REASON_MAX) {
  const s = String(text ?? "");
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

function n(v) {
  return typeof v === "number" ? v.toLocaleString("en") : "?";
}

function words(s) {
  return String(s ?? "").replaceAll("_", " ");
}

/** Where a conversation happens, as words: "in #general", "on ENG-4", "" when unknown. */
export function place(conversation) {
  if (typeof conversation !== "string") return "";
  const [kind, ...rest] = conversation.split(":");
  if (kind === "chat") {
    const channel = rest[0] ?? "";
    return channel.startsWith("dm.") ? "in a direct message" : `in #${channel}`;
  }
  if (kind === "work") return `on ${rest.join(":")}`;
  if (kind === "schedule") return `on schedule ${rest.join(":")}`;
  if (kind === "a2a") return "with a colleague";
  if (rest.length >= 1) return `from ${rest[0]} (${kind})`;
  return "";
}

function join(...parts) {
  return parts.filter((p) => p !== "" && p !== null && p !== undefined).join(" ");
}

/** What a turn did, in brief: "2 rounds, 3 tool calls, 1,234 tokens". */
function effort(b) {
  const tokens = b.tokens && typeof b.tokens === "object" ? (b.tokens.input ?? 0) + (b.tokens.output ?? 0) : null;
  const parts = [];
  if (typeof b.rounds === "number") parts.push(`${n(b.rounds)} round${b.rounds === 1 ? "" : "s"}`);
  if (typeof b.tool_calls === "number") parts.push(`${n(b.tool_calls)} tool call${b.tool_calls === 1 ? "" : "s"}`);
  // A scripted model spends none: "0 tokens" would only be noise.
  if (tokens) parts.push(`${n(tokens)} tokens`);
  return parts.length ? `(${parts.join(", ")})` : "";
}

function turnCompleted(b) {
  const seat = b.seat ?? "a seat";
  const where = place(b.conversation);
  const from = typeof b.from === "string" ? b.from : null;
  const chat = typeof b.conversation === "string" && b.conversation.startsWith("chat:");
  const error = b.error ? `: ${cut(b.error)}` : "";
  switch (b.outcome) {
    case "completed":
      if (chat && from) return { text: join(seat, "answered", from, where, effort(b)), level: "ok" };
      if (from && from !== seat) return { text: join(seat, "finished a turn", where, `for ${from}`, effort(b)), level: "ok" };
      return { text: join(seat, "finished a turn", where, effort(b)), level: "ok" };
    case "failed":
      return { text: `${join(seat, "could not answer", from ?? "", where)}${error}`, level: "error" };
    case "retry":
      return { text: `${join(seat + "'s turn", where, "failed and will be retried")}${error}`, level: "warn" };
    case "round_limit":
      return { text: join(seat, "stopped at its round limit", where), level: "warn" };
    case "deferred":
      return { text: join(seat, "put its turn off", where), level: "info" };
    case "handed_back":
      return { text: `${join(seat, "handed its turn back", where)}${error}`, level: "warn" };
    case "budget_exhausted":
      return { text: join(seat, "is out of budget and did not answer", from ?? "", where), level: "error" };
    case "stopped":
      return { text: join(seat + "'s turn", where, "was stopped"), level: "warn" };
    default:
      return { text: `${join(seat + "'s turn", where, "ended:", words(b.outcome ?? "unknown"))}${error}`, level: "info" };
  }
}

/**
 * Who held each seat last, as the events said, so a claim can say where the seat came from
 * and, for a handover, why it moved. Feed it events oldest first; it remembers one line per seat.
 */
export function seatTracker() {
  const held = new Map(); // seat → { node, released: reason | null }
  return {
    /** Call for every event in time order; returns what the claim replaced, if anything. */
    observe(name, b) {
      if (typeof b?.seat !== "string") return null;
      if (name === "seat_claimed") {
        const before = held.get(b.seat) ?? null;
        held.set(b.seat, { node: b.node, released: null });
        return before;
      }
      if (name === "seat_detached" || name === "seat_orphan_released") {
        const h = held.get(b.seat);
        if (h && h.node === b.node) h.released = name === "seat_orphan_released" ? "orphan" : (b.reason ?? "released");
        else held.set(b.seat, { node: b.node, released: name === "seat_orphan_released" ? "orphan" : (b.reason ?? "released") });
      }
      return null;
    },
  };
}

/**
 * One event as a sentence. `before` is what seatTracker().observe answered for it (a
 * seat_claimed's previous holder), or null.
 * Returns { text, level } with level "ok" | "info" | "warn" | "error".
 */
export function describeEvent(name, body, before = null) {
  const b = body && typeof body === "object" ? body : {};
  const seat = typeof b.seat === "string" ? b.seat : null;
  switch (name) {
    case "turn_started": {
      const where = place(b.conversation);
      const from = typeof b.from === "string" && b.from !== seat ? b.from : null;
      const chat = typeof b.conversation === "string" && b.conversation.startsWith("chat:");
      if (chat && from) return { text: join(seat, "is answering", from, where), level: "info" };
      return { text: join(seat, "started a turn", where, from ? `for ${from}` : ""), level: "info" };
    }
    case "turn_completed":
      return turnCompleted(b);
    case "turn_text":
      return { text: join(seat, "is writing:"), level: "info" };
    case "tool_called":
      return b.ok === false ? { text: `${seat}'s call to ${b.tool} failed`, level: "warn" } : { text: join(seat, "used", b.tool), level: "info" };
    case "turn_trigger_skipped":
      return { text: join(seat, "skipped a", words(b.type ?? "trigger"), `(${words(b.reason ?? "no reason given")})`), level: "info" };
    case "turn.guard_breach":
      return { text: `${seat}'s turn broke a guard (${words(b.kind)}): ${cut(b.error)}`, level: "error" };
    case "turn_failure_told": {
      const where = b.channel ? (String(b.channel).startsWith("dm.") ? "in a direct message" : `in #${b.channel}`) : b.work_key ? `on ${b.work_key}` : "";
      return { text: join(seat, "told the asker", where, "that it could not answer"), level: "error" };
    }
    case "provider_key_cooling":
      return { text: join(`${b.provider} API key ${b.key_id} is cooling down`, b.until ? `until ${clockOf(b.until)}` : "", b.reason ? `(${cut(b.reason, 60)})` : ""), level: "warn" };
    case "provider_key_ready":
      return { text: `${b.provider} API key ${b.key_id} is ready again`, level: "ok" };
    case "budget_exhausted":
      return { text: join(seat, `is out of its ${words(b.window)} budget`, b.scope && b.scope !== `seat ${seat}` ? `(${b.scope})` : "", b.reset_at ? `until ${clockOf(b.reset_at)}` : ""), level: "error" };
    case "skill_state_changed": {
      const named = typeof b.name === "string" ? `skill "${b.name}"` : "skill";
      if (b.from === null || b.from === undefined) return { text: join(seat, "learned the", named), level: "ok" };
      return { text: `${seat ?? "a seat"}'s ${named} went from ${words(b.from)} to ${words(b.to)}`, level: "info" };
    }
    case "budget_alert": {
      const pct = typeof b.fraction === "number" ? `${Math.floor(b.fraction * 100)}%` : "most";
      return { text: `${b.scope ?? "a budget"} has used ${pct} of its ${words(b.window)} budget`, level: "warn" };
    }
    case "seat_claimed":
      // Whether the move was a failover is judged by the claimant (seat_failover, below):
      // the release's event may arrive after the claim's, through another server.
      if (before && before.node && before.node !== b.node) {
        return { text: join(`seat ${seat} moved from ${before.node} to ${b.node}`, before.released ? `(${words(before.released)})` : ""), level: "info" };
      }
      return { text: `seat ${seat} was taken up by ${b.node}`, level: "info" };
    case "seat_failover":
      return { text: `seat ${seat} failed over from ${b.from} to ${b.node}: ${b.from} never let it go`, level: "warn" };
    case "seat_detached":
      return { text: join(`seat ${seat} was let go by ${b.node}`, `(${words(b.reason ?? "released")}${b.mode === "fenced" ? ", fenced" : ""})`), level: b.mode === "fenced" ? "warn" : "info" };
    case "turn_stop_requested":
      return { text: `${b.by ?? "someone"} stopped ${seat}'s turn`, level: "warn" };
    case "budget_unknown":
      return { text: `${seat}'s budget could not be read${b.error ? ` (${cut(b.error, 80)})` : ""}; it waits before calling its model`, level: "warn" };
    case "sandbox_run_started":
      return { text: join(seat, "started a coding run", runName(b), b.engine ? `with ${b.engine}` : "", b.node ? `on ${b.node}` : ""), level: "info" };
    case "sandbox_run_parked":
      return { text: join(`${seat}'s coding run`, runName(b), "asked a question and waits for an answer"), level: "warn" };
    case "sandbox_answer_given":
      return { text: join(b.by ?? "someone", `answered ${seat}'s coding run`, runName(b)), level: "info" };
    case "sandbox_run_finished":
      return { text: join(`${seat}'s coding run`, runName(b), "finished"), level: "ok" };
    case "sandbox_run_failed":
      return runFailed(seat, b);
    case "approval_requested":
      return { text: join(seat, "asks a person's approval to call", b.tool ?? "a tool", b.rule ? `(rule "${b.rule}")` : ""), level: "warn" };
    case "approval_call_ran":
      return { text: join(`${seat}'s approved call to`, b.tool ?? "a tool", b.ok === false ? "ran and failed" : "ran"), level: b.ok === false ? "warn" : "ok" };
    case "tool_parked":
      return { text: join(seat, "waits for approval before", b.tool ?? "a call"), level: "info" };
    case "seat_orphan_released":
      return { text: `${b.node} let go of seat ${seat}, left over from before it restarted`, level: "info" };
    default:
      return { text: plain(name, b), level: "info" };
  }
}

/** A run by the first 8 characters of its id (what its card and its question show). */
function runName(b) {
  return typeof b.run === "string" ? b.run.slice(0, 8) : "";
}

/** A run that ended without success: cancelled, stopped at a limit, ended with its seat, or failed. */
function runFailed(seat, b) {
  const run = `${seat}'s coding run`;
  const why = b.reason ? `: ${cut(b.reason)}` : "";
  if (b.outcome === "cancelled") return { text: `${join(run, runName(b), "was cancelled")}${why}`, level: "warn" };
  if (b.outcome === "limit") return { text: `${join(run, runName(b), "was stopped at a limit")}${why}`, level: "error" };
  if (b.reason === "seat_removed") return { text: join(run, runName(b), "was ended: the seat was removed"), level: "warn" };
  return { text: `${join(run, runName(b), "failed")}${why}`, level: "error" };
}

/** An event this page does not know: its name, its seat, and its first fields as key=value. */
export function plain(name, b) {
  const { event: _e, at: _a, seat, handle, ...rest } = b ?? {};
  const who = seat ?? handle;
  const fields = Object.entries(rest)
    .slice(0, 6)
    .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`)
    .join(" ");
  return join(name, who ? `@${who}` : "", fields);
}

/** Every field of an event as "key: value" lines, for its details. */
export function details(b) {
  return Object.entries(b ?? {})
    .filter(([k]) => k !== "event")
    .map(([k, v]) => `${k}: ${typeof v === "object" && v !== null ? JSON.stringify(v) : String(v)}`);
}

function clockOf(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toLocaleString("en-GB", { day: "numeric", month: "short", hour: "2-digit", minute: "2-digit" });
}
