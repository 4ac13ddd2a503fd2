// Crewlet dashboard, run in the browser. Plain JavaScript with no build step: the node
// serves this file as it is. It holds no data of its own; it asks the person for the API
// token once (kept in sessionStorage: this tab only, gone when it closes) and reads the
// same API every other client does. Everything shown is set as text, never as HTML, so
// nothing an agent writes can run here.

const TOKEN_KEY = "crewlet.token";
const AUTHOR_KEY = "crewlet.author";
/** A person posting from the dashboard; the root company's human seat is @founder. */
const DEFAULT_AUTHOR = "founder";
/** Fresh enough to watch a turn land, light enough for a small box with a few viewers. */
const REFRESH_MS = 3000;
/** After failures the wait doubles up to this, so a node that is down is not hammered. */
const REFRESH_MAX_MS = 30000;
/** A node that does not answer within this is reported rather than waited on. */
const REQUEST_TIMEOUT_MS = 10000;
/** The API's own page ceiling for lists (work, messages). */
const PAGE_LIMIT = 500;
/** Pages read per list per refresh: a bound on one refresh's work, 10k rows at most. */
const PAGES_MAX = 20;
/** Messages kept per channel: a screenful of history many times over; older ones drop. */
const MESSAGES_KEPT_MAX = 1000;
/** How the engine's failure notices begin (src/agent/notice.ts NOTICE_PREFIX). */
const NOTICE_PREFIX = "⚠ ";
/** Characters of one turn's live text kept on screen (the final text is in turn_completed). */
const LIVE_TEXT_KEPT_MAX = 8_000;
/** Live events kept on screen; the oldest drop first. */
const FEED_KEPT_MAX = 200;
/** Bytes of one event stream frame at most: a frame larger than this is not ours. */
const FRAME_MAX_BYTES = 256 * 1024;

const $ = (id) => document.getElementById(id);

/** Builds an element; strings become text nodes, functions under on* become listeners. */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function pad2(n) {
  return String(n).padStart(2, "0");
}

/** "08:02" today, "3 Mar 08:02" before. */
function clock(at) {
  if (at === null || at === undefined) return "—";
  const d = new Date(at);
  if (Number.isNaN(d.getTime())) return "—";
  const hm = `${pad2(d.getHours())}:${pad2(d.getMinutes())}`;
  const today = new Date();
  if (d.toDateString() === today.toDateString()) return hm;
  return `${d.getDate()} ${d.toLocaleString("en", { month: "short" })} ${hm}`;
}

function seconds(ms) {
  if (typeof ms !== "number") return "—";
  return ms < 1000 ? "<1 s" : `${Math.round(ms / 1000)} s`;
}

function count(n) {
  return typeof n === "number" ? n.toLocaleString("en") : "—";
}

// ---- the API ---------------------------------------------------------------------------

/** The token is missing or was refused: the person must enter it (again). */
class AuthError extends Error {}

async function api(path, init = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (!token) throw new AuthError("Enter the API token to continue.");
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), REQUEST_TIMEOUT_MS);
  let res;
  try {
    res = await fetch(path, {
      method: init.method ?? (init.body === undefined ? "GET" : "POST"),
      headers: { authorization: `Bearer ${token}`, ...(init.body === undefined ? {} : { "content-type": "application/json" }) },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
      cache: "no-store",
      signal: abort.signal,
    });
  } catch {
    throw new Error(abort.signal.aborted ? `the node did not answer within ${REQUEST_TIMEOUT_MS / 1000} s` : "cannot reach the node");
  } finally {
    clearTimeout(timer);
  }
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (res.status === 401) throw new AuthError("That token was not accepted (401 unauthorized). Check it and enter it again.");
  if (!res.ok) {
    const err = new Error(json?.error?.message ?? `${res.status} ${res.statusText}`);
    err.status = res.status;
    err.code = json?.error?.code;
    throw err;
  }
  return json;
}

// ---- status line and refresh loop ------------------------------------------------------

