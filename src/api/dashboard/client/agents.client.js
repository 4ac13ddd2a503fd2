// ---- Agents ----------------------------------------------------------------------------

function agentsView() {
  // Paged: a company may have hundreds of seats.
  const list = pager("Agent seats", (rows) =>
    table("Agent seats", ["Seat", "Holder", "State", "Turns", "Last turn", "Last error", "Tokens"], rows.map(agentRow), "This company has no agent seats."),
  );
  const root = h("div", {}, list.root, h("p", { class: "muted" }, "Turn figures come from the node holding each seat; a seat held elsewhere shows that node's name."));
  function agentRow(a) {
    const t = a.turns;
    const state = a.paused
      ? pausedMarker(a.paused)
      : !a.holder
      ? h("span", { class: "muted" }, "unheld")
      : !t
        ? h("span", { class: "muted" }, `see ${a.turns_known_on}`)
        : t.busy
          ? h("span", { class: "busy" }, "busy")
          : h("span", { class: "idle" }, "idle");
    return h(
      "tr",
      {},
      h("th", { scope: "row" }, `@${a.handle}`, h("br"), h("span", { class: "muted" }, a.name)),
      h("td", {}, a.holder ? [`${a.holder.node} · since `, when(a.holder.since), ` · epoch ${a.holder.epoch}`] : "nobody"),
      h("td", {}, state),
      h("td", { class: "num" }, t ? count(t.turns) : "—"),
      h("td", {}, t?.last_turn_at ? [when(t.last_turn_at), ` · ${t.last_outcome ?? "?"}`] : "—"),
      h("td", { class: t?.last_error ? "error" : "muted" }, t?.last_error ? [t.last_error_at ? [when(t.last_error_at), " · "] : "", t.last_error] : "—"),
      h("td", { class: "num" }, t ? `${count(t.input_tokens)} in / ${count(t.output_tokens)} out` : "—"),
    );
  }
  return {
    title: "Agents",
    root,
    async refresh() {
      const { agents } = await api("/agents");
      list.set(agents);
    },
  };
}

registerView("agents", agentsView);
