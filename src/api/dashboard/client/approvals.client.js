// ---- the Approvals view ------------------------------------------------------------------
// GET /approvals lists what agents parked for a person's yes: pending requests first, each
// with the call, its arguments, the agent's words and the rule that asked, and approve /
// reject with a reason (POST /approvals/{id}/approve|reject, grant approvals:decide); then
// the last decisions. A decision resumes the seat wherever it is held. Everything an agent
// wrote is set as text.

/** Decided requests shown under the pending ones: the recent past, not the archive. */
const APPROVALS_DECIDED_SHOWN = 50;

/** Where the work came from, as a link: a chat thread's channel or a work item. */
function conversationLink(conversation) {
  const chat = /^chat:([^:]+):/.exec(conversation);
  if (chat) return h("a", { href: `#chat/${encodeURIComponent(chat[1])}` }, `#${chat[1]}`);
  const work = /^work:(.+)$/.exec(conversation);
  if (work) return h("a", { href: `#work/${encodeURIComponent(work[1])}` }, work[1]);
  return conversation;
}

/** Words for a refused decision: a missing grant and a decision someone else made are named. */
function decideError(err) {
  if (err.status === 403) return "Not decided: this token lacks the approvals:decide grant. Sign in with a token that has it.";
  if (err.code === "already_decided") return `Not decided: ${err.message}.`;
  if (err.status === 400) return `Not decided: ${err.message}`;
  return `Not decided: ${err.message}`;
}

function approvalsView() {
  const root = h("div", { class: "approvals" });
  const note = h("p", { class: "control-note", role: "status", "aria-live": "polite" });
  /** id → the reason typed so far: a refresh redraws the cards, never the person's words. */
  const reasons = new Map();

  async function decide(a, verdict) {
    note.textContent = "";
    note.classList.remove("error");
    const reason = (reasons.get(a.id) ?? "").trim();
    if (verdict === "reject" && reason === "") {
      note.textContent = "Say why you reject it: the agent reads the reason.";
      note.classList.add("error");
      document.getElementById(`approval-reason-${a.id}`)?.focus();
      return;
    }
    try {
      await api(`/approvals/${encodeURIComponent(a.id)}/${verdict}`, { method: "POST", body: reason ? { reason } : {} });
      reasons.delete(a.id);
      note.textContent = `${verdict === "approve" ? "Approved" : "Rejected"} ${a.id}; @${a.seat} is told.`;
      refreshNow();
    } catch (err) {
      if (err instanceof AuthError) return signOut(err.message);
      note.textContent = decideError(err);
      note.classList.add("error");
    }
  }

  function pendingCard(a) {
    const reasonId = `approval-reason-${a.id}`;
    const input = h("input", { id: reasonId, type: "text", size: "40", autocomplete: "off", value: reasons.get(a.id) ?? "", oninput: (e) => reasons.set(a.id, e.target.value) });
    return h(
      "article",
      { class: "approval-card", "aria-labelledby": `approval-${a.id}` },
      h("h4", { id: `approval-${a.id}` }, `@${a.seat} wants to call ${a.tool}`),
      h("p", { class: "muted" }, `Rule "${a.rule}" · asked `, when(a.requested_at), " · expires ", when(a.expires_at), " · in ", conversationLink(a.conversation), ` · ${a.id}`),
      a.summary ? h("p", { class: "approval-summary" }, a.summary) : null,
      h("pre", { class: "run-text", tabindex: "0", "aria-label": "Arguments" }, JSON.stringify(a.args, null, 2)),
      h(
        "div",
        { class: "approval-actions" },
        h("label", { for: reasonId }, "Reason "),
        input,
        h("button", { type: "button", onclick: () => decide(a, "approve") }, "Approve"),
        h("button", { type: "button", class: "danger", onclick: () => decide(a, "reject") }, "Reject"),
      ),
    );
  }

  function decidedRow(a) {
    const outcome = a.result ? (a.result.ran === "yes" ? (a.result.is_error ? "ran, failed" : "ran") : a.result.ran === "unknown" ? "unknown whether it ran" : "did not run") : a.state === "approved" ? "waiting for its seat" : "did not run";
    return h(
      "tr",
      {},
      h("th", { scope: "row" }, a.id),
      h("td", {}, h("a", { href: `#agent/${encodeURIComponent(a.seat)}` }, `@${a.seat}`)),
      h("td", {}, a.tool),
      h("td", { class: a.state === "approved" ? "" : "error" }, a.state),
      h("td", {}, a.decided_by ?? ""),
      h("td", {}, a.reason ?? ""),
      h("td", {}, outcome),
      h("td", {}, a.decided_at ? when(a.decided_at) : ""),
    );
  }

  return {
    title: "Approvals",
    root,
    async refresh() {
      const { approvals } = await api("/approvals");
      // A person typing keeps focus: the cards are rebuilt only when the pending set changes.
      const pending = approvals.filter((a) => a.state === "pending").reverse();
      const decided = approvals.filter((a) => a.state !== "pending").slice(0, APPROVALS_DECIDED_SHOWN);
      const key = JSON.stringify([pending.map((a) => a.id), decided.map((a) => [a.id, a.state, a.result?.ran ?? null])]);
      if (root.dataset.key === key) return;
      const focused = document.activeElement?.id;
      root.dataset.key = key;
      root.replaceChildren(
        note,
        h("h3", {}, `Waiting for a decision (${pending.length})`),
        // replaceChildren takes nodes, not arrays: the cards are spread.
        ...(pending.length ? pending.map(pendingCard) : [h("p", { class: "muted" }, "Nothing waits for you. Calls a company.approvals rule covers appear here when an agent makes them.")]),
        h("h3", {}, "Decided"),
        table("Decided requests, newest first", ["Request", "Seat", "Tool", "Decision", "By", "Reason", "The call", "When"], decided.map(decidedRow), "No decisions yet."),
      );
      if (focused) document.getElementById(focused)?.focus();
    },
  };
}

registerView("approvals", approvalsView);