function setStatus(text, isError = false) {
  const s = $("status");
  s.textContent = text;
  s.classList.toggle("error", isError);
}

let current = null; // { name, view }
let generation = 0;
let timer = null;
let inFlight = false;
let failures = 0;

function schedule(delay_ms) {
  clearTimeout(timer);
  timer = null;
  if (!current || document.hidden || !sessionStorage.getItem(TOKEN_KEY)) return;
  timer = setTimeout(tick, delay_ms);
}

function refreshNow() {
  schedule(0);
}

async function tick() {
  if (inFlight || !current) return;
  inFlight = true;
  const gen = generation;
  try {
    await current.view.refresh();
    failures = 0;
    setStatus("");
    $("refreshed").textContent = `Updated ${new Date().toLocaleTimeString("en-GB")}`;
  } catch (err) {
    if (err instanceof AuthError) {
      inFlight = false;
      signOut(err.message);
      return;
    }
    failures = Math.min(failures + 1, 8);
    setStatus(`Could not refresh: ${err.message}. Trying again shortly.`, true);
  } finally {
    inFlight = false;
  }
  // A view switched mid-refresh gets its first refresh at once.
  schedule(gen !== generation ? 0 : Math.min(REFRESH_MS * 2 ** failures, REFRESH_MAX_MS));
}

document.addEventListener("visibilitychange", () => {
  if (document.hidden) {
    clearTimeout(timer);
    timer = null;
    current?.view.pause?.();
  } else {
    current?.view.resume?.();
    refreshNow();
  }
});

// ---- Fleet -----------------------------------------------------------------------------

function table(caption, headers, rows, empty) {
  if (rows.length === 0) return h("p", { class: "muted" }, empty);
  // A wide table scrolls in its own box on a narrow screen rather than widening the page.
  return h(
    "div",
    { class: "table-wrap" },
    h("table", {}, h("caption", {}, caption), h("thead", {}, h("tr", {}, headers.map((t) => h("th", { scope: "col" }, t)))), h("tbody", {}, rows)),
  );
}

function chips(values) {
  return values.map((v) => h("span", { class: "chip" }, v));
}

