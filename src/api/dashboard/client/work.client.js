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

registerView("work", workView);
