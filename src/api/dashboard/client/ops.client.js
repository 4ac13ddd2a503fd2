// ---- Operations: config revisions, schedules, dead letters, audit ---------------------------

const OPS_SECTIONS = [
  ["config", "Config revisions"],
  ["schedules", "Schedules"],
  ["deadletters", "Dead letters"],
  ["audit", "Audit log"],
];
/** Audit entries per page (the API's ceiling is higher). */
const AUDIT_PAGE = 50;
/** How often a shown section is read again: these change by a person's hand (each action
 * here re-reads at once), and listing dead letters costs the node one read per letter (up
 * to 1,000), too much for the 3 s refresh. */
const OPS_REFRESH_MS = 15_000;
/** Characters of a dead letter's body shown before "Show all". */
const DEAD_LETTER_PREVIEW = 200;

function shortDigest(d) {
  return String(d).slice(0, 12);
}

/** A failure to read a section, in words: absent on this node, or not allowed this token. */
function unavailable(err, what) {
  if (err instanceof AuthError) throw err;
  if (err.status === 404) return h("p", { class: "muted" }, `This node does not serve ${what}.`);
  if (err.status === 403) return h("p", { class: "muted" }, `This token may not read ${what}: ${err.message}.`);
  throw err;
}

function opsView(arg) {
  let section = OPS_SECTIONS.some(([k]) => k === arg) ? arg : "config";
  const nav = h("nav", { class: "subnav", "aria-label": "Operations" });
  const body = h("div");
  const root = h("div", {}, nav, body);
  const parts = { config: configPart(), schedules: schedulesPart(), deadletters: deadLettersPart(), audit: auditPart() };
  const readAt = new Map(); // section → when it was last read (a section shown again is read at once if stale)

  function drawNav() {
    nav.replaceChildren(...OPS_SECTIONS.map(([k, t]) => h("a", { href: `#ops/${k}`, "aria-current": k === section ? "page" : undefined }, t)));
    body.replaceChildren(parts[section].root);
  }
  drawNav();
  return {
    title: "Operations",
    root,
    select(next) {
      const s = OPS_SECTIONS.some(([k]) => k === next) ? next : "config";
      if (s !== section) {
        section = s;
        drawNav();
      }
    },
    async refresh() {
      const now = Date.now();
      if (now - (readAt.get(section) ?? 0) < OPS_REFRESH_MS) return;
      const s = section;
      await parts[s].refresh();
      readAt.set(s, now);
    },
  };
}

// -- config revisions --

