// ---- a person's controls over a seat, its paused marker and its budget badge ----------
// Shared by the org chart's cards and the agent page. The routes are POST
// /agents/{handle}/pause|resume|stop (grant agents:operate); a token without that grant
// is told so in words, not a bare 403.

/** A budget at or past this fraction of its cap reads "near cap" (the spend alert's default). */
const BUDGET_NEAR_FRACTION = 0.8;

/** GET /budgets, or null when this node keeps no spend counters (no route: 404). */
async function readBudgets() {
  try {
    return await api("/budgets");
  } catch (err) {
    if (err instanceof AuthError) throw err;
    if (err.status === 404) return null;
    throw err;
  }
}

/** The caps that hold `handle`: its own and the org's. */
function budgetsOf(budgets, handle) {
  return (budgets?.budgets ?? []).filter((b) => b.scope === `seat:${handle}` || b.scope === "org");
}

/** "near cap" / "over cap" for the seat's own caps (the org's show on the Spend view). */
function budgetBadge(budgets, handle, near = budgets?.soft_alert ?? BUDGET_NEAR_FRACTION) {
  const mine = (budgets?.budgets ?? []).filter((b) => b.scope === `seat:${handle}`);
  const over = mine.find((b) => b.exhausted);
  if (over) return h("span", { class: "badge badge-over", title: `${over.window} cap reached; resets ${new Date(over.reset_at).toLocaleString("en-GB")}` }, `over ${over.window} cap`);
  const close = mine.filter((b) => b.fraction >= near).sort((a, b) => b.fraction - a.fraction)[0];
  if (close) return h("span", { class: "badge badge-near", title: `${Math.round(close.fraction * 100)}% of the ${close.window} cap` }, `near ${close.window} cap (${Math.round(close.fraction * 100)}%)`);
  return null;
}

/** "today: 1,234 tokens · 0.0123" from the seat's day-window counter (only a seat with a
 * day cap has one: the counters are kept per cap), else null. */
function todaySpend(budgets, handle) {
  const day = (budgets?.budgets ?? []).find((b) => b.scope === `seat:${handle}` && b.window === "day");
  if (!day) return null;
  return `today: ${count(day.spent.tokens)} tokens${day.spent.money > 0 ? ` · ${day.spent.money.toFixed(4)}` : ""}`;
}

/** The paused marker: who paused the seat and since when. */
function pausedMarker(paused) {
  if (!paused) return null;
  return h("span", { class: "badge badge-paused" }, `paused by ${paused.by} · `, when(paused.since));
}

/** Words for a refused control: a missing grant is named. */
function controlError(err, verb) {
  if (err.status === 403) return `Not ${verb}: this token lacks the agents:operate grant (pause, resume and stop need it). Sign in with a token that has it.`;
  if (err.status === 404 && err.code !== "unknown_seat") return `Not ${verb}: this node offers no seat controls.`;
  return `Not ${verb}: ${err.message}`;
}

/**
 * Pause or resume (by the seat's state) and stop, each asking first. `onDone` runs after
 * a control landed (the caller refreshes). The message line says what happened.
 */
function seatControls(handle, paused, onDone) {
  const note = h("span", { class: "control-note", role: "status" });
  const run = (path, verb, done) => async () => {
    note.textContent = "";
    note.classList.remove("error");
    try {
      await api(`/agents/${encodeURIComponent(handle)}/${path}`, { method: "POST", body: {} });
      note.textContent = done;
      onDone?.();
    } catch (err) {
      if (err instanceof AuthError) return signOut(err.message);
      note.textContent = controlError(err, verb);
      note.classList.add("error");
    }
  };
  const toggle = paused
    ? confirmButton(`Resume @${handle}`, `Resume @${handle}? Its waiting mail runs.`, "Resume", run("resume", "resumed", `@${handle} resumed.`))
    : confirmButton(`Pause @${handle}`, `Pause @${handle}? Mail waits until it is resumed.`, "Pause", run("pause", "paused", `@${handle} paused.`));
  const stop = confirmButton(`Stop @${handle}'s turn`, `Stop the turn @${handle} is running?`, "Stop", run("stop", "stopped", `Stop sent to @${handle}'s turn.`));
  return h("div", { class: "seat-controls", "data-handle": handle }, toggle, stop, note);
}
