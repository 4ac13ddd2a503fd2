// ---- Agent page ------------------------------------------------------------------------

function agentView(arg) {
  let handle = arg;
  const root = h("div");
  const view = {
    title: `@${arg ?? "?"}`,
    root,
    select(next) {
      if (next && next !== handle) {
        handle = next;
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
      const [memory, work] = await Promise.all([
        api(`/agents/${encodeURIComponent(handle)}/memory`).catch((err) => {
          if (err instanceof AuthError) throw err;
          return { state: "unavailable", reason: err.message, memory: null };
        }),
        readPages("/work", "after", undefined),
      ]);
      const st = seatState(a);
      const t = a.turns;
      const facts = h(
        "dl",
        { class: "facts" },
        h("dt", {}, "State"),
        h("dd", {}, h("span", { class: `seat-state st-${st.cls}` }, st.word)),
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
        h("dd", {}, a.tools ? chips(a.tools) : h("span", { class: "muted" }, a.holder ? `known on ${a.holder.node}, its holder` : "known once a node holds the seat")),
        h("dt", {}, "MCP servers"),
        h("dd", {}, a.mcp_servers.length ? chips(a.mcp_servers) : "none"),
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
            h("h4", {}, "Counterparties"),
            m.counterparties.length
              ? h("ul", { class: "plain" }, m.counterparties.map((c) => h("li", {}, `${c.counterparty} · ${c.interactions} interaction${c.interactions === 1 ? "" : "s"} · last `, when(c.last_seen), c.note ? ` · ${c.note}` : "")))
              : h("p", { class: "muted" }, "Nobody yet."),
          );
      const episodes = m ? [...m.episodes].sort((x, y) => y.created_at - x.created_at) : [];
      const turnRows = episodes.map((e) => h("tr", {}, h("td", {}, when(e.created_at)), h("td", {}, e.outcome), h("td", {}, e.counterparty ?? "—"), h("td", {}, e.summary || "—"), h("td", {}, e.work_items.length ? chips(e.work_items) : "—")));
      root.replaceChildren(
        h("p", { class: "back" }, h("a", { href: "#org" }, "← Org chart")),
        h("h3", { class: "agent-name" }, a.name),
        facts,
        h("h3", {}, "Open work"),
        table(`Open work assigned to @${handle}`, ["Item", "Title", "Status", "Updated"], workRows, "No open work."),
        h("h3", {}, "Recent turns"),
        m ? table(`Recent turns of @${handle}`, ["When", "Outcome", "With", "Summary", "Work"], turnRows, "No turns remembered yet.") : h("p", { class: "muted" }, "Read from the seat's memory, which is unavailable now."),
        h("h3", {}, "Memory"),
        memoryPart,
      );
    },
  };
  return view;
}

registerView("agent", agentView);
