// ---- Events: the backlog and live, as sentences ------------------------------------------

/** Events per backlog page: a screenful or two. */
const EVENTS_PAGE = 50;
/** Events kept on screen (backlog pages and live); the oldest drop first. */
const EVENTS_KEPT_MAX = 1000;
/** Characters of one turn's live text kept on screen (the final text is in the reply). */
const LIVE_TEXT_KEPT_MAX = 8_000;

const EVENT_KINDS = [
  ["", "Any kind"],
  ["turn_started", "Turn started"],
  ["turn_completed", "Turn finished"],
  ["tool_called", "Tool used"],
  ["turn_failure_told", "Failure told"],
  ["turn_trigger_skipped", "Trigger skipped"],
  ["turn.guard_breach", "Guard broken"],
  ["seat_claimed", "Seat taken up"],
  ["seat_detached", "Seat let go"],
  ["turn_stop_requested", "Turn stopped"],
  ["budget_alert", "Budget alert"],
  ["budget_exhausted", "Budget exhausted"],
  ["provider_key_cooling", "Key cooling down"],
];
const EVENT_SINCE = [
  ["", "Any time (the last day)"],
  ["3600000", "The last hour"],
  ["21600000", "The last 6 hours"],
];

function eventsView() {
  const kind = h("select", { id: "events-kind" }, EVENT_KINDS.map(([v, t]) => h("option", { value: v }, t)));
  const seat = h("input", { id: "events-seat", autocomplete: "off", spellcheck: "false", placeholder: "any seat", size: "12" });
  const since = h("select", { id: "events-since" }, EVENT_SINCE.map(([v, t]) => h("option", { value: v }, t)));
  const filters = h(
    "form",
    { class: "filters", "aria-label": "Filter events" },
    h("label", {}, "Kind ", kind),
    h("label", {}, "Seat ", seat),
    h("label", {}, "Since ", since),
    h("button", { type: "submit" }, "Apply"),
  );
  const state = h("p", { class: "muted", role: "status" }, "Connecting…");
  const feed = h("ol", { class: "feed", "aria-label": "Events, newest first" });
  const older = h("button", { type: "button", hidden: true }, "Older events");
  const root = h("div", {}, h("p", {}, "What the company did: turns, tool calls, seats moving, budgets. Newest first; live while this page is open."), filters, state, feed, older);

  let next = null; // the backlog's next page (stream sequence), or null
  let seen = new Set(); // stream sequences on screen
  let seats = seatTracker();
  let loadedOnce = false;
  let gen = 0;

  function query() {
    const q = new URLSearchParams({ limit: String(EVENTS_PAGE) });
    if (kind.value) q.set("kind", kind.value);
    const s = seat.value.trim().replace(/^@/, "");
    if (s) q.set("seat", s);
    if (since.value) q.set("since", String(Date.now() - Number(since.value)));
    return q;
  }

  function matches(name, body) {
    if (kind.value && name !== kind.value) return false;
    const s = seat.value.trim().replace(/^@/, "");
    if (s && body.seat !== s && body.handle !== s) return false;
    return true;
  }

  function item(seq, name, body, before) {
    const said = describeEvent(name, body, before);
    return h(
      "li",
      { "data-seq": seq ?? "", "data-name": name, class: `ev ev-${said.level}` },
      when(body.at),
      " ",
      h("span", { class: "ev-text" }, said.text),
      h("details", {}, h("summary", {}, "Details"), h("ul", { class: "plain ev-details" }, details(body).map((l) => h("li", {}, l)))),
    );
  }

  function trim() {
    while (feed.children.length > EVENTS_KEPT_MAX) feed.lastElementChild.remove();
  }

  async function loadPage(reset) {
    const mine = ++gen;
    const q = query();
    if (!reset && next !== null) q.set("before", String(next));
    let page;
    try {
      page = await api(`/events?${q}`);
    } catch (err) {
      if (err instanceof AuthError) throw err;
      if (err.status === 404) {
        state.textContent = "This node keeps no event backlog.";
        return;
      }
      throw err;
    }
    if (mine !== gen) return;
    // Sentences need time order (a claim says who held the seat before it).
    const tracker = reset ? seats : seatTracker();
    const before = new Map();
    for (const e of [...page.events].reverse()) before.set(e.seq, tracker.observe(e.name, e.body));
    const items = page.events.filter((e) => !seen.has(e.seq)).map((e) => {
      seen.add(e.seq);
      return item(e.seq, e.name, e.body, before.get(e.seq));
    });
    feed.append(...items);
    if (reset && feed.children.length === 0) feed.append(h("li", { class: "muted empty" }, "No events match."));
    next = page.next;
    older.hidden = next === null;
    trim();
  }

  function onLive(name, data, id) {
    if (name === "ready") return;
    if (name === "dropped") {
      state.textContent = `Live (this view fell behind and skipped ${data} events).`;
      return;
    }
    let body;
    try {
      body = JSON.parse(data);
    } catch {
      body = { data };
    }
    const seq = id ? Number(id) : null;
    if (seq !== null && seen.has(seq)) return;
    const before = seats.observe(name, body);
    if (!matches(name, body)) return;
    feed.querySelector(".empty")?.remove();
    if (name === "turn_text" && typeof body.turn_id === "string") {
      // A streaming turn's text as it arrives: one growing line per turn.
      let line = [...feed.children].find((li) => li.dataset.turn === body.turn_id);
      if (!line) {
        line = h("li", { "data-turn": body.turn_id, class: "ev ev-info" }, when(body.at ?? Date.now()), " ", h("span", { class: "ev-text" }, `${body.seat} is writing: `), h("span", { class: "live-text" }));
        feed.prepend(line);
      }
      const span = line.querySelector(".live-text");
      if (span && span.textContent.length < LIVE_TEXT_KEPT_MAX) span.textContent += String(body.text ?? "");
      return;
    }
    if (seq !== null) seen.add(seq);
    feed.prepend(item(seq, name, body, before));
    trim();
  }

  const live = liveStream({
    path: () => "/events/stream",
    onFrame: onLive,
    onState(s, d) {
      if (s === "live") state.textContent = "Live.";
      else if (s === "connecting") state.textContent = "Connecting…";
      else if (s === "absent") state.textContent = "This node does not stream events.";
      else if (s === "retrying") state.textContent = `Disconnected (${d.error}); reconnecting in ${Math.ceil(d.wait_ms / 1000)} s…`;
    },
  });

  async function reset() {
    next = null;
    seen = new Set();
    seats = seatTracker();
    feed.replaceChildren();
    await loadPage(true);
  }

  filters.addEventListener("submit", (e) => {
    e.preventDefault();
    reset().catch(showError);
  });
  older.addEventListener("click", () => loadPage(false).catch(showError));
  function showError(err) {
    if (err instanceof AuthError) return signOut(err.message);
    state.textContent = `Could not read the backlog: ${err.message}.`;
  }

  return {
    title: "Events",
    root,
    live: true,
    async refresh() {
      live.start();
      if (!loadedOnce) {
        loadedOnce = true;
        await reset();
      }
    },
    pause: () => live.stop(),
    resume: () => live.start(),
    leave: () => live.stop(),
  };
}

registerView("events", eventsView);