function configPart() {
  const list = pager("Revisions", (rows, total) =>
    table(
      `${total} stored company revision${total === 1 ? "" : "s"}, newest first`,
      ["Digest", "Company", "Seats", "Stored", "By", "State", ""],
      rows.map((r) =>
        h(
          "tr",
          {},
          h("th", { scope: "row" }, h("code", { title: r.digest }, shortDigest(r.digest))),
          h("td", {}, r.name),
          h("td", { class: "num" }, r.seats),
          h("td", {}, when(r.stored_at)),
          h("td", {}, r.stored_by ?? "—"),
          h("td", {}, r.active ? h("strong", { class: "active-rev" }, "active") : h("span", { class: "muted" }, "stored")),
          h(
            "td",
            {},
            r.active
              ? ""
              : confirmButton("Activate", `Make revision ${shortDigest(r.digest)} (${r.name}) the fleet's company?`, "Yes, activate", async () => {
                  try {
                    const out = await api(`/config/revisions/${r.digest}/activate`, { body: {} });
                    note.textContent = `Revision ${shortDigest(out.digest)} is active (epoch ${out.epoch}, ${out.seats} seats).`;
                  } catch (err) {
                    if (err instanceof AuthError) return signOut(err.message);
                    note.textContent = `Not activated: ${err.message}`;
                  }
                  await refresh();
                }),
          ),
        ),
      ),
      "No company revision is stored.",
    ),
  );
  const from = h("select", { id: "diff-from" });
  const to = h("select", { id: "diff-to" });
  const diffOut = h("div", { class: "diff", "aria-live": "polite" });
  const diffForm = h("form", { class: "filters", "aria-label": "Compare two revisions" }, h("label", {}, "From ", from), h("label", {}, "To ", to), h("button", { type: "submit" }, "Show changes"));
  const note = h("p", { role: "status" });
  const state = h("div");
  const root = h("div", {}, state, note, list.root, h("h3", {}, "Compare two revisions"), diffForm, diffOut);
  let revisions = [];

  diffForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    diffOut.replaceChildren(h("p", { class: "muted" }, "Reading both revisions…"));
    try {
      const [a, b] = await Promise.all([api(`/config/revisions/${from.value}`), api(`/config/revisions/${to.value}`)]);
      const d = companyDiff(a.company, b.company);
      const head = h("p", {}, `From ${shortDigest(from.value)} to ${shortDigest(to.value)}: ${d.lines.length + d.truncated} change${d.lines.length + d.truncated === 1 ? "" : "s"}.`);
      diffOut.replaceChildren(
        head,
        d.lines.length
          ? h(
              "ul",
              { class: "plain diff-lines" },
              d.lines.map((l) =>
                h(
                  "li",
                  { class: `diff-${l.kind}` },
                  h("code", {}, l.path),
                  l.kind === "added" ? ` added: ${l.after}` : l.kind === "removed" ? ` removed (was ${l.before})` : ` changed: ${l.before} → ${l.after}`,
                ),
              ),
            )
          : h("p", { class: "muted" }, "The two revisions are the same company."),
        ...(d.truncated ? [h("p", { class: "muted" }, `…and ${d.truncated} more.`)] : []),
      );
    } catch (err) {
      if (err instanceof AuthError) return signOut(err.message);
      diffOut.replaceChildren(h("p", { class: "error" }, `Could not compare: ${err.message}`));
    }
  });

  function options(select, chosen) {
    const keep = select.value || chosen;
    select.replaceChildren(...revisions.map((r) => h("option", { value: r.digest }, `${shortDigest(r.digest)} · ${r.name}${r.active ? " (active)" : ""} · ${clock(r.stored_at)}`)));
    if (revisions.some((r) => r.digest === keep)) select.value = keep;
  }

  async function refresh() {
    let got;
    try {
      got = await api("/config/revisions");
    } catch (err) {
      state.replaceChildren(unavailable(err, "company revisions"));
      list.set([]);
      diffForm.hidden = true;
      return;
    }
    state.replaceChildren(got.active ? h("p", {}, "The fleet runs revision ", h("code", { title: got.active.digest }, shortDigest(got.active.digest)), ` (activation epoch ${got.active.epoch}).`) : h("p", { class: "muted" }, "No revision is active."));
    revisions = got.revisions;
    list.set(revisions);
    diffForm.hidden = revisions.length < 2;
    // By default: what the newest revision changed from the one before it.
    options(from, revisions[1]?.digest);
    options(to, revisions[0]?.digest);
  }
  return { root, refresh };
}

// -- schedules --

function schedulesPart() {
  const state = h("div");
  const list = pager("Schedules", (rows, total) =>
    table(
      `${total} schedule${total === 1 ? "" : "s"}`,
      ["Schedule", "Seat", "When", "Next fire", "Last fire", "State"],
      rows.map((s) =>
        h(
          "tr",
          {},
          h("th", { scope: "row" }, s.id),
          h("td", {}, h("a", { href: `#agent/${encodeURIComponent(s.seat)}` }, `@${s.seat}`)),
          h("td", {}, h("code", {}, s.cron), ` (${s.timezone})`),
          h("td", {}, s.next_fire ? when(s.next_fire) : h("span", { class: "muted" }, "never")),
          h("td", {}, s.last_fire ? [when(s.last_fire.fired_at_iso ?? s.last_fire.instant_iso), ` · ${s.last_fire.outcome ?? ""}${s.last_fire.missed ? ` (${s.last_fire.missed} missed)` : ""}`] : h("span", { class: "muted" }, "not yet")),
          h("td", { class: s.error ? "error" : "" }, s.error ? `unreadable: ${s.error}` : s.enabled ? "enabled" : "disabled"),
        ),
      ),
      "This company has no schedules.",
    ),
  );
  const root = h("div", {}, state, list.root);
  return {
    root,
    async refresh() {
      try {
        const got = await api("/schedules");
        state.replaceChildren();
        list.set(got.schedules);
      } catch (err) {
        state.replaceChildren(unavailable(err, "schedules"));
        list.set([]);
      }
    },
  };
}

// -- dead letters --

