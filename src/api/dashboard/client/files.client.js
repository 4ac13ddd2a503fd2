// ---- Files (a part without a view) ------------------------------------------------------
// The files on a work item (and any owner with {path}/files): the list, an upload form, and
// a preview of raster images and plain text. Bytes are fetched with the token like every
// other call and shown from a blob: URL (images) or as text, never as HTML.

/** Types previewed as an image, and as text; anything else is downloaded (src/api/routes/files.ts). */
const PREVIEW_IMAGES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
/** Text shown in a preview at most: a preview, not a reader (the download has the rest). */
const PREVIEW_TEXT_CHARS = 64 * 1024;
/** The node's limit on one file (objects/store.ts MAX_FILE_BYTES): a larger one is refused
 *  here, by name, before it is sent — far past it the server only answers a bare 413. */
const MAX_UPLOAD_BYTES = 32 * 1024 * 1024;
/** An upload may be large (32 MiB at most) on a slow link: its own wait, not a read's. */
const UPLOAD_TIMEOUT_MS = 120_000;

function sizeText(n) {
  return n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

function fileSection(ownerPath, ownerLabel) {
  const list = h("ul", { class: "files", "aria-label": `Files on ${ownerLabel}` });
  const preview = h("figure", { class: "file-preview", hidden: true, "aria-live": "polite" });
  const input = h("input", { type: "file", "aria-label": `File to attach to ${ownerLabel}` });
  const error = h("p", { class: "error", role: "alert" });
  const form = h("form", { "aria-label": `Attach a file to ${ownerLabel}` }, input, h("button", { type: "submit" }, "Attach"), error);
  let shownUrl = null;
  // The list is rebuilt only when the files changed: the 3 s refresh must not take the
  // keyboard focus off a Preview button.
  let drawn = null;

  function clearPreview() {
    if (shownUrl) URL.revokeObjectURL(shownUrl);
    shownUrl = null;
    preview.hidden = true;
    preview.replaceChildren();
  }

  async function show(f) {
    error.textContent = "";
    try {
      const blob = await api(`${ownerPath}/files/${encodeURIComponent(f.id)}`, { as: "blob" });
      clearPreview();
      const type = f.content_type.split(";")[0];
      if (PREVIEW_IMAGES.has(type)) {
        shownUrl = URL.createObjectURL(blob);
        preview.replaceChildren(h("img", { src: shownUrl, alt: f.name }), h("figcaption", {}, f.name));
      } else {
        const text = await blob.text();
        preview.replaceChildren(h("pre", { class: "file-text" }, text.slice(0, PREVIEW_TEXT_CHARS)), h("figcaption", {}, f.name, text.length > PREVIEW_TEXT_CHARS ? " (the start: download it for the rest)" : ""));
      }
      preview.hidden = false;
    } catch (err) {
      if (err instanceof AuthError) return signOut(err.message);
      error.textContent = `Not shown: ${err.message}`;
    }
  }

  async function download(f) {
    try {
      const blob = await api(`${ownerPath}/files/${encodeURIComponent(f.id)}`, { as: "blob" });
      const url = URL.createObjectURL(blob);
      const a = h("a", { href: url, download: f.name, hidden: true });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    } catch (err) {
      if (err instanceof AuthError) return signOut(err.message);
      error.textContent = `Not downloaded: ${err.message}`;
    }
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.textContent = "";
    const file = input.files?.[0];
    if (!file) {
      error.textContent = "Choose a file first.";
      return;
    }
    if (file.size > MAX_UPLOAD_BYTES) {
      error.textContent = `Not attached: ${file.name} is ${sizeText(file.size)}; a file is at most ${sizeText(MAX_UPLOAD_BYTES)}.`;
      return;
    }
    try {
      await api(`${ownerPath}/files?name=${encodeURIComponent(file.name)}`, { raw: file, type: file.type || "application/octet-stream", timeout_ms: UPLOAD_TIMEOUT_MS });
      input.value = "";
      await self.refresh();
    } catch (err) {
      if (err instanceof AuthError) return signOut(err.message);
      error.textContent = `Not attached: ${err.message}`;
    }
  });

  const self = {
    root: h("section", { class: "file-section" }, h("h4", {}, "Files"), list, preview, form),
    async refresh() {
      const got = await api(`${ownerPath}/files`);
      const seen = got.files.map((f) => f.id).join(",");
      if (seen === drawn) return;
      drawn = seen;
      list.replaceChildren(
        ...(got.files.length
          ? got.files.map((f) => {
              const type = f.content_type.split(";")[0];
              const previewable = PREVIEW_IMAGES.has(type) || type === "text/plain";
              return h(
                "li",
                { "data-file": f.id },
                h("strong", {}, f.name),
                ` · ${sizeText(f.size)} · ${f.by} · `,
                when(f.created_at),
                " ",
                previewable ? h("button", { type: "button", class: "link", onclick: () => show(f) }, "Preview") : null,
                " ",
                h("button", { type: "button", class: "link", onclick: () => download(f) }, "Download"),
              );
            })
          : [h("li", { class: "muted" }, "No files yet.")]),
      );
    },
    leave: clearPreview,
  };
  return self;
}
