// ---- Agent page ------------------------------------------------------------------------
// One seat: what the company file says of it (goal, backstory, model, tools offered by
// source), who holds it and who held it before, a person's controls, its coding runs
// (runs.client.js), its budgets, its recent turns (each opening its transcript) and its
// memory. Everything agents wrote is set as text.

/** Turns listed per page on the agent page (GET /agents/{h}/turns pages up to 50). */
const AGENT_TURNS_PAGE = 10;
/** Seat events shown as the holder history: the newest of each kind. */
const HOLDER_HISTORY_MAX = 10;
/** The holder history is read again at most this often: three backlog reads (the events
 * stream, scanned in windows) every 3 s refresh would be the page's heaviest work. */
const HOLDER_HISTORY_EVERY_MS = 30_000;

/** Tools by where they come from: builtins, each MCP server's (named `{server}__{tool}`). */
function toolGroups(tools, servers) {
  const groups = new Map([["built in", []]]);
  for (const s of servers) groups.set(`MCP ${s}`, []);
  for (const t of tools) {
    const server = servers.find((s) => t.startsWith(`${s.replace(/[^a-zA-Z0-9_-]/g, "_")}__`));
    groups.get(server ? `MCP ${server}` : "built in").push(server ? t.slice(server.length + 2) : t);
  }
  return [...groups.entries()];
}

/** The seat's claims and releases, newest first, from the events backlog. */
async function holderHistory(handle) {
  const kinds = ["seat_claimed", "seat_detached", "seat_orphan_released"];
  const pages = await Promise.all(kinds.map((kind) => api(`/events?${new URLSearchParams({ seat: handle, kind, limit: String(HOLDER_HISTORY_MAX) })}`)));
  return pages
    .flatMap((p) => p.events)
    .sort((a, b) => b.seq - a.seq)
    .slice(0, HOLDER_HISTORY_MAX);
}

function holderLine(e) {
  const b = e.body;
  const at = typeof b.at === "number" || typeof b.at === "string" ? b.at : null;
  const what =
    e.name === "seat_claimed"
      ? `claimed by ${b.node ?? "?"} at epoch ${b.epoch ?? "?"}`
      : e.name === "seat_detached"
        ? `released by ${b.node ?? "?"}${b.reason ? ` (${b.reason})` : ""}`
        : `orphan released by ${b.node ?? "?"}`;
  return h("li", {}, when(at), ` · ${what}`);
}

function tokensText(u) {
  return `${count(u.input_tokens)} in / ${count(u.output_tokens)} out`;
}

function money(micros) {
  return micros === null || micros === undefined ? "" : ` · ${(micros / 1_000_000).toFixed(4)}`;
}

function budgetRows(list) {
  return list.map((b) =>
    h(
      "tr",
      {},
      h("th", { scope: "row" }, b.scope === "org" ? "Whole company" : "This seat"),
      h("td", {}, b.window),
      h("td", { class: "num" }, [b.cap.tokens !== undefined ? `${count(b.spent.tokens)} / ${count(b.cap.tokens)} tokens` : null, b.cap.money !== undefined ? `${b.spent.money.toFixed(2)} / ${b.cap.money} money` : null].filter(Boolean).join(" · ")),
      h("td", { class: b.exhausted ? "error" : b.fraction >= BUDGET_NEAR_FRACTION ? "busy" : "" }, `${Math.round(b.fraction * 100)}%${b.exhausted ? " · over cap" : ""}`),
      h("td", {}, when(b.reset_at)),
    ),
  );
}

