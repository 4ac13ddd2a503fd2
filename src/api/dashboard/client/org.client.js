// ---- Org chart -------------------------------------------------------------------------

function orgView() {
  const root = h("div");
  // Each agent seat's controls, kept across refreshes (an open "are you sure" survives).
  const controlsOf = new Map();
  return {
    title: "Org chart",
    root,
    async refresh() {
      const [org, { agents }, work, budgets] = await Promise.all([
        api("/org"),
        api("/agents"),
        readPages("/work", "after", undefined),
        readBudgets().catch((err) => {
          if (err instanceof AuthError) throw err;
          return null;
        }),
      ]);
      const agentOf = new Map(agents.map((a) => [a.handle, a]));
      const open = new Map();
      for (const w of work) if (w.assignee && OPEN_WORK.has(w.status)) open.set(w.assignee, (open.get(w.assignee) ?? 0) + 1);
      const seatOf = new Map(org.seats.map((s) => [s.handle, s]));
      const unitName = new Map(org.units.map((u) => [u.id, u]));
      const leads = new Map();
      for (const u of org.units) if (u.lead) leads.set(u.lead, [...(leads.get(u.lead) ?? []), u.name]);

      function card(s) {
        const agent = agentOf.get(s.handle);
        const st = seatState(s.kind === "human" ? null : agent);
        const n = open.get(s.handle) ?? 0;
        const units = s.units.map((id) => unitName.get(id)?.name ?? id);
        const body = [
          h("span", { class: "seat-name" }, s.name),
          h("span", { class: "seat-handle" }, `@${s.handle}`),
          h("span", { class: `seat-state st-${st.cls}` }, st.word),
          s.kind === "human" ? null : h("span", { class: "seat-line" }, agent?.holder ? `on ${agent.holder.node}` : "no holder"),
          h("span", { class: "seat-line" }, `${n} open work item${n === 1 ? "" : "s"}`),
          s.kind === "human" || !todaySpend(budgets, s.handle) ? null : h("span", { class: "seat-line spend-line" }, todaySpend(budgets, s.handle)),
          agent?.paused ? h("span", { class: "seat-line paused-line" }, `paused by ${agent.paused.by}`) : null,
          s.kind === "human" ? null : budgetBadge(budgets, s.handle),
          units.length || leads.has(s.handle)
            ? h("span", { class: "seat-units" }, [...(leads.get(s.handle) ?? []).map((u) => `leads ${u}`), ...units.filter((u) => !(leads.get(s.handle) ?? []).includes(u))].map((u) => h("span", { class: "chip" }, u)))
            : null,
        ];
        return s.kind === "human"
          ? h("div", { class: "seat-card human", "data-handle": s.handle }, body)
          : h("a", { class: `seat-card card-${st.cls}`, href: `#agent/${encodeURIComponent(s.handle)}`, "data-handle": s.handle }, body);
      }
      /** Pause / resume / stop beside an agent seat's card (never inside its link). */
      function controlsFor(s) {
        const agent = agentOf.get(s.handle);
        if (s.kind === "human" || !agent) return null;
        const key = JSON.stringify(agent.paused ?? null);
        const kept = controlsOf.get(s.handle);
        if (kept?.key === key) return kept.el;
        const el = seatControls(s.handle, agent.paused ?? null, refreshNow);
        controlsOf.set(s.handle, { key, el });
        return el;
      }
      // The tree follows `manages`; a report whose manager is not a seat stands at the top.
      // Nested lists that CSS lays out, not d3-hierarchy: the walk is these ten lines, and
      // d3's stratify wants one root and throws on a cycle, while its layouts compute x/y
      // coordinates a list that wraps at 390 px and reads as a list does not need.
      const seen = new Set();
      function branch(s, depth) {
        seen.add(s.handle);
        const reports = s.reports.map((r) => seatOf.get(r)).filter((r) => r && !seen.has(r.handle));
        // Bounded by the org's size: each seat is drawn once.
        return h("li", {}, card(s), controlsFor(s), reports.length && depth < org.seats.length ? h("ul", {}, reports.map((r) => branch(r, depth + 1))) : null);
      }
      const roots = org.seats.filter((s) => !s.manager || !seatOf.has(s.manager));
      const tree = h("ul", { class: "org-tree", "aria-label": `${org.company.name} by who manages whom` }, roots.map((s) => branch(s, 0)));
      const unitRows = org.units.map((u) =>
        h(
          "tr",
          {},
          h("th", { scope: "row" }, u.name),
          h("td", {}, u.lead ? h("a", { href: `#agent/${encodeURIComponent(u.lead)}` }, `@${u.lead}`) : h("span", { class: "muted" }, "none")),
          h("td", {}, chips(u.roles.map((r) => `@${r}`))),
          h("td", {}, u.channel ? `#${u.channel}` : "—"),
          h("td", {}, u.project ?? "—"),
        ),
      );
      root.replaceChildren(
        h("p", { class: "mission" }, h("strong", {}, org.company.name), ` — ${org.company.mission}`),
        tree,
        h("h3", {}, "Units"),
        table("Units and their leads", ["Unit", "Lead", "Members", "Channel", "Project"], unitRows, "This company has no units."),
      );
    },
  };
}

registerView("org", orgView);
