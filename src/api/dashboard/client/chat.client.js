// ---- Chat: live over the channel's event stream -------------------------------------------

/** Messages read per history page ("Load older messages"). */
const CHAT_HISTORY_PAGE = 100;
/** Messages kept per channel: a screenful of history many times over; older ones drop. */
const MESSAGES_KEPT_MAX = 1000;
/** How the engine's failure notices begin (src/agent/notice.ts NOTICE_PREFIX). */
const NOTICE_PREFIX = "⚠ ";

function chatView(arg) {
  let channelId = arg || null;
  let channels = [];
  let replyTo = null; // message being answered in its thread
  /** The open channel: its messages by position, the history cursor, turns and failures. */
  let ch = null;
  let loading = null;
  const channelList = h("ul");
  const heading = h("h3", { id: "channel-title" });
  const liveState = h("p", { class: "muted live-state", role: "status" });
  const olderB = h("button", { type: "button", class: "link", hidden: true }, "Load older messages");
  const list = h("ul", { class: "messages", "aria-labelledby": "channel-title", "aria-live": "polite", "aria-relevant": "additions" });
  const working = h("p", { class: "working-line", "aria-live": "polite" });
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
  const root = h("div", { class: "cols" }, h("nav", { class: "channels", "aria-label": "Channels" }, channelList), h("div", {}, heading, liveState, olderB, list, working, form));

  const live = liveStream({
    path: () => `/chat/channels/${encodeURIComponent(ch.id)}/stream?after=${ch.last}`,
    onFrame(event, data) {
      if (!ch) return;
      let d;
      try {
        d = JSON.parse(data);
      } catch {
        return;
      }
      if (event === "messages") add(d.messages);
      else if (event === "turn") turn(d);
      else if (event === "failed") {
        if (d.message_id) ch.failures.set(d.message_id, d.text);
        render();
      } else if (event === "dropped") {
        // Frames were lost: read the channel again from where this page is.
        liveState.textContent = "Live (caught up after falling behind).";
        live.stop();
        live.start();
      }
    },
    onState(s, d) {
      if (s === "live") {
        liveState.textContent = "Live.";
        if (ch) void reloadChannels();
      }
      else if (s === "connecting") liveState.textContent = "Connecting…";
      else if (s === "absent") liveState.textContent = "This node does not stream chat; showing what was read.";
      else if (s === "retrying") liveState.textContent = `Disconnected (${d.error}); reconnecting in ${Math.ceil(d.wait_ms / 1000)} s…`;
    },
  });

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
    if (!ch) return;
    const who = author.value.trim();
    sessionStorage.setItem(AUTHOR_KEY, who);
    try {
      await api(`/chat/channels/${encodeURIComponent(ch.id)}/messages`, { body: { body: body.value, author: who, thread_parent: replyTo?.id ?? null } });
      body.value = "";
      setReply(null);
    } catch (err) {
      if (err instanceof AuthError) return signOut(err.message);
      error.textContent = `Not posted: ${err.message}`;
    }
  });

  olderB.addEventListener("click", async () => {
    if (!ch || ch.older === null) return;
    try {
      const got = await api(`/chat/channels/${encodeURIComponent(ch.id)}/messages?${new URLSearchParams({ order: "newest", before: String(ch.older), limit: String(CHAT_HISTORY_PAGE) })}`);
      ch.older = got.next;
      add(got.messages, true);
    } catch (err) {
      if (err instanceof AuthError) return signOut(err.message);
      error.textContent = `Could not read older messages: ${err.message}`;
    }
  });

  /** Messages into the open channel, once each, in position order. */
  function add(messages, older = false) {
    let added = 0;
    for (const m of messages) {
      if (m.channel !== ch.id || ch.ids.has(m.id)) continue;
      ch.ids.add(m.id);
      ch.messages.push(m);
      added++;
      if (m.position > ch.last) ch.last = m.position;
    }
    if (!added && !older) return;
    ch.messages.sort((a, b) => a.position - b.position);
    if (ch.messages.length > MESSAGES_KEPT_MAX) {
      for (const m of ch.messages.splice(0, ch.messages.length - MESSAGES_KEPT_MAX)) ch.ids.delete(m.id);
      ch.older = ch.messages[0].position;
    }
    render(older);
  }

  /** A turn's state on a thread: working, then gone when done, or failed with the reason. */
  function turn(t) {
    const seats = ch.turns.get(t.thread) ?? new Map();
    if (t.state === "done") seats.delete(t.seat);
    else seats.set(t.seat, { state: t.state, error: t.error ?? null, outcome: t.outcome ?? null });
    if (seats.size) ch.turns.set(t.thread, seats);
    else ch.turns.delete(t.thread);
    render();
  }

  /** Who is working on a thread, and whose turn failed there (unless the asker was told: the
   * notice says it in words, and the raw error would only repeat it). */
  function indicators(threadId, told) {
    const seats = ch.turns.get(threadId);
    if (!seats) return [];
    return [...seats].filter(([, s]) => !(told && s.state === "failed")).map(([seat, s]) =>
      s.state === "working"
        ? h("li", { class: "turn-working", "data-seat": seat }, h("span", { class: "dots", "aria-hidden": "true" }), ` ${seat} is working…`)
        : s.state === "failed"
          ? h("li", { class: "turn-failed error", "data-seat": seat }, `${seat} failed${s.outcome && s.outcome !== "failed" ? ` (${s.outcome.replaceAll("_", " ")})` : ""}${s.error ? `: ${s.error}` : ""}`)
          : h("li", { class: "turn-waiting muted", "data-seat": seat }, `${seat} hit a problem and will try again${s.error ? `: ${s.error}` : ""}`),
    );
  }

  function renderMessage(m, replies) {
    // Failed: the engine told the asker (a `failed` frame, or a notice in the thread, as
    // src/agent/notice.ts starts every one with NOTICE_PREFIX), or a turn ended failed.
    const notice = (replies ?? []).find((r) => !r.deleted && r.author !== m.author && r.body.startsWith(NOTICE_PREFIX));
    const turnFailed = replies ? [...(ch.turns.get(m.id)?.values() ?? [])].find((s) => s.state === "failed") : null;
    const reason = ch.failures.get(m.id) ?? notice?.body ?? (turnFailed ? (turnFailed.error ?? turnFailed.outcome) : null);
    const failed = replies && reason !== null && reason !== undefined;
    const isNotice = !replies && m.body.startsWith(NOTICE_PREFIX);
    const item = h(
      "li",
      { "data-id": m.id, class: failed ? "msg-failed" : isNotice ? "msg-notice" : "" },
      h("div", { class: "msg-head" }, h("strong", {}, m.author), " · ", when(m.created_at), m.edited_at ? " · edited" : "", failed ? h("span", { class: "error failed-mark" }, " · failed: not answered") : ""),
      h("p", { class: "msg-body" }, m.deleted ? "(deleted)" : m.body),
      failed ? h("p", { class: "error failure-reason" }, `Why: ${String(reason).replace(NOTICE_PREFIX, "")}`) : null,
    );
    if (replies) {
      const marks = indicators(m.id, Boolean(notice) || ch.failures.has(m.id));
      if (replies.length || marks.length) item.append(h("ul", { class: "thread", "aria-label": `Thread of ${m.author}'s message` }, replies.map((r) => renderMessage(r, null)), marks));
      item.append(h("button", { type: "button", class: "link", onclick: () => setReply(m) }, replies.length ? `Reply in thread (${replies.length})` : "Reply in thread"));
    }
    return item;
  }

  function render(keepTop = false) {
    if (!ch) return;
    const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
    const replies = new Map();
    const top = [];
    for (const m of ch.messages) {
      // A reply whose parent has scrolled out of what is kept stands on its own.
      if (m.thread_parent && ch.ids.has(m.thread_parent)) {
        if (!replies.has(m.thread_parent)) replies.set(m.thread_parent, []);
        replies.get(m.thread_parent).push(m);
      } else top.push(m);
    }
    list.replaceChildren(...(top.length ? top.map((m) => renderMessage(m, replies.get(m.id) ?? [])) : [h("li", { class: "muted" }, "No messages yet.")]));
    olderB.hidden = ch.older === null;
    const busy = [...ch.turns.values()].flatMap((s) => [...s].filter(([, v]) => v.state === "working").map(([seat]) => seat));
    working.textContent = busy.length ? `${[...new Set(busy)].join(", ")} ${busy.length === 1 ? "is" : "are"} working on a reply…` : "";
    if (atBottom && !keepTop) list.scrollTop = list.scrollHeight;
  }

  async function open(id) {
    live.stop();
    const got = await api(`/chat/channels/${encodeURIComponent(id)}/messages?${new URLSearchParams({ order: "newest", limit: String(CHAT_HISTORY_PAGE) })}`);
    ch = { id, messages: [], ids: new Set(), last: 0, older: got.next, turns: new Map(), failures: new Map() };
    list.replaceChildren();
    add(got.messages, true);
    render();
    live.start();
  }

  function drawChannels() {
    channelList.replaceChildren(
      ...channels.map((c) => h("li", {}, h("a", { href: `#chat/${encodeURIComponent(c.id)}`, "aria-current": c.id === channelId ? "true" : undefined }, c.kind === "dm" ? c.name : `#${c.name}`))),
    );
  }

  /** The channel list again (a DM begun since): once per (re)connect of the stream, not polled. */
  async function reloadChannels() {
    try {
      ({ channels } = await api("/chat/channels"));
      drawChannels();
    } catch (err) {
      if (err instanceof AuthError) signOut(err.message);
    }
  }

  async function load() {
    ({ channels } = await api("/chat/channels"));
    if (!channelId || !channels.some((c) => c.id === channelId)) channelId = (channels.find((c) => c.id === "general") ?? channels[0])?.id ?? null;
    drawChannels();
    if (!channelId) {
      heading.textContent = "No channels";
      form.hidden = true;
      return;
    }
    form.hidden = false;
    const channel = channels.find((c) => c.id === channelId);
    heading.textContent = channel.kind === "dm" ? channel.name : `#${channel.name}`;
    if (ch?.id !== channelId) await open(channelId);
  }

  return {
    title: "Chat",
    root,
    live: true,
    select(next) {
      if (next && next !== channelId) {
        channelId = next;
        setReply(null);
        loading = null;
      }
    },
    async refresh() {
      // Live: one read of the channel list and history per channel opened; the stream does the rest.
      if (loading && ch?.id === channelId) return loading;
      loading = load();
      try {
        await loading;
      } catch (err) {
        loading = null;
        throw err;
      }
    },
    pause: () => live.stop(),
    resume: () => ch && live.start(),
    leave: () => live.stop(),
  };
}

registerView("chat", chatView);