function fleetView() {
  const root = h("div");
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
      const nodeRows = fleet.nodes.map((n) =>
        h(
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
        ),
      );
      const leaseRows = leases.map((l) =>
        h(
          "tr",
          {},
          h("th", { scope: "row" }, `@${l.handle}`),
          h("td", {}, `${l.node} · since ${clock(l.since)}`),
          h("td", { class: "num" }, l.epoch),
          h("td", { class: "num" }, `in ${seconds(l.expires_in_ms)}`),
        ),
      );
      const duties = fleet.duties ?? [];
      const dutyRows = duties.map((d) =>
        h(
          "tr",
          {},
          h("th", { scope: "row" }, d.duty),
          h("td", {}, `${d.node} · since ${clock(d.since)}`),
          h("td", {}, d.last_tick ? `${clock(d.last_tick.at)} · ${d.last_tick.duration_ms} ms` : "—"),
          h("td", {}, d.last_tick ? `${d.last_tick.outcome}${d.last_tick.detail ? `: ${d.last_tick.detail}` : ""}` : "—"),
          h("td", { class: "num" }, `in ${seconds(d.expires_in_ms)}`),
        ),
      );
      const holders = new Set(leases.map((l) => l.node)).size;
      root.replaceChildren(
        h("p", {}, `${fleet.nodes.length} node${fleet.nodes.length === 1 ? "" : "s"} live; ${leases.length} seat${leases.length === 1 ? "" : "s"} held on ${holders} node${holders === 1 ? "" : "s"}.`),
        table("Nodes", ["Node", "Roles", "Labels", "Protocol", "Broker", "Seats held", "Presence expires", "State", "Deaf seats"], nodeRows, "No live nodes."),
        h("h3", {}, "Seat leases"),
        table("Who holds each agent seat", ["Seat", "Held by", "Epoch", "Lease expires"], leaseRows, "No seat is held."),
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

// ---- Agents ----------------------------------------------------------------------------

function agentsView() {
  const root = h("div");
  return {
    title: "Agents",
    root,
    async refresh() {
      const { agents } = await api("/agents");
      const rows = agents.map((a) => {
        const t = a.turns;
        const state = !a.holder
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
          h("td", {}, a.holder ? `${a.holder.node} · since ${clock(a.holder.since)} · epoch ${a.holder.epoch}` : "nobody"),
          h("td", {}, state),
          h("td", { class: "num" }, t ? count(t.turns) : "—"),
          h("td", {}, t?.last_turn_at ? `${clock(t.last_turn_at)} · ${t.last_outcome ?? "?"}` : "—"),
          h("td", { class: t?.last_error ? "error" : "muted" }, t?.last_error ? `${t.last_error_at ? `${clock(t.last_error_at)} · ` : ""}${t.last_error}` : "—"),
          h("td", { class: "num" }, t ? `${count(t.input_tokens)} in / ${count(t.output_tokens)} out` : "—"),
        );
      });
      root.replaceChildren(
        table("Agent seats", ["Seat", "Holder", "State", "Turns", "Last turn", "Last error", "Tokens"], rows, "This company has no agent seats."),
        h("p", { class: "muted" }, "Turn figures come from the node holding each seat; a seat held elsewhere shows that node's name."),
      );
    },
  };
}

// ---- dates -----------------------------------------------------------------------------

/** "just now", "5 min ago", "3 h ago", "2 d ago" (or "in …" ahead). */
function relative(ms, now = Date.now()) {
  const d = Math.round((now - ms) / 1000);
  const ahead = d < 0;
  const s = Math.abs(d);
  const words = s < 45 ? null : s < 3600 ? `${Math.round(s / 60)} min` : s < 86400 ? `${Math.round(s / 3600)} h` : `${Math.round(s / 86400)} d`;
  if (words === null) return "just now";
  return ahead ? `in ${words}` : `${words} ago`;
}

/** A time as a person reads it: relative in the text, the absolute date and time on hover. */
function when(at) {
  if (at === null || at === undefined) return h("span", { class: "muted" }, "—");
  const d = new Date(at);
  if (Number.isNaN(d.getTime())) return h("span", { class: "muted" }, "—");
  const absolute = d.toLocaleString("en-GB", { weekday: "short", day: "numeric", month: "short", year: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" });
  return h("time", { datetime: d.toISOString(), title: absolute }, relative(d.getTime()));
}

// ---- Org chart -------------------------------------------------------------------------

/** Work that is still someone's to do. */
const OPEN_WORK = new Set(["todo", "in_progress", "in_review"]);

/** A seat's state as its card shows it: a word, and the class that colours it. */
function seatState(agent) {
  if (!agent) return { word: "person", cls: "human" };
  if (!agent.holder) return { word: "unheld", cls: "unheld" };
  const t = agent.turns;
  if (!t) return { word: `on ${agent.turns_known_on}`, cls: "elsewhere" };
  if (t.busy) return { word: "working", cls: "working" };
  if (t.last_outcome === "failed" || t.last_outcome === "retry") return { word: "failing", cls: "failing" };
  return { word: "idle", cls: "idle" };
}

function orgView() {
  const root = h("div");
  return {
    title: "Org chart",
    root,
    async refresh() {
      const [org, { agents }, work] = await Promise.all([api("/org"), api("/agents"), readPages("/work", "after", undefined)]);
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
          units.length || leads.has(s.handle)
            ? h("span", { class: "seat-units" }, [...(leads.get(s.handle) ?? []).map((u) => `leads ${u}`), ...units.filter((u) => !(leads.get(s.handle) ?? []).includes(u))].map((u) => h("span", { class: "chip" }, u)))
            : null,
        ];
        return s.kind === "human"
          ? h("div", { class: "seat-card human", "data-handle": s.handle }, body)
          : h("a", { class: `seat-card card-${st.cls}`, href: `#agent/${encodeURIComponent(s.handle)}`, "data-handle": s.handle, "aria-label": `@${s.handle}, ${s.name}: ${st.word}, ${n} open work` }, body);
      }
      // The tree follows `manages`; a report whose manager is not a seat stands at the top.
      const seen = new Set();
      function branch(s, depth) {
        seen.add(s.handle);
        const reports = s.reports.map((r) => seatOf.get(r)).filter((r) => r && !seen.has(r.handle));
        // Bounded by the org's size: each seat is drawn once.
        return h("li", {}, card(s), reports.length && depth < org.seats.length ? h("ul", {}, reports.map((r) => branch(r, depth + 1))) : null);
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

// ---- Chat ------------------------------------------------------------------------------

/** Reads a list page by page (cursor: the last position seen), at most PAGES_MAX pages. */
async function readPages(path, cursorParam, cursor) {
  const out = [];
  let next = cursor;
  for (let page = 0; page < PAGES_MAX; page++) {
    const q = new URLSearchParams({ limit: String(PAGE_LIMIT) });
    if (next !== undefined && next !== null) q.set(cursorParam, String(next));
    const got = await api(`${path}?${q}`);
    const rows = got.messages ?? got.items ?? [];
    out.push(...rows);
    if (got.next === null || rows.length === 0) break;
    next = got.next;
  }
  return out;
}

function authorField(id) {
  const input = h("input", { id, name: "author", autocomplete: "off", spellcheck: "false", required: true, value: sessionStorage.getItem(AUTHOR_KEY) ?? DEFAULT_AUTHOR });
  input.addEventListener("change", () => sessionStorage.setItem(AUTHOR_KEY, input.value.trim()));
  return input;
}

function chatView(arg) {
  let channelId = arg || null;
  let channelsKey = "";
  let replyTo = null; // message being answered in its thread
  const byChannel = new Map(); // id → { messages, cursor }
  const channelList = h("ul");
  const heading = h("h3", { id: "channel-title" });
  const list = h("ul", { class: "messages", "aria-labelledby": "channel-title", "aria-live": "polite", "aria-relevant": "additions" });
  const author = authorField("chat-author");
  const body = h("textarea", { id: "chat-body", name: "body", required: true, maxlength: "32768" });
  const replyNote = h("p", { class: "muted", hidden: true });
  const error = h("p", { class: "error", role: "alert" });
  const form = h(
    "form",
    { class: "card composer", "aria-label": "Post to this channel" },
    h("div", { class: "row" }, h("div", {}, h("label", { for: "chat-author" }, "Post as"), author), h("div", {}, h("label", { for: "chat-body" }, "Message"), body)),
    replyNote,
    h("button", { type: "submit" }, "Post"),
    error,
  );
  const root = h("div", { class: "cols" }, h("nav", { class: "channels", "aria-label": "Channels" }, channelList), h("div", {}, heading, list, form));

  function setReply(message) {
    replyTo = message;
    replyNote.replaceChildren();
    replyNote.hidden = !message;
    if (message) {
      replyNote.append(`Replying in the thread of ${message.author}: “${message.body.slice(0, 60)}${message.body.length > 60 ? "…" : ""}”`, h("button", { type: "button", class: "link", onclick: () => setReply(null) }, "Cancel reply"));
      body.focus();
    }
  }

  body.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit();
  });

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.textContent = "";
    if (!channelId) return;
    const who = author.value.trim();
    sessionStorage.setItem(AUTHOR_KEY, who);
    try {
      await api(`/chat/channels/${encodeURIComponent(channelId)}/messages`, { body: { body: body.value, author: who, thread_parent: replyTo?.id ?? null } });
      body.value = "";
      setReply(null);
      refreshNow();
    } catch (err) {
      if (err instanceof AuthError) return signOut(err.message);
      error.textContent = `Not posted: ${err.message}`;
    }
  });

  function renderMessage(m, replies) {
    // A reply the engine posted because a turn gave up on this message (src/agent/notice.ts
    // starts every such notice with NOTICE_PREFIX) marks the message failed.
    const failed = (replies ?? []).some((r) => !r.deleted && r.author !== m.author && r.body.startsWith(NOTICE_PREFIX));
    const notice = !replies && m.body.startsWith(NOTICE_PREFIX);
    const item = h(
      "li",
      { "data-id": m.id, class: failed ? "msg-failed" : notice ? "msg-notice" : "" },
      h("div", { class: "msg-head" }, h("strong", {}, m.author), ` · ${clock(m.created_at)}`, m.edited_at ? " · edited" : "", failed ? h("span", { class: "error" }, " · failed: not answered") : ""),
      h("p", { class: "msg-body" }, m.deleted ? "(deleted)" : m.body),
    );
    if (replies) {
      if (replies.length) item.append(h("ul", { class: "thread", "aria-label": `Thread of ${m.author}'s message` }, replies.map((r) => renderMessage(r, null))));
      item.append(h("button", { type: "button", class: "link", onclick: () => setReply(m) }, replies.length ? `Reply in thread (${replies.length})` : "Reply in thread"));
    }
    return item;
  }

  function renderMessages(state) {
    const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
    const ids = new Set(state.messages.map((m) => m.id));
    const replies = new Map();
    const top = [];
    for (const m of state.messages) {
      // A reply whose parent has scrolled out of what is kept stands on its own.
      if (m.thread_parent && ids.has(m.thread_parent)) {
        if (!replies.has(m.thread_parent)) replies.set(m.thread_parent, []);
        replies.get(m.thread_parent).push(m);
      } else top.push(m);
    }
    list.replaceChildren(...(top.length ? top.map((m) => renderMessage(m, replies.get(m.id) ?? [])) : [h("li", { class: "muted" }, "No messages yet.")]));
    if (atBottom) list.scrollTop = list.scrollHeight;
  }

  return {
    title: "Chat",
    root,
    select(arg) {
      if (arg && arg !== channelId) {
        channelId = arg;
        setReply(null);
        channelsKey = "";
      }
    },
    async refresh() {
      const { channels } = await api("/chat/channels");
      if (!channelId || !channels.some((c) => c.id === channelId)) channelId = (channels.find((c) => c.id === "general") ?? channels[0])?.id ?? null;
      const key = JSON.stringify([channelId, channels.map((c) => c.id)]);
      if (key !== channelsKey) {
        channelsKey = key;
        channelList.replaceChildren(
          ...channels.map((c) => h("li", {}, h("a", { href: `#chat/${encodeURIComponent(c.id)}`, "aria-current": c.id === channelId ? "true" : undefined }, c.kind === "dm" ? c.name : `#${c.name}`))),
        );
      }
      if (!channelId) {
        heading.textContent = "No channels";
        form.hidden = true;
        return;
      }
      form.hidden = false;
      const channel = channels.find((c) => c.id === channelId);
      heading.textContent = channel.kind === "dm" ? channel.name : `#${channel.name}`;
      let state = byChannel.get(channelId);
      const fresh = !state;
      state ??= { messages: [], cursor: undefined };
      const got = await readPages(`/chat/channels/${encodeURIComponent(channelId)}/messages`, "cursor", state.cursor);
      if (got.length) {
        state.messages.push(...got);
        state.cursor = got[got.length - 1].position;
        if (state.messages.length > MESSAGES_KEPT_MAX) state.messages.splice(0, state.messages.length - MESSAGES_KEPT_MAX);
      }
      byChannel.set(channelId, state);
      if (fresh || got.length || list.dataset.channel !== channelId) {
        list.dataset.channel = channelId;
        renderMessages(state);
      }
    },
  };
}

// ---- Work ------------------------------------------------------------------------------

function workView(arg) {
  let selected = arg || null;
  let items = [];
  const project = h("select", { id: "work-project" }, h("option", { value: "" }, "All"));
  const status = h("select", { id: "work-status" }, h("option", { value: "" }, "Any"));
  const listBox = h("div");
  const detail = h("section", { class: "card detail", "aria-labelledby": "work-detail-title", hidden: true });
  const root = h("div", {}, h("div", { class: "filters" }, h("label", {}, "Project ", project), h("label", {}, "Status ", status)), listBox, detail);
  project.addEventListener("change", () => renderList());
  status.addEventListener("change", () => renderList());

  // The comment form is built once per item, so a refresh never wipes what is being typed.
  let detailKey = null;
  const detailParts = {};
  function buildDetail(key) {
    detailKey = key;
    const author = authorField("work-author");
    const body = h("textarea", { id: "work-comment", required: true });
    const error = h("p", { class: "error", role: "alert" });
    const form = h("form", { "aria-label": `Comment on ${key}` }, h("label", { for: "work-author" }, "Comment as"), author, h("label", { for: "work-comment" }, "Comment"), body, h("button", { type: "submit" }, "Add comment"), error);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      error.textContent = "";
      sessionStorage.setItem(AUTHOR_KEY, author.value.trim());
      try {
        await api(`/work/${encodeURIComponent(key)}/comments`, { body: { body: body.value, author: author.value.trim() } });
        body.value = "";
        refreshNow();
      } catch (err) {
        if (err instanceof AuthError) return signOut(err.message);
        error.textContent = `Not added: ${err.message}`;
      }
    });
    detailParts.title = h("h3", { id: "work-detail-title" });
    detailParts.fields = h("p");
    detailParts.body = h("p", { class: "body" });
    detailParts.comments = h("ul", { class: "comments", "aria-label": "Comments" });
    detail.replaceChildren(detailParts.title, detailParts.fields, detailParts.body, h("h4", {}, "Comments"), detailParts.comments, form, h("p", {}, h("a", { href: "#work" }, "Close")));
    detail.hidden = false;
  }

  /** A filter offers the values the items have; rebuilt only when those change. */
  function syncOptions(select, values, anyLabel) {
    const chosen = select.value;
    if (JSON.stringify(values) === JSON.stringify([...select.options].slice(1).map((o) => o.value))) return;
    select.replaceChildren(h("option", { value: "" }, anyLabel), values.map((v) => h("option", { value: v }, v.replace("_", " "))));
    select.value = values.includes(chosen) ? chosen : "";
  }

  function renderList() {
    syncOptions(project, [...new Set(items.map((w) => w.project))].sort(), "All");
    syncOptions(status, [...new Set(items.map((w) => w.status))].sort(), "Any");
    const shown = items
      .filter((w) => (!project.value || w.project === project.value) && (!status.value || w.status === status.value))
      .sort((a, b) => b.updated_at - a.updated_at);
    const rows = shown.map((w) =>
      h(
        "tr",
        { "aria-current": w.key === selected ? "true" : undefined },
        h("th", { scope: "row" }, h("a", { href: `#work/${encodeURIComponent(w.key)}` }, w.key)),
        h("td", {}, w.title),
        h("td", { class: `state-${w.status}` }, w.status.replace("_", " ")),
        h("td", {}, w.assignee ? `@${w.assignee}` : h("span", { class: "muted" }, "unassigned")),
        h("td", {}, w.priority),
        h("td", {}, clock(w.updated_at)),
      ),
    );
    listBox.replaceChildren(table(`${shown.length} of ${items.length} work items, latest change first`, ["Key", "Title", "Status", "Assignee", "Priority", "Updated"], rows, items.length ? "No work item matches these filters." : "No work items yet."));
  }

  return {
    title: "Work",
    root,
    select(arg) {
      selected = arg || null;
    },
    async refresh() {
      items = await readPages("/work", "after", undefined);
      renderList();
      if (!selected) {
        detail.hidden = true;
        detailKey = null;
        return;
      }
      let got;
      try {
        got = await api(`/work/${encodeURIComponent(selected)}`);
      } catch (err) {
        if (err.status !== 404 && err.status !== 400) throw err;
        detail.hidden = false;
        detailKey = null;
        detail.replaceChildren(h("p", { class: "error" }, `No work item ${selected}.`));
        return;
      }
      if (detailKey !== selected) buildDetail(selected);
      const w = got.item;
      detailParts.title.textContent = `${w.key} · ${w.title}`;
      detailParts.fields.replaceChildren(
        ...chips([w.status.replace("_", " "), w.assignee ? `@${w.assignee}` : "unassigned", `priority ${w.priority}`, w.type, `reported by ${w.reporter}`, ...w.labels]),
      );
      detailParts.body.textContent = w.body || "(no description)";
      detailParts.comments.replaceChildren(
        ...(got.comments.length
          ? got.comments.map((c) => h("li", {}, h("div", { class: "msg-head" }, h("strong", {}, c.author), ` · ${clock(c.created_at)}`), h("p", { class: "msg-body" }, c.body)))
          : [h("li", { class: "muted" }, "No comments yet.")]),
      );
    },
  };
}

