// ---- Fleet -----------------------------------------------------------------------------

function fleetView() {
  const root = h("div");
  // Paged: a fleet of many nodes holds thousands of seats.
  const nodes = pager("Nodes", (rows) => table("Nodes", ["Node", "Roles", "Labels", "Protocol", "Broker", "Seats held", "Presence expires", "State", "Deaf seats"], rows.map(nodeRow), "No live nodes."));
  const leasesList = pager("Seat leases", (rows) => table("Who holds each agent seat", ["Seat", "Held by", "Epoch", "Lease expires"], rows.map(leaseRow), "No seat is held."));
  function nodeRow(n) {
    return h(
      "tr",
      {},
      h("th", { scope: "row" }, n.id),
      h("td", {}, chips(n.roles)),
      h("td", {}, Object.keys(n.labels).length ? chips(Object.entries(n.labels).map(([k, v]) => `${k}=${v}`)) : h("span", { class: "muted" }, "none")),
      h("td", { class: "num" }, n.protocol),
      h("td", {}, n.broker ?? "—"),
      h("td", { class: "num" }, n.seats_held),
      h("td", { class: "num" }, `in ${seconds(n.expires_in_ms)}`),
      h("td", {}, n.withdrawn ? "withdrawn" : n.draining ? "draining" : n.behind ? "behind (catching up)" : "in service"),
      h("td", {}, n.seat_mailbox_deaf?.length ? chips(n.seat_mailbox_deaf.map((s) => `@${s}`)) : h("span", { class: "muted" }, "none")),
    );
  }
  function leaseRow(l) {
    return h(
      "tr",
      {},
      h("th", { scope: "row" }, `@${l.handle}`),
      h("td", {}, `${l.node} · since `, when(l.since)),
      h("td", { class: "num" }, l.epoch),
      h("td", { class: "num" }, `in ${seconds(l.expires_in_ms)}`),
    );
  }
  return {
    title: "Fleet",
    root,
    async refresh() {
      let fleet;
      try {
        fleet = await api("/fleet");
      } catch (err) {
        if (err.code !== "no_seat_host") throw err;
        root.replaceChildren(h("p", {}, "This node runs no seats role and keeps no fleet view. Open the dashboard of a node that does."));
        return;
      }
      const leases = [...fleet.leases].sort((a, b) => a.handle.localeCompare(b.handle));
      const duties = fleet.duties ?? [];
      const dutyRows = duties.map((d) =>
        h(
          "tr",
          {},
          h("th", { scope: "row" }, d.duty),
          h("td", {}, `${d.node} · since `, when(d.since)),
          h("td", {}, d.last_tick ? [when(d.last_tick.at), ` · ${d.last_tick.duration_ms} ms`] : "—"),
          h("td", {}, d.last_tick ? `${d.last_tick.outcome}${d.last_tick.detail ? `: ${d.last_tick.detail}` : ""}` : "—"),
          h("td", { class: "num" }, `in ${seconds(d.expires_in_ms)}`),
        ),
      );
      const holders = new Set(leases.map((l) => l.node)).size;
      nodes.set(fleet.nodes);
      leasesList.set(leases);
      root.replaceChildren(
        h("p", {}, `${fleet.nodes.length} node${fleet.nodes.length === 1 ? "" : "s"} live; ${leases.length} seat${leases.length === 1 ? "" : "s"} held on ${holders} node${holders === 1 ? "" : "s"}.`),
        nodes.root,
        h("h3", {}, "Seat leases"),
        leasesList.root,
        h("h3", {}, "Duties"),
        fleet.duties === null
          ? h("p", { class: "muted" }, "The duty leases could not be read just now.")
          : table("Who runs each singleton duty", ["Duty", "Held by", "Last tick", "Outcome", "Lease expires"], dutyRows, "No duty is held: no node with the workers role is running."),
        h("h3", {}, "Unplaceable seats"),
        fleet.unplaceable.length ? h("p", {}, chips(fleet.unplaceable.map((s) => `@${s}`))) : h("p", { class: "muted" }, "None: every seat has a node that may hold it."),
        h("h3", {}, "Roles nobody runs"),
        fleet.unmanned_roles.length ? h("p", {}, chips(fleet.unmanned_roles)) : h("p", { class: "muted" }, "None."),
      );
    },
  };
}

registerView("fleet", fleetView);
