// ---- a seat's coding runs, on the agent page -------------------------------------------
// GET /runs?seat=H lists the runs (newest first): running, parked with the question it asks,
// finished with its diff (GET /runs/{id}, read when a person opens it), failed with why. A
// live run can be cancelled (POST /runs/{id}/cancel, grant agents:operate; the run's
// supervisor stops it and the seat is told, as for any result). Everything a run printed or
// an engine wrote is set as text.

/** Characters of a run's task shown on its card; the whole task is under its details. */
const RUN_TASK_SHOWN = 240;
/** Diff lines drawn: a record keeps up to 256 KiB of diff, and one element per line of that
 * would make the page slow on a small box; the rest is counted, not drawn. */
const RUN_DIFF_LINES_SHOWN = 2000;

/** A run's state in words and the class that colours it. */
function runState(r) {
  if (r.state === "done") {
    const o = r.result?.outcome;
    if (o === "succeeded") return { word: "finished", cls: "finished" };
    if (o === "cancelled") return { word: "cancelled", cls: "cancelled" };
    if (o === "limit") return { word: "stopped at a limit", cls: "failed" };
    return { word: "failed", cls: "failed" };
  }
  if (r.cancel) return { word: "cancelling", cls: "cancelled" };
  if (r.state === "parked") return { word: "waiting for an answer", cls: "parked" };
  return { word: r.state, cls: "running" };
}

/** The first 8 characters of a run id: enough to tell runs apart, and what a chat says. */
function shortRun(id) {
  return String(id).slice(0, 8);
}

/** A unified diff as lines, each coloured by its first character (the +/- stay as text). */
function diffLines(diff) {
  const lines = diff.replace(/\n$/, "").split("\n");
  const shown = lines.slice(0, RUN_DIFF_LINES_SHOWN).map((l) => {
    const cls = l.startsWith("+++") || l.startsWith("---") || l.startsWith("diff ") || l.startsWith("index ") ? "dl-file" : l.startsWith("@@") ? "dl-hunk" : l.startsWith("+") ? "dl-add" : l.startsWith("-") ? "dl-del" : "dl-ctx";
    // A block per line (copied text keeps its line breaks); an empty line keeps its height.
    return h("span", { class: `dl ${cls}` }, l === "" ? " " : l);
  });
  const more = lines.length - shown.length;
  return [h("pre", { class: "run-diff", tabindex: "0", "aria-label": "Diff" }, shown), more > 0 ? h("p", { class: "muted" }, `… ${count(more)} more lines not shown.`) : null];
}

/** What a finished run left: its task, commits, diff and output tail (the full record). */
function runDetail(run) {
  const res = run.result;
  return h(
    "div",
    {},
    h("h5", {}, "Task"),
    h("pre", { class: "run-text" }, run.task),
    h("h5", {}, `Commits (${res.commits.length})`),
    res.commits.length ? h("ul", { class: "plain run-commits" }, res.commits.map((c) => h("li", {}, c))) : h("p", { class: "muted" }, "No commits."),
    h("h5", {}, "Diff"),
    res.diff ? diffLines(res.diff) : h("p", { class: "muted" }, "No changes."),
    h("h5", {}, `Output (last of ${count(res.output_bytes)} bytes)`),
    res.output_tail ? h("pre", { class: "run-text" }, res.output_tail) : h("p", { class: "muted" }, "No output."),
  );
}

/** Words for a refused cancel: a missing grant is named. */
function cancelError(err) {
  if (err.status === 403) return "Not cancelled: this token lacks the agents:operate grant (cancelling a run needs it). Sign in with a token that has it.";
  if (err.code === "run_done") return "It had already finished.";
  return `Not cancelled: ${err.message}`;
}

/**
 * The runs section of one seat's agent page. `set(list)` takes GET /runs's answer (or
 * { failed }), and redraws only the runs that changed, so an open diff or an open "are you
 * sure" survives the page's 3 s refresh.
 */
