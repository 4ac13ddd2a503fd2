// ---- Turn transcript (#turn/{handle}/{turn id}) ----------------------------------------
// One turn as its holder recorded it (GET /agents/{handle}/turns/{id}): the trigger, what
// the turn opened with, each round (what was sent, in summary; the model's text; each tool
// call's input and output; tokens, cost and time), the outcome and the error. A long text
// shows its first lines with a "Show all" to expand it; everything is set as text.

/** Characters of a text shown before "Show all". */
const FOLD_CHARS = 600;
/** …or lines, whichever comes first. */
const FOLD_LINES = 8;

/** A text that folds when long: a <pre> and a button to show all / show less. */
function foldable(label, text) {
  const s = String(text ?? "");
  const lines = s.split("\n");
  const long = s.length > FOLD_CHARS || lines.length > FOLD_LINES;
  const short = long ? `${lines.slice(0, FOLD_LINES).join("\n").slice(0, FOLD_CHARS)}…` : s;
  const pre = h("pre", { class: "transcript-text", "aria-label": label }, short || "(empty)");
  if (!long) return h("div", { class: "fold" }, pre);
  let open = false;
  const button = h("button", { type: "button", class: "link", "aria-expanded": "false" }, `Show all (${count(s.length)} characters)`);
  button.addEventListener("click", () => {
    open = !open;
    pre.textContent = open ? s : short;
    button.textContent = open ? "Show less" : `Show all (${count(s.length)} characters)`;
    button.setAttribute("aria-expanded", String(open));
  });
  return h("div", { class: "fold" }, pre, button);
}

function toolCallPart(c) {
  return h(
    "li",
    { class: `tool-call${c.is_error ? " tool-error" : ""}`, "data-tool": c.name },
    h("div", { class: "msg-head" }, h("strong", {}, c.name), ` · ${c.is_error ? "failed" : "ok"}${c.reached ? " · wrote outside" : ""} · ${c.duration_ms} ms`),
    h("div", { class: "tool-io" }, h("h6", {}, "Input"), foldable(`Input of ${c.name}`, c.input), h("h6", {}, "Output"), foldable(`Output of ${c.name}`, c.output)),
  );
}

function roundPart(r) {
  return h(
    "li",
    { class: "round", "data-round": r.n },
    h("h4", {}, `Round ${r.n}`),
    h("p", { class: "muted" }, `Sent ${count(r.sent.messages)} message${r.sent.messages === 1 ? "" : "s"} (${count(r.sent.chars)} characters) · ${tokensText(r.usage)} tokens${money(r.cost_micros)} · model ${r.model_ms} ms · round ${r.duration_ms} ms`),
    h("h5", {}, "The model said"),
    r.text ? foldable(`Round ${r.n}: the model's text`, r.text) : h("p", { class: "muted" }, "(no text)"),
    r.tool_calls.length ? [h("h5", {}, `Tool calls (${r.tool_calls.length})`), h("ol", { class: "tool-calls" }, r.tool_calls.map(toolCallPart))] : null,
  );
}

function turnView(arg) {
  let target = arg;
  const root = h("div");
  let shownKey = null;
  return {
    title: "Turn transcript",
    root,
    select(next) {
      if (next !== target) {
        target = next;
        shownKey = null;
        root.replaceChildren();
      }
    },
    async refresh() {
      const [handle, id] = String(target ?? "").split("/");
      if (!handle || !id) {
        root.replaceChildren(h("p", {}, "No turn named. Open one from an ", h("a", { href: "#org" }, "agent page"), "."));
        return;
      }
      const back = h("p", { class: "back" }, h("a", { href: `#agent/${encodeURIComponent(handle)}` }, `← @${handle}`));
      // A transcript never changes once kept: read it once.
      if (shownKey === target) return;
      let got;
      try {
        got = await api(`/agents/${encodeURIComponent(handle)}/turns/${encodeURIComponent(id)}`);
      } catch (err) {
        if (err instanceof AuthError) throw err;
        if (err.status === 404 || err.status === 503 || err.status === 400) {
          root.replaceChildren(back, h("p", { class: "error" }, `Transcript unavailable: ${err.message}.`));
          return;
        }
        throw err;
      }
      const t = got.turn;
      shownKey = target;
      $("view-title").textContent = `Turn of @${handle}`;
      root.replaceChildren(
        back,
        h(
          "dl",
          { class: "facts" },
          h("dt", {}, "Trigger"),
          h("dd", {}, `${t.trigger.type.replace(/_/g, " ")} from ${t.trigger.from}${t.trigger.count > 1 ? ` (and ${t.trigger.count - 1} more)` : ""} · ${t.trigger.conversation}`),
          h("dt", {}, "Asked"),
          h("dd", {}, foldable("What woke the turn", t.trigger.text)),
          h("dt", {}, "Outcome"),
          h("dd", { class: t.outcome === "completed" ? "idle" : "error" }, `${t.outcome}${t.end !== t.outcome ? ` (${t.end.replace(/_/g, " ")})` : ""}`),
          t.error ? [h("dt", {}, "Error"), h("dd", { class: "error" }, t.error)] : null,
          h("dt", {}, "When"),
          h("dd", {}, when(t.started_at), ` · took ${seconds(t.duration_ms)} (${count(t.duration_ms)} ms)`),
          h("dt", {}, "Ran on"),
          h("dd", {}, `${t.node} · epoch ${t.epoch}${t.model ? ` · ${t.provider ?? "?"} · ${t.model}` : ""}`),
          h("dt", {}, "Tokens"),
          h("dd", {}, `${tokensText(t.usage)}${money(t.cost_micros)}`),
        ),
        h("p", { class: "muted", hidden: !t.truncated }, "This transcript was long: later texts keep only their first characters."),
        h("h3", {}, "Opening"),
        h("p", { class: "muted" }, `The system prompt (${count(t.system_chars)} characters) and this first message:`),
        foldable("The first message sent", t.opening),
        h("h3", {}, `Rounds (${t.rounds.length})`),
        t.rounds.length ? h("ol", { class: "rounds" }, t.rounds.map(roundPart)) : h("p", { class: "muted" }, "No model round ran."),
      );
    },
  };
}

registerView("turn", turnView);
