// ---- Knowledge: spaces → pages, search, a page rendered from markdown, sanitized -----------

/** Pages listed per request (the API's own default). */
const KB_PAGE = 100;
/** Search hits asked for. */
const KB_HITS = 20;

/**
 * Agents write these pages, so their markdown is untrusted: marked turns it into HTML and
 * DOMPurify keeps only plain document markup (no script, no event handler, no style, no
 * form, no frame), links only to http(s), mailto or a fragment, and images become their
 * alt text (the content policy would refuse another site's image anyway). The content
 * policy (script-src 'self', no inline) is the second wall behind the sanitizer.
 */
const markdown = new Marked({ gfm: true, async: false });
markdown.use({
  renderer: {
    image(token) {
      const alt = token.text || token.href || "image";
      return `<span class="img-alt">[image: ${alt.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)}]</span>`;
    },
  },
});
const PURIFY = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ["img", "style", "form", "input", "button", "textarea", "select", "option", "iframe", "frame", "object", "embed", "svg", "math", "video", "audio", "source", "link", "meta", "base"],
  FORBID_ATTR: ["style", "id", "name", "target", "srcset", "formaction"],
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
};

/** A page's markdown as sanitized DOM nodes. */
function renderMarkdown(text) {
  const frag = DOMPurify.sanitize(markdown.parse(String(text ?? "")), PURIFY);
  for (const a of frag.querySelectorAll("a[href]")) a.setAttribute("rel", "noopener noreferrer nofollow");
  return frag;
}

function knowledgeView(arg) {
  let space = null;
  let title = null;
  function parseArg(a) {
    const [s, ...t] = (a ?? "").split("/");
    space = s || null;
    title = t.length ? t.join("/") : null;
  }
  parseArg(arg);
  const spaces = h("ul");
  const search = h("input", { id: "kb-search", type: "search", autocomplete: "off", spellcheck: "false" });
  const searchForm = h("form", { class: "filters", role: "search", "aria-label": "Search the knowledge base" }, h("label", { for: "kb-search" }, "Search"), search, h("button", { type: "submit" }, "Search"));
  const main = h("div", { class: "kb-main" });
  const root = h("div", {}, searchForm, h("div", { class: "cols" }, h("nav", { class: "channels", "aria-label": "Spaces" }, h("h3", {}, "Spaces"), spaces), main));
  let spacesKey = "";
  let shownKey = null;
  let list = { pages: [], next: null, space: null };
  /** The open page's files (fileSection) and which page they are of. */
  let files = null;
  let filesFor = null;

  searchForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = search.value.trim();
    if (!text) return;
    try {
      const got = await api(`/pages?${new URLSearchParams({ q: text, limit: String(KB_HITS) })}`);
      shownKey = `search:${text}`;
      main.replaceChildren(
        h("h3", {}, `Pages matching “${text}”`),
        !got.searched
          ? h("p", { class: "error" }, "Nobody could search just now; try again shortly.")
          : got.hits.length
            ? h(
                "ul",
                { class: "plain kb-hits" },
                got.hits.map((hit) => h("li", {}, h("a", { href: pageHref(hit.container, hit.title) }, hit.title), h("span", { class: "muted" }, ` in ${hit.container}`), h("p", { class: "snippet" }, hit.snippet))),
              )
            : h("p", { class: "muted" }, "No page matches."),
      );
    } catch (err) {
      if (err instanceof AuthError) return signOut(err.message);
      main.replaceChildren(h("p", { class: "error" }, `Could not search: ${err.message}`));
    }
  });

  function pageHref(c, t) {
    return `#knowledge/${encodeURIComponent(c)}/${encodeURIComponent(t)}`;
  }

  async function loadList(more) {
    const q = new URLSearchParams({ container: space, limit: String(KB_PAGE) });
    if (more && list.next) q.set("cursor", list.next);
    const got = await api(`/pages?${q}`);
    list = { pages: more ? [...list.pages, ...got.pages] : got.pages, next: got.next, space };
  }

  function drawList() {
    const moreB = h("button", { type: "button", hidden: list.next === null }, "More pages");
    moreB.addEventListener("click", async () => {
      try {
        await loadList(true);
        drawList();
      } catch (err) {
        if (err instanceof AuthError) return signOut(err.message);
      }
    });
    main.replaceChildren(
      h("h3", {}, space),
      table(
        `${list.pages.length}${list.next ? "+" : ""} page${list.pages.length === 1 ? "" : "s"} in ${space}`,
        ["Title", "Labels", "Revision", "Updated"],
        list.pages.map((p) => h("tr", {}, h("th", { scope: "row" }, h("a", { href: pageHref(p.container, p.title) }, p.title)), h("td", {}, chips(p.labels)), h("td", { class: "num" }, p.revision), h("td", {}, when(p.updated_at)))),
        "No pages in this space yet.",
      ),
      moreB,
    );
  }

  return {
    title: "Knowledge",
    root,
    select(next) {
      parseArg(next);
    },
    async refresh() {
      const { containers } = await api("/pages/containers");
      const key = JSON.stringify([space, containers.map((c) => c.key)]);
      if (key !== spacesKey) {
        spacesKey = key;
        spaces.replaceChildren(
          ...(containers.length
            ? containers.map((c) => h("li", {}, h("a", { href: `#knowledge/${encodeURIComponent(c.key)}`, "aria-current": c.key === space ? "true" : undefined }, c.name || c.key)))
            : [h("li", { class: "muted" }, "No spaces.")]),
        );
      }
      if (!space) {
        if (shownKey === null || !shownKey.startsWith("search:")) {
          shownKey = "";
          main.replaceChildren(h("p", { class: "muted" }, "Pick a space, or search every page."));
        }
        return;
      }
      if (!title) {
        const k = `list:${space}`;
        if (shownKey !== k || list.space !== space) {
          await loadList(false);
          shownKey = k;
          drawList();
        }
        return;
      }
      let page;
      try {
        page = await api(`/pages/${encodeURIComponent(space)}/${encodeURIComponent(title)}`);
      } catch (err) {
        if (err.status !== 404 && err.status !== 400) throw err;
        shownKey = null;
        main.replaceChildren(h("p", { class: "error" }, `No page “${title}” in ${space}.`), h("p", {}, h("a", { href: `#knowledge/${encodeURIComponent(space)}` }, `Back to ${space}`)));
        return;
      }
      // The page's files: one part per page shown, refreshed with it (it redraws only on change).
      const fk = `${space}/${title}`;
      if (filesFor !== fk) {
        files?.leave();
        files = fileSection(`/pages/${encodeURIComponent(space)}/${encodeURIComponent(title)}`, fk);
        filesFor = fk;
        shownKey = null;
      }
      await files.refresh();
      const k = `page:${space}/${title}@${page.revision}`;
      if (shownKey === k) return;
      shownKey = k;
      main.replaceChildren(
        h("p", { class: "back" }, h("a", { href: `#knowledge/${encodeURIComponent(space)}` }, `← ${space}`)),
        h("article", { class: "kb-page", "aria-labelledby": "kb-title" }, h("h3", { id: "kb-title" }, page.title), h("p", { class: "muted" }, `revision ${page.revision} · by ${page.author} · updated `, when(page.updated_at), page.labels.length ? " · " : "", chips(page.labels)), h("div", { class: "markdown" }, renderMarkdown(page.body))),
        files.root,
      );
    },
  };
}

registerView("knowledge", knowledgeView);
