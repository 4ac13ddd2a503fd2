// ---- Chat ------------------------------------------------------------------------------

/** Messages kept per channel: a screenful of history many times over; older ones drop. */
const MESSAGES_KEPT_MAX = 1000;
/** How the engine's failure notices begin (src/agent/notice.ts NOTICE_PREFIX). */
const NOTICE_PREFIX = "⚠ ";

function chatView(arg) {
  let channelId = arg || null;
  let channelsKey = "";
  let replyTo = null; // message being answered in its thread
  const byChannel = new Map(); // id → { messages, cursor }
  const channelList = h("ul");
  const heading = h("h3", { id: "channel-title" });
  const list = h("ul", { class: "messages", "aria-labelledby": "channel-title", "aria-live": "polite", "aria-relevant": "additions" });
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
  const root = h("div", { class: "cols" }, h("nav", { class: "channels", "aria-label": "Channels" }, channelList), h("div", {}, heading, list, form));

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
    if (!channelId) return;
    const who = author.value.trim();
    sessionStorage.setItem(AUTHOR_KEY, who);
    try {
      await api(`/chat/channels/${encodeURIComponent(channelId)}/messages`, { body: { body: body.value, author: who, thread_parent: replyTo?.id ?? null } });
      body.value = "";
      setReply(null);
      refreshNow();
    } catch (err) {
      if (err instanceof AuthError) return signOut(err.message);
      error.textContent = `Not posted: ${err.message}`;
    }
  });

  function renderMessage(m, replies) {
    // A reply the engine posted because a turn gave up on this message (src/agent/notice.ts
    // starts every such notice with NOTICE_PREFIX) marks the message failed.
    const failed = (replies ?? []).some((r) => !r.deleted && r.author !== m.author && r.body.startsWith(NOTICE_PREFIX));
    const notice = !replies && m.body.startsWith(NOTICE_PREFIX);
    const item = h(
      "li",
      { "data-id": m.id, class: failed ? "msg-failed" : notice ? "msg-notice" : "" },
      h("div", { class: "msg-head" }, h("strong", {}, m.author), ` · ${clock(m.created_at)}`, m.edited_at ? " · edited" : "", failed ? h("span", { class: "error" }, " · failed: not answered") : ""),
      h("p", { class: "msg-body" }, m.deleted ? "(deleted)" : m.body),
    );
    if (replies) {
      if (replies.length) item.append(h("ul", { class: "thread", "aria-label": `Thread of ${m.author}'s message` }, replies.map((r) => renderMessage(r, null))));
      item.append(h("button", { type: "button", class: "link", onclick: () => setReply(m) }, replies.length ? `Reply in thread (${replies.length})` : "Reply in thread"));
    }
    return item;
  }

  function renderMessages(state) {
    const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
    const ids = new Set(state.messages.map((m) => m.id));
    const replies = new Map();
    const top = [];
    for (const m of state.messages) {
      // A reply whose parent has scrolled out of what is kept stands on its own.
      if (m.thread_parent && ids.has(m.thread_parent)) {
        if (!replies.has(m.thread_parent)) replies.set(m.thread_parent, []);
        replies.get(m.thread_parent).push(m);
      } else top.push(m);
    }
    list.replaceChildren(...(top.length ? top.map((m) => renderMessage(m, replies.get(m.id) ?? [])) : [h("li", { class: "muted" }, "No messages yet.")]));
    if (atBottom) list.scrollTop = list.scrollHeight;
  }

  return {
    title: "Chat",
    root,
    select(arg) {
      if (arg && arg !== channelId) {
        channelId = arg;
        setReply(null);
        channelsKey = "";
      }
    },
    async refresh() {
      const { channels } = await api("/chat/channels");
      if (!channelId || !channels.some((c) => c.id === channelId)) channelId = (channels.find((c) => c.id === "general") ?? channels[0])?.id ?? null;
      const key = JSON.stringify([channelId, channels.map((c) => c.id)]);
      if (key !== channelsKey) {
        channelsKey = key;
        channelList.replaceChildren(
          ...channels.map((c) => h("li", {}, h("a", { href: `#chat/${encodeURIComponent(c.id)}`, "aria-current": c.id === channelId ? "true" : undefined }, c.kind === "dm" ? c.name : `#${c.name}`))),
        );
      }
      if (!channelId) {
        heading.textContent = "No channels";
        form.hidden = true;
        return;
      }
      form.hidden = false;
      const channel = channels.find((c) => c.id === channelId);
      heading.textContent = channel.kind === "dm" ? channel.name : `#${channel.name}`;
      let state = byChannel.get(channelId);
      const fresh = !state;
      state ??= { messages: [], cursor: undefined };
      const got = await readPages(`/chat/channels/${encodeURIComponent(channelId)}/messages`, "cursor", state.cursor);
      if (got.length) {
        state.messages.push(...got);
        state.cursor = got[got.length - 1].position;
        if (state.messages.length > MESSAGES_KEPT_MAX) state.messages.splice(0, state.messages.length - MESSAGES_KEPT_MAX);
      }
      byChannel.set(channelId, state);
      if (fresh || got.length || list.dataset.channel !== channelId) {
        list.dataset.channel = channelId;
        renderMessages(state);
      }
    },
  };
}

registerView("chat", chatView);
