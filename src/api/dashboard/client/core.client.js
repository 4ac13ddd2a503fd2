// Crewlet dashboard, run in the browser: the shared core. Plain JavaScript with no build
// step. It holds no data of its own; it asks the person for the API token once (kept in
// sessionStorage: this tab only, gone when it closes) and reads the same API every other
// client does. Everything shown is set as text, never as HTML, so nothing an agent writes
// can run here.
//
// LAYOUT (read this before adding a view)
// - The files in src/api/dashboard/client/ are concatenated, in the fixed order of PARTS in
//   src/api/dashboard/index.ts, into ONE module script served as
//   /dashboard/dashboard.<sha>.js (content-named, CSP script-src 'self'). No build step, no
//   imports between them: every top-level name is shared, so keep names distinct.
// - core.client.js (this file, first): constants, h(), dates (clock, relative, when),
//   api() and AuthError, readPages(), table()/chips(), authorField(), seat helpers shared
//   by the org chart and agent page (OPEN_WORK, seatState), the status line and refresh
//   loop, the view registry and routing (#name/arg → VIEWS[name](arg)), sign-in/out.
// - Shared parts without a view: live.client.js (SSE reader, pager, confirmButton),
//   seat-controls.client.js (pause/resume/stop, the paused marker, the budget badge,
//   readBudgets), runs.client.js (a seat's coding runs on the agent page, keepChildren),
//   files.client.js (an owner's files: list, upload, preview; on a work item's detail),
//   event-sentences.js and company-diff.js (pure, table-tested).
// - One file per view, each ending with registerView("name", makeView): today (the
//   landing page; its words in today-words.js, pure, table-tested), fleet, agents,
//   org, agent, turn (#turn/{handle}/{id}: a transcript), spend, chat, work, events, ops,
//   knowledge, approvals. A view is { title, root, refresh(), select?(arg), pause?(), resume?(),
//   leave?() }; refresh() is called every REFRESH_MS while shown. Note: DOM
//   replaceChildren() prints a null argument as "null" (h() skips null children).
// - boot.client.js (last): wires the sign-in form and hash routing and starts.
// To add a view: a new client/<name>.client.js calling registerView, its line in PARTS
// (before boot), and a tab link in page.html (<a href="#name" data-view="name">).

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

const $ = (id) => document.getElementById(id);

/**
 * Builds an element; strings become text nodes, functions under on* become listeners.
 * Written here, not preact + htm or lit: these fourteen lines are all the views need, since
 * each view rebuilds its DOM from the API on every refresh and keeps no component state.
 */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function pad2(n) {
  return String(n).padStart(2, "0");
}

/** "08:02" today, "3 Mar 08:02" earlier this year, "3 Mar 2025 08:02" before that. */
function clock(at) {
  if (at === null || at === undefined) return "—";
  const d = new Date(at);
  if (Number.isNaN(d.getTime())) return "—";
  const hm = `${pad2(d.getHours())}:${pad2(d.getMinutes())}`;
  const today = new Date();
  if (d.toDateString() === today.toDateString()) return hm;
  const year = d.getFullYear() === today.getFullYear() ? "" : ` ${d.getFullYear()}`;
  return `${d.getDate()} ${d.toLocaleString("en", { month: "short" })}${year} ${hm}`;
}

function seconds(ms) {
  if (typeof ms !== "number") return "—";
  return ms < 1000 ? "<1 s" : `${Math.round(ms / 1000)} s`;
}

function count(n) {
  return typeof n === "number" ? n.toLocaleString("en") : "—";
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
// ---- the API ---------------------------------------------------------------------------

/** The token is missing or was refused: the person must enter it (again). */
class AuthError extends Error {}

/**
 * One API call with the token. `init.body` is sent as JSON; `init.raw` (a Blob or File) as
 * itself with `init.type`; `init.as: "blob"` answers a success's bytes rather than JSON.
 */
async function api(path, init = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (!token) throw new AuthError("Enter the API token to continue.");
  const wait_ms = init.timeout_ms ?? REQUEST_TIMEOUT_MS;
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), wait_ms);
  const raw = init.raw !== undefined;
  const sends = raw || init.body !== undefined;
  let res;
  try {
    res = await fetch(path, {
      method: init.method ?? (sends ? "POST" : "GET"),
      headers: { authorization: `Bearer ${token}`, ...(raw ? { "content-type": init.type } : init.body === undefined ? {} : { "content-type": "application/json" }) },
      body: raw ? init.raw : init.body === undefined ? undefined : JSON.stringify(init.body),
      cache: "no-store",
      signal: abort.signal,
    });
  } catch {
    throw new Error(abort.signal.aborted ? `the node did not answer within ${wait_ms / 1000} s` : "cannot reach the node");
  } finally {
    clearTimeout(timer);
  }
  if (init.as === "blob" && res.ok) return res.blob();
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
// ---- lists -----------------------------------------------------------------------------

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

// ---- seats (the org chart and the agent page) ------------------------------------------

/** Work that is still someone's to do. */
const OPEN_WORK = new Set(["todo", "in_progress", "in_review"]);

/** A seat's state as its card shows it: a word, and the class that colours it. */
function seatState(agent) {
  if (!agent) return { word: "person", cls: "human" };
  if (agent.paused) return { word: "paused", cls: "paused" };
  if (!agent.holder) return { word: "unheld", cls: "unheld" };
  const t = agent.turns;
  if (!t) return { word: `on ${agent.turns_known_on}`, cls: "elsewhere" };
  if (t.busy) return { word: "working", cls: "working" };
  if (t.last_outcome === "failed" || t.last_outcome === "retry") return { word: "failing", cls: "failing" };
  return { word: "idle", cls: "idle" };
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

// ---- views, navigation, sign-in -------------------------------------------------------

/** Every view by its name in the hash; each view's file registers itself. */
const VIEWS = {};

function registerView(name, make) {
  VIEWS[name] = make;
}

function parseHash() {
  const [name, ...rest] = location.hash.replace(/^#/, "").split("/");
  const arg = rest.length ? decodeURIComponent(rest.join("/")) : null;
  // Today is the landing page: what waits on the person, what is stuck, what was done.
  return VIEWS[name] ? { name, arg } : { name: "today", arg: null };
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