function deadLettersPart() {
  const state = h("div");
  const note = h("p", { role: "status" });
  const list = pager("Dead letters", (rows, total) =>
    table(
      `${total} dead letter${total === 1 ? "" : "s"}, newest first`,
      ["Id", "Mailbox", "Why", "Deliveries", "Message", ""],
      rows.map((d) => {
        const text = d.data_encoding === "utf8" ? d.data : `(binary, ${d.data.length} base64 characters)`;
        return h(
          "tr",
          { "data-id": d.id },
          h("th", { scope: "row" }, String(d.id)),
          h("td", {}, d.original_subject ?? d.subject, h("br"), h("span", { class: "muted" }, d.group ?? "")),
          h("td", {}, d.reason || "—"),
          h("td", { class: "num" }, d.deliveries),
          h("td", {}, text.length > DEAD_LETTER_PREVIEW ? h("details", {}, h("summary", {}, `${text.slice(0, DEAD_LETTER_PREVIEW)}…`), h("pre", { class: "body" }, text)) : h("pre", { class: "body" }, text)),
          h(
            "td",
            { class: "actions" },
            confirmButton("Requeue", `Put dead letter ${d.id} back on its mailbox?`, "Yes, requeue", () => act(`/deadletters/${d.id}/replay`, "POST", `Dead letter ${d.id} requeued.`)),
            " ",
            confirmButton("Discard", `Discard dead letter ${d.id} for good?`, "Yes, discard", () => act(`/deadletters/${d.id}`, "DELETE", `Dead letter ${d.id} discarded.`)),
          ),
        );
      }),
      "No dead letters: every message was handled.",
    ),
  );
  async function act(path, method, done) {
    try {
      await api(path, { method, body: method === "POST" ? {} : undefined });
      note.textContent = done;
    } catch (err) {
      if (err instanceof AuthError) return signOut(err.message);
      note.textContent = `Not done: ${err.message}`;
    }
    await refresh();
  }
  async function refresh() {
    try {
      const got = await api("/deadletters");
      state.replaceChildren();
      list.set([...got.dead_letters].sort((a, b) => b.id - a.id));
    } catch (err) {
      state.replaceChildren(unavailable(err, "dead letters"));
      list.set([]);
    }
  }
  return { root: h("div", {}, h("p", {}, "Messages no seat could handle after every delivery. Requeue one to try again, or discard it."), state, note, list.root), refresh };
}

// -- audit --

function auditPart() {
  const state = h("div");
  const rowsBox = h("div");
  const newer = h("button", { type: "button", class: "link" }, "← Newer");
  const olderB = h("button", { type: "button", class: "link" }, "Older →");
  const where = h("span", { class: "muted" });
  const nav = h("nav", { class: "pager", "aria-label": "Audit log: pages" }, newer, " ", where, " ", olderB);
  // A stack of the `before` that opened each page: page 0 is the newest.
  let stack = [undefined];
  let next = null;
  newer.addEventListener("click", () => {
    if (stack.length > 1) stack.pop();
    void refresh().catch(() => undefined);
  });
  olderB.addEventListener("click", () => {
    if (next !== null) stack.push(next);
    void refresh().catch(() => undefined);
  });
  async function refresh() {
    const q = new URLSearchParams({ limit: String(AUDIT_PAGE) });
    const before = stack[stack.length - 1];
    if (before !== undefined) q.set("before", String(before));
    let got;
    try {
      got = await api(`/audit?${q}`);
    } catch (err) {
      state.replaceChildren(unavailable(err, "the audit log"));
      rowsBox.replaceChildren();
      nav.hidden = true;
      return;
    }
    state.replaceChildren();
    next = got.next;
    rowsBox.replaceChildren(
      table(
        `Writes this node answered, newest first (page ${stack.length})`,
        ["When", "Token", "Action", "Request", "Answer"],
        got.entries.map((e) =>
          h(
            "tr",
            {},
            h("td", {}, when(e.at)),
            h("td", {}, e.token_id ?? h("span", { class: "muted" }, "none")),
            h("th", { scope: "row" }, e.action),
            h("td", {}, h("code", {}, `${e.method} ${e.path}`)),
            h("td", { class: e.outcome === "ok" ? "" : "error" }, `${e.status} ${e.outcome}`),
          ),
        ),
        "No writes recorded yet.",
      ),
    );
    nav.hidden = stack.length === 1 && next === null;
    newer.disabled = stack.length === 1;
    olderB.disabled = next === null;
    where.textContent = `page ${stack.length}`;
  }
  return { root: h("div", {}, h("p", {}, "Every write this node's API answered: who (by token), what, and how it went."), state, rowsBox, nav), refresh };
}

registerView("ops", opsView);