function agentView(arg) {
  let handle = arg;
  const root = h("div");
  // Kept across refreshes, so an open confirmation or an older page survives the 3 s loop.
  let controls = null;
  let controlsKey = null;
  let history = null;
  let historyAt = 0;
  let turnsCursor = null;
  let olderTurns = [];
  let runs = seatRuns(arg);
  // The page's parts: the controls and the runs are kept elements (an open confirmation, an
  // open diff and keyboard focus survive the refresh); the rest is rebuilt around them.
  const headPart = h("div");
  const factsPart = h("div");
  const restPart = h("div");
  const runsHeading = h("h3", {}, "Coding runs");
  const olderBox = h("div");
  const olderButton = h("button", { type: "button", class: "link" }, "Older turns");
  olderButton.addEventListener("click", async () => {
    if (turnsCursor === null) return;
    try {
      const page = await api(`/agents/${encodeURIComponent(handle)}/turns?${new URLSearchParams({ limit: String(AGENT_TURNS_PAGE), before: String(turnsCursor) })}`);
      olderTurns.push(...page.turns);
      turnsCursor = page.next;
      refreshNow();
    } catch (err) {
      if (err instanceof AuthError) return signOut(err.message);
      olderBox.replaceChildren(h("p", { class: "error" }, `Older turns unavailable: ${err.message}`));
    }
  });

  function turnRows(turns) {
    return turns.map((t) =>
      h(
        "tr",
        {},
        h("td", {}, h("a", { href: `#turn/${encodeURIComponent(handle)}/${encodeURIComponent(t.id)}` }, when(t.started_at))),
        h("td", { class: t.outcome === "completed" ? "idle" : t.outcome === "failed" ? "error" : "" }, t.outcome),
        h("td", {}, `${t.trigger.type.replace(/_/g, " ")} from ${t.trigger.from}`),
        h("td", { class: "num" }, `${t.rounds} · ${t.tool_calls}`),
        h("td", { class: "num" }, `${tokensText(t.usage)}${money(t.cost_micros)}`),
        h("td", { class: "num" }, seconds(t.duration_ms)),
      ),
    );
  }

  const view = {
    title: `@${arg ?? "?"}`,
    root,
    select(next) {
      if (next && next !== handle) {
        handle = next;
        controls = null;
        controlsKey = null;
        history = null;
        historyAt = 0;
        turnsCursor = null;
        olderTurns = [];
        runs = seatRuns(next);
        root.replaceChildren();
        $("view-title").textContent = `@${next}`;
      }
    },
    async refresh() {
      if (!handle) {
        root.replaceChildren(h("p", {}, "No agent named. Pick one on the ", h("a", { href: "#org" }, "org chart"), "."));
        return;
      }
      let a;
      try {
        a = await api(`/agents/${encodeURIComponent(handle)}`);
      } catch (err) {
        if (err.code !== "unknown_seat") throw err;
        root.replaceChildren(h("p", { class: "error" }, `No agent seat @${handle} in this company.`), h("p", {}, h("a", { href: "#org" }, "Back to the org chart")));
        return;
      }
      const enc = encodeURIComponent(handle);
      const soft = (p) =>
        p.catch((err) => {
          if (err instanceof AuthError) throw err;
          return { failed: err.message };
        });
      const historyDue = Date.now() - historyAt >= HOLDER_HISTORY_EVERY_MS;
      const [memory, work, turns, budgets, historyRead, runList] = await Promise.all([
        api(`/agents/${enc}/memory`).catch((err) => {
          if (err instanceof AuthError) throw err;
          return { state: "unavailable", reason: err.message, memory: null };
        }),
        readPages("/work", "after", undefined),
        soft(api(`/agents/${enc}/turns?limit=${AGENT_TURNS_PAGE}`)),
        soft(readBudgets()),
        historyDue ? soft(holderHistory(handle)) : Promise.resolve(history),
        soft(readRuns(handle)),
      ]);
      if (historyDue) {
        history = historyRead;
        historyAt = history.failed ? 0 : Date.now();
      }
      if (turnsCursor === null && olderTurns.length === 0 && !turns.failed) turnsCursor = turns.next;
      const st = seatState(a);
      const t = a.turns;
      const key = JSON.stringify(a.paused);
      if (key !== controlsKey) {
        controlsKey = key;
        controls = seatControls(handle, a.paused, refreshNow);
      }
      const badge = budgets && !budgets.failed ? budgetBadge(budgets, handle) : null;
      const toolsPart = a.tools
        ? h(
            "ul",
            { class: "plain tool-groups" },
            toolGroups(a.tools, a.mcp_servers).map(([group, names]) => h("li", {}, h("strong", {}, `${group}: `), names.length ? chips(names) : h("span", { class: "muted" }, "none offered"))),
          )
        : h("span", { class: "muted" }, a.holder ? `${a.holder.node} holds it and did not say just now (${a.mcp_servers.length ? `MCP servers: ${a.mcp_servers.join(", ")}` : "no MCP servers"})` : "known once a node holds the seat");
      const facts = h(
        "dl",
        { class: "facts" },
        h("dt", {}, "State"),
        h("dd", {}, h("span", { class: `seat-state st-${st.cls}` }, st.word), " ", pausedMarker(a.paused), " ", badge),
        h("dt", {}, "Goal"),
        h("dd", {}, a.goal || "—"),
        h("dt", {}, "Backstory"),
        h("dd", {}, a.backstory || h("span", { class: "muted" }, "none given")),
        h("dt", {}, "Model"),
        h("dd", {}, a.llm ? `${a.llm}${a.model ? ` · ${a.model}` : ""}` : "—"),
        h("dt", {}, "Manager"),
        h("dd", {}, a.manager ? h("a", { href: `#agent/${encodeURIComponent(a.manager)}` }, `@${a.manager}`) : "nobody"),
        h("dt", {}, "Reports"),
        h("dd", {}, a.reports.length ? a.reports.flatMap((r, i) => [i ? ", " : "", h("a", { href: `#agent/${encodeURIComponent(r)}` }, `@${r}`)]) : "none"),
        h("dt", {}, "Holder"),
        h("dd", {}, a.holder ? [`${a.holder.node} · epoch ${a.holder.epoch} · since `, when(a.holder.since)] : "nobody holds this seat now"),
        h("dt", {}, "Tools"),
        h("dd", {}, toolsPart),
        h("dt", {}, "Turns"),
        h("dd", {}, t ? [`${count(t.turns)} · ${count(t.input_tokens)} tokens in / ${count(t.output_tokens)} out · last `, when(t.last_turn_at), t.last_outcome ? ` (${t.last_outcome})` : ""] : h("span", { class: "muted" }, a.holder ? `known on ${a.holder.node}` : "—")),
        h("dt", {}, "Last error"),
        h("dd", { class: t?.last_error ? "error" : "" }, t?.last_error ? [when(t.last_error_at), ` · ${t.last_error}`] : "none"),
      );
      const mine = work.filter((w) => w.assignee === handle && OPEN_WORK.has(w.status));
      const workRows = mine.map((w) => h("tr", {}, h("th", { scope: "row" }, h("a", { href: `#work/${encodeURIComponent(w.key)}` }, w.key)), h("td", {}, w.title), h("td", {}, w.status.replace("_", " ")), h("td", {}, when(w.updated_at ?? w.created_at))));
      const m = memory.memory;
      const memoryPart = !m
        ? h("p", { class: "muted" }, memory.state === "no_holder" ? "Nobody holds this seat, so nobody can read its memory now." : `Memory unavailable: ${memory.reason ?? memory.state}.`)
        : h(
            "div",
            {},
            h("h4", {}, "Diary"),
            m.diary.length ? h("ul", { class: "plain" }, m.diary.map((d) => h("li", {}, when(d.created_at), ` · ${d.content}`))) : h("p", { class: "muted" }, "Nothing noted yet."),
            h("h4", {}, "Episodes"),
            m.episodes.length
              ? h("ul", { class: "plain" }, [...m.episodes].sort((x, y) => y.created_at - x.created_at).map((e) => h("li", {}, when(e.created_at), ` · ${e.outcome}${e.counterparty ? ` · with ${e.counterparty}` : ""} · ${e.summary || "—"}`)))
              : h("p", { class: "muted" }, "No episodes yet."),
            h("h4", {}, "Counterparties"),
            m.counterparties.length
              ? h("ul", { class: "plain" }, m.counterparties.map((c) => h("li", {}, `${c.counterparty} · ${c.interactions} interaction${c.interactions === 1 ? "" : "s"} · last `, when(c.last_seen), c.note ? ` · ${c.note}` : "")))
              : h("p", { class: "muted" }, "Nobody yet."),
            h("h4", {}, "Skills"),
            // An older holder answers without skills: read as none.
            (m.skills ?? []).length
              ? h("ul", { class: "plain" }, m.skills.map((k) => h("li", {}, `${k.name} · ${k.state} · used ${k.uses} time${k.uses === 1 ? "" : "s"}${k.origin === "promoted" ? ` · from @${k.promoted_from}` : ""}`)))
              : h("p", { class: "muted" }, "No skills learned yet."),
          );
      const allTurns = turns.failed ? [] : [...turns.turns, ...olderTurns.filter((o) => !turns.turns.some((x) => x.id === o.id))];
      olderButton.hidden = turnsCursor === null;
      const turnsPart = turns.failed
        ? h("p", { class: "muted" }, `Turns unavailable: ${turns.failed}.`)
        : h(
            "div",
            {},
            table(`Recent turns of @${handle}, newest first`, ["When", "Outcome", "Trigger", "Rounds · tools", "Tokens", "Time"], turnRows(allTurns), turns.state === "no_holder" ? "Nobody holds this seat, so no turns can be read." : "No turns recorded on its holder yet."),
            olderBox,
            olderButton,
          );
      const budgetPart =
        budgets === null
          ? h("p", { class: "muted" }, "This node keeps no spend counters.")
          : budgets.failed
            ? h("p", { class: "muted" }, `Budgets unavailable: ${budgets.failed}.`)
            : table(`Budgets that hold @${handle}`, ["Scope", "Window", "Spent / cap", "Used", "Resets"], budgetRows(budgetsOf(budgets, handle)), "No cap holds this seat.");
      const historyPart = history.failed
        ? h("p", { class: "muted" }, `Holder history unavailable: ${history.failed}.`)
        : history.length
          ? h("ul", { class: "plain holder-history" }, history.map(holderLine))
          : h("p", { class: "muted" }, "No claims or releases in the events backlog.");
      runs.set(runList);
      headPart.replaceChildren(h("p", { class: "back" }, h("a", { href: "#org" }, "← Org chart")), h("h3", { class: "agent-name" }, a.name));
      factsPart.replaceChildren(facts);
      keepChildren(root, [headPart, controls, factsPart, runsHeading, runs.root, restPart]);
      restPart.replaceChildren(
        h("h3", {}, "Recent turns"),
        turnsPart,
        h("h3", {}, "Budgets"),
        budgetPart,
        h("h3", {}, "Placement and holder history"),
        h("p", {}, a.placement ? placementText(a.placement) : h("span", { class: "muted" }, "Any node with the seats role may hold it.")),
        historyPart,
        h("h3", {}, "Open work"),
        table(`Open work assigned to @${handle}`, ["Item", "Title", "Status", "Updated"], workRows, "No open work."),
        h("h3", {}, "Memory"),
        memoryPart,
      );
    },
  };
  return view;
}

function placementText(p) {
  const parts = [];
  if (p.node) parts.push(`pinned to node ${p.node}`);
  const labels = Object.entries(p.labels ?? {});
  if (labels.length) parts.push(`on nodes labelled ${labels.map(([k, v]) => `${k}=${v}`).join(", ")}`);
  return parts.length ? `Placement: ${parts.join("; ")}.` : "Any node with the seats role may hold it.";
}

registerView("agent", agentView);