function seatRuns(handle) {
  const root = h("div", { class: "seat-runs" });
  const note = h("p", { class: "control-note", role: "status" });
  /** run id → { key, el } */
  const cards = new Map();
  /** run id → its full record, once read (a done run's result no longer changes). */
  const details = new Map();
  const open = new Set();

  async function cancel(r) {
    note.textContent = "";
    note.classList.remove("error");
    try {
      await api(`/runs/${encodeURIComponent(r.id)}/cancel`, { method: "POST", body: { reason: "cancelled from the dashboard" } });
      note.textContent = `Cancel sent to run ${shortRun(r.id)}.`;
      refreshNow();
    } catch (err) {
      if (err instanceof AuthError) return signOut(err.message);
      note.textContent = cancelError(err);
      note.classList.add("error");
    }
  }

  function fill(box, id) {
    const have = details.get(id);
    if (have) return box.replaceChildren(runDetail(have));
    box.replaceChildren(h("p", { class: "muted" }, "Reading the run…"));
    api(`/runs/${encodeURIComponent(id)}`)
      .then((run) => {
        if (!run.result) return box.replaceChildren(h("p", { class: "muted" }, "The run has not finished."));
        details.set(id, run);
        box.replaceChildren(runDetail(run));
      })
      .catch((err) => {
        if (err instanceof AuthError) return signOut(err.message);
        box.replaceChildren(h("p", { class: "error" }, `The run could not be read: ${err.message}`));
      });
  }

  function card(r) {
    const st = runState(r);
    const headId = `run-${r.id}`;
    const res = r.result;
    const where = place(r.conversation);
    const parts = [
      h(
        "p",
        { class: "run-head", id: headId },
        h("span", { class: `badge run-state run-${st.cls}` }, st.word),
        " ",
        h("strong", {}, r.engine),
        ` run `,
        h("code", { title: r.id }, shortRun(r.id)),
        ` · for ${r.from}${where ? ` ${where}` : ""} · on ${r.node} · started `,
        when(r.created_at),
        r.state === "done" ? [" · ended ", when(r.updated_at)] : null,
      ),
      h("p", { class: "run-task" }, r.task.length > RUN_TASK_SHOWN ? `${r.task.slice(0, RUN_TASK_SHOWN - 1)}…` : r.task),
    ];
    if (r.state === "parked" && r.question) {
      parts.push(
        h("p", { class: "run-question" }, h("strong", {}, "Asks: "), r.question.text),
        h("p", { class: "muted" }, r.question.posted ? `Asked ${where || "where the work came from"}; a reply there mentioning @${handle} answers it.` : "The question is not posted yet."),
      );
    } else if (r.answer && r.state !== "done") {
      parts.push(h("p", { class: "run-answer" }, `Answered by ${r.answer.by}: `, r.answer.text));
    }
    if (r.cancel && r.state !== "done") parts.push(h("p", { class: "muted" }, `Cancel requested by ${r.cancel.by}: ${r.cancel.reason}`));
    if (res) {
      const facts = [res.exit_code !== null ? `exit code ${res.exit_code}` : null, `${res.commits} commit${res.commits === 1 ? "" : "s"}`].filter(Boolean).join(" · ");
      parts.push(h("p", { class: "run-outcome" }, facts));
      if (res.reason) parts.push(h("p", { class: res.outcome === "cancelled" ? "run-reason muted" : "run-reason error" }, res.outcome === "cancelled" ? "Why: " : "Why it failed: ", res.reason));
      if (res.summary) parts.push(h("p", { class: "run-summary" }, h("span", { class: "muted" }, "Last words: "), res.summary));
      const box = h("div", { class: "run-detail" });
      const more = h("details", { class: "run-more", open: open.has(r.id) }, h("summary", {}, "Diff, commits and output"), box);
      more.addEventListener("toggle", () => {
        if (more.open) {
          open.add(r.id);
          fill(box, r.id);
        } else open.delete(r.id);
      });
      if (more.open) fill(box, r.id);
      parts.push(more);
    } else if (!r.cancel) {
      const ask = confirmButton(`Cancel run ${shortRun(r.id)}`, `Cancel run ${shortRun(r.id)}? Its box is stopped and @${handle} is told.`, "Yes, cancel it", () => cancel(r), "Keep it running");
      parts.push(h("div", { class: "run-controls" }, ask));
    }
    return h("li", { class: `run run-card-${st.cls}`, "data-run": r.id, "aria-labelledby": headId }, parts);
  }

  /** What a card shows: a change to anything else (the reported flag, the owner) keeps it;
   *  its times are brought up to date in place (set, below). */
  function keyOf(r) {
    return JSON.stringify([r.state, r.question, r.answer, r.cancel, r.result, r.node]);
  }

  const message = h("p", { class: "muted" });
  const warnings = h("div");
  const list = h("ul", { class: "runs", "aria-label": `Coding runs of @${handle}, newest first` });
  const empty = h("p", { class: "muted" }, "No coding runs.");

  return {
    root,
    set(got) {
      if (got === null || got.failed) {
        message.textContent = got === null ? "This node does not list coding runs." : `Runs unavailable: ${got.failed}.`;
        keepChildren(root, [message]);
        return;
      }
      const seenIds = new Set();
      const items = got.runs.map((r) => {
        seenIds.add(r.id);
        const key = keyOf(r);
        const had = cards.get(r.id);
        if (had && had.key === key) return had.el;
        const el = card(r);
        cards.set(r.id, { key, el });
        return el;
      });
      for (const id of [...cards.keys()]) if (!seenIds.has(id)) cards.delete(id);
      for (const id of [...open]) if (!seenIds.has(id)) open.delete(id);
      keepChildren(warnings, [
        got.truncated ? h("p", { class: "muted" }, `Showing the newest ${count(got.runs.length)} runs.`) : null,
        got.invalid?.length ? h("p", { class: "error" }, `${got.invalid.length} run record${got.invalid.length === 1 ? "" : "s"} could not be read: ${got.invalid.map((x) => x.key).join(", ")}`) : null,
      ].filter(Boolean));
      keepChildren(list, items);
      keepChildren(root, [note, warnings, items.length ? list : empty]);
      for (const t of list.querySelectorAll("time")) t.textContent = relative(Date.parse(t.dateTime));
    },
  };
}

/**
 * Makes `nodes` the children of `parent`, moving only those out of place: a node taken out
 * of the page loses focus, so a card (or a control) that did not change is left where it
 * is and a keyboard user's place survives the 3 s refresh.
 */
function keepChildren(parent, nodes) {
  const wanted = new Set(nodes);
  for (const c of [...parent.childNodes]) if (!wanted.has(c)) c.remove();
  for (let i = 0; i < nodes.length; i++) {
    if (parent.childNodes[i] !== nodes[i]) parent.insertBefore(nodes[i], parent.childNodes[i] ?? null);
  }
  while (parent.childNodes.length > nodes.length) parent.lastChild.remove();
}

/** GET /runs?seat=H, or null when this node has no runs route. */
async function readRuns(handle) {
  try {
    return await api(`/runs?${new URLSearchParams({ seat: handle })}`);
  } catch (err) {
    if (err instanceof AuthError) throw err;
    if (err.status === 404 && err.code !== "unknown_run") return null;
    throw err;
  }
}
