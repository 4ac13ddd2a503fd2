// ---- Work ------------------------------------------------------------------------------

/** The tracker's statuses in the order work moves through them (src/estate/schema.ts). */
const BOARD_COLUMNS = ["todo", "in_progress", "in_review", "done", "cancelled"];
/** Cards shown per column before "Show more"; each press shows this many more. */
const BOARD_CARDS = 20;

/** A due date as words: "due 3 Dec 2026", marked when it has passed and the work is open. */
function due(w) {
  if (!w.due) return null;
  const d = new Date(`${w.due}T00:00:00`);
  const text = Number.isNaN(d.getTime()) ? w.due : d.toLocaleDateString("en-GB", { day: "numeric", month: "short", year: "numeric" });
  const late = !Number.isNaN(d.getTime()) && d.getTime() + 86_400_000 < Date.now() && OPEN_WORK.has(w.status);
  return h("span", { class: late ? "due late" : "due", title: w.due }, late ? `overdue since ${text}` : `due ${text}`);
}

function workBoard() {
  const shown = new Map(); // status → cards shown
  const root = h("div", { class: "board", role: "list", "aria-label": "Work by status" });
  const self = {
    root,
    draw(items, selected) {
      const columns = [...BOARD_COLUMNS, ...new Set(items.map((w) => w.status).filter((s) => !BOARD_COLUMNS.includes(s)))];
      root.replaceChildren(
        ...columns.map((status) => {
          const cards = items.filter((w) => w.status === status).sort((a, b) => b.updated_at - a.updated_at);
          const n = shown.get(status) ?? BOARD_CARDS;
          const more = h("button", { type: "button", class: "link", hidden: cards.length <= n }, `Show ${Math.min(BOARD_CARDS, cards.length - n)} more of ${cards.length - n}`);
          more.addEventListener("click", () => {
            shown.set(status, n + BOARD_CARDS);
            self.draw(items, selected);
          });
          const title = status.replace("_", " ");
          return h(
            "section",
            { class: `board-col col-${status}`, role: "listitem", "aria-label": `${title}: ${cards.length}` },
            h("h3", {}, title, " ", h("span", { class: "muted" }, `(${cards.length})`)),
            cards.length
              ? h(
                  "ol",
                  { class: "cards" },
                  cards.slice(0, n).map((w) =>
                    h(
                      "li",
                      { class: "work-card", "data-key": w.key, "aria-current": w.key === selected ? "true" : undefined },
                      h("a", { href: `#work/${encodeURIComponent(w.key)}` }, w.key),
                      h("span", { class: "card-title" }, w.title),
                      h("span", { class: "card-line" }, w.assignee ? `@${w.assignee}` : h("span", { class: "muted" }, "unassigned"), w.priority !== "none" ? ` · ${w.priority}` : ""),
                      h("span", { class: "card-line muted" }, "updated ", when(w.updated_at), " · opened ", when(w.created_at)),
                      due(w),
                    ),
                  ),
                )
              : h("p", { class: "muted" }, "Nothing."),
            more,
          );
        }),
      );
    },
  };
  return self;
}

function workView(arg) {
  let selected = arg || null;
  let items = [];
  const project = h("select", { id: "work-project" }, h("option", { value: "" }, "All"));
  const status = h("select", { id: "work-status" }, h("option", { value: "" }, "Any"));
  const list = pager("Work items", (rows, total) =>
    table(
      `${total} of ${items.length} work items, latest change first`,
      ["Key", "Title", "Status", "Assignee", "Priority", "Updated", "Due"],
      rows.map((w) =>
        h(
          "tr",
          { "aria-current": w.key === selected ? "true" : undefined },
          h("th", { scope: "row" }, h("a", { href: `#work/${encodeURIComponent(w.key)}` }, w.key)),
          h("td", {}, w.title),
          h("td", { class: `state-${w.status}` }, w.status.replace("_", " ")),
          h("td", {}, w.assignee ? `@${w.assignee}` : h("span", { class: "muted" }, "unassigned")),
          h("td", {}, w.priority),
          h("td", {}, when(w.updated_at)),
          h("td", {}, due(w) ?? "—"),
        ),
      ),
      items.length ? "No work item matches these filters." : "No work items yet.",
    ),
  );
  const board = workBoard();
  // List or board: the same items and filters, shown by row or by status column.
  let mode = "list";
  const listB = h("button", { type: "button", "aria-pressed": "true" }, "List");
  const boardB = h("button", { type: "button", "aria-pressed": "false" }, "Board");
  const toggle = h("div", { class: "view-toggle", role: "group", "aria-label": "Show work as" }, listB, boardB);
  function setMode(next) {
    mode = next;
    listB.setAttribute("aria-pressed", String(mode === "list"));
    boardB.setAttribute("aria-pressed", String(mode === "board"));
    list.root.hidden = mode !== "list";
    board.root.hidden = mode !== "board";
    renderList();
  }
  listB.addEventListener("click", () => setMode("list"));
  boardB.addEventListener("click", () => setMode("board"));
  board.root.hidden = true;
  const detail = h("section", { class: "card detail", "aria-labelledby": "work-detail-title", hidden: true });
  const root = h("div", {}, h("div", { class: "filters" }, h("label", {}, "Project ", project), h("label", {}, "Status ", status)), toggle, list.root, board.root, detail);
  project.addEventListener("change", () => {
    list.first();
    renderList();
  });
  status.addEventListener("change", () => {
    list.first();
    renderList();
  });

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
    detailParts.files?.leave();
    detailParts.files = fileSection(`/work/${encodeURIComponent(key)}`, key);
    detail.replaceChildren(detailParts.title, detailParts.fields, detailParts.body, detailParts.files.root, h("h4", {}, "Comments"), detailParts.comments, form, h("p", {}, h("a", { href: "#work" }, "Close")));
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
    if (mode === "board") board.draw(shown, selected);
    else list.set(shown, selected ?? "");
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
          ? got.comments.map((c) => h("li", {}, h("div", { class: "msg-head" }, h("strong", {}, c.author), " · ", when(c.created_at)), h("p", { class: "msg-body" }, c.body)))
          : [h("li", { class: "muted" }, "No comments yet.")]),
      );
      await detailParts.files.refresh();
    },
  };
}

registerView("work", workView);