// ---- Events (live, server-sent) ---------------------------------------------------------

/** Splits a server-sent event stream into {event, data} frames. */
function sseFrames(onFrame) {
  let buffer = "";
  return (chunk) => {
    buffer += chunk;
    if (buffer.length > FRAME_MAX_BYTES) buffer = buffer.slice(-FRAME_MAX_BYTES);
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const raw = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      const data = [];
      for (const line of raw.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      if (data.length) onFrame(event, data.join("\n"));
    }
  };
}

function eventsView() {
  const feed = h("ol", { class: "feed", "aria-live": "off" });
  const state = h("p", { class: "muted" }, "Connecting…");
  const root = h("div", {}, h("p", {}, "Engine events as they happen (turns, tool calls, seat changes); newest first."), state, feed);
  let abort = null;
  let retries = 0;

  function add(name, data) {
    let fields = {};
    try {
      fields = JSON.parse(data);
    } catch {
      fields = { data };
    }
    const { event: _e, at, ...rest } = fields;
    const who = rest.seat ?? rest.handle ?? "";
    if (name === "turn_text" && typeof rest.turn_id === "string") {
      // A streaming turn's text as it arrives: one growing line per turn.
      let line = [...feed.children].find((li) => li.dataset.turn === rest.turn_id);
      if (!line) {
        line = h("li", { "data-turn": rest.turn_id }, `${clock(at ?? Date.now())} turn_text @${who} `, h("span", { class: "live-text" }));
        feed.prepend(line);
      }
      const span = line.querySelector(".live-text");
      if (span && span.textContent.length < LIVE_TEXT_KEPT_MAX) span.textContent += String(rest.text ?? "");
      while (feed.children.length > FEED_KEPT_MAX) feed.lastElementChild.remove();
      return;
    }
    const summary = Object.entries(rest)
      .filter(([k]) => k !== "seat" && k !== "handle")
      .slice(0, 6)
      .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`)
      .join(" ");
    feed.prepend(h("li", {}, `${clock(at ?? Date.now())} ${name}${who ? ` @${who}` : ""} ${summary}`));
    while (feed.children.length > FEED_KEPT_MAX) feed.lastElementChild.remove();
  }

  async function run() {
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (!token || abort) return;
    abort = new AbortController();
    const mine = abort;
    try {
      const res = await fetch("/events/stream", { headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" }, cache: "no-store", signal: mine.signal });
      if (res.status === 401) return signOut("That token was not accepted (401 unauthorized). Check it and enter it again.");
      if (res.status === 404) {
        state.textContent = "This node does not stream events.";
        return;
      }
      if (!res.ok || !res.body) throw new Error(`${res.status} ${res.statusText}`);
      state.textContent = "Connected.";
      retries = 0;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      const feedChunk = sseFrames((event, data) => {
        if (event === "ready") state.textContent = "Live.";
        else if (event === "dropped") state.textContent = `Live (this view fell behind and skipped ${data} events).`;
        else add(event, data);
      });
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        feedChunk(value);
      }
      throw new Error("the stream ended");
    } catch (err) {
      if (mine.signal.aborted) return;
      retries = Math.min(retries + 1, 5);
      state.textContent = `Disconnected (${err.message}); reconnecting…`;
      setTimeout(() => {
        if (abort === mine) {
          abort = null;
          if (!document.hidden && current?.view === view) void run();
        }
      }, Math.min(REFRESH_MS * 2 ** retries, REFRESH_MAX_MS));
      return;
    }
  }

  function stop() {
    abort?.abort();
    abort = null;
  }

  const view = {
    title: "Events",
    root,
    async refresh() {
      if (!abort) void run();
    },
    pause: stop,
    resume() {
      void run();
    },
    leave: stop,
  };
  return view;
}

// ---- views, navigation, sign-in -------------------------------------------------------

const VIEWS = { org: orgView, agent: agentView, fleet: fleetView, agents: agentsView, chat: chatView, work: workView, events: eventsView };

function parseHash() {
  const [name, ...rest] = location.hash.replace(/^#/, "").split("/");
  const arg = rest.length ? decodeURIComponent(rest.join("/")) : null;
  return VIEWS[name] ? { name, arg } : { name: "org", arg: null };
}

function show() {
  if (!sessionStorage.getItem(TOKEN_KEY)) return;
  const { name, arg } = parseHash();
  if (current?.name === name) {
    current.view.select?.(arg);
    refreshNow();
    return;
  }
  current?.view.leave?.();
  generation++;
  failures = 0;
  const view = VIEWS[name](arg);
  current = { name, view };
  for (const a of document.querySelectorAll("#tabs a")) {
    if (a.dataset.view === name) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  $("view-title").textContent = view.title;
  document.title = `${view.title} · Crewlet`;
  $("view-body").replaceChildren(view.root);
  refreshNow();
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  current?.view.leave?.();
  current = null;
  clearTimeout(timer);
  timer = null;
  $("view").hidden = true;
  $("tabs").hidden = true;
  $("signout").hidden = true;
  $("refreshed").textContent = "";
  setStatus("");
  $("login").hidden = false;
  $("login-error").textContent = message ?? "";
  $("token").value = "";
  $("token").focus();
}

function signedIn() {
  $("login").hidden = true;
  $("login-error").textContent = "";
  $("view").hidden = false;
  $("tabs").hidden = false;
  $("signout").hidden = false;
  show();
}

async function describeNode() {
  try {
    const res = await fetch("/health", { cache: "no-store" });
    const hl = await res.json();
    $("node").textContent = `node ${hl.node} · v${hl.version} · ${hl.roles.join(", ")}`;
  } catch {
    $("node").textContent = "";
  }
}

$("login").addEventListener("submit", async (e) => {
  e.preventDefault();
  const token = $("token").value.trim();
  if (!token) return;
  $("login-error").textContent = "Checking…";
  sessionStorage.setItem(TOKEN_KEY, token);
  try {
    // Any read the dashboard needs proves the token; /agents needs the same grant as every view.
    await api("/agents");
  } catch (err) {
    sessionStorage.removeItem(TOKEN_KEY);
    $("login-error").textContent =
      err instanceof AuthError ? err.message : err.status === 403 ? `That token may not read this node's state: ${err.message}.` : `Could not check the token: ${err.message}.`;
    $("token").focus();
    return;
  }
  $("token").value = "";
  signedIn();
  $("main").focus();
});

$("signout").addEventListener("click", () => signOut("Token forgotten in this tab."));
window.addEventListener("hashchange", show);

void describeNode();
if (sessionStorage.getItem(TOKEN_KEY)) signedIn();
else signOut("");
