// ---- Events (live, server-sent) ---------------------------------------------------------

/** Characters of one turn's live text kept on screen (the final text is in turn_completed). */
const LIVE_TEXT_KEPT_MAX = 8_000;
/** Live events kept on screen; the oldest drop first. */
const FEED_KEPT_MAX = 200;
/** Bytes of one event stream frame at most: a frame larger than this is not ours. */
const FRAME_MAX_BYTES = 256 * 1024;

/** Splits a server-sent event stream into {event, data} frames. */
function sseFrames(onFrame) {
  let buffer = "";
  return (chunk) => {
    buffer += chunk;
    if (buffer.length > FRAME_MAX_BYTES) buffer = buffer.slice(-FRAME_MAX_BYTES);
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const raw = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      const data = [];
      for (const line of raw.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      if (data.length) onFrame(event, data.join("\n"));
    }
  };
}

function eventsView() {
  const feed = h("ol", { class: "feed", "aria-live": "off" });
  const state = h("p", { class: "muted" }, "Connecting…");
  const root = h("div", {}, h("p", {}, "Engine events as they happen (turns, tool calls, seat changes); newest first."), state, feed);
  let abort = null;
  let retries = 0;

  function add(name, data) {
    let fields = {};
    try {
      fields = JSON.parse(data);
    } catch {
      fields = { data };
    }
    const { event: _e, at, ...rest } = fields;
    const who = rest.seat ?? rest.handle ?? "";
    if (name === "turn_text" && typeof rest.turn_id === "string") {
      // A streaming turn's text as it arrives: one growing line per turn.
      let line = [...feed.children].find((li) => li.dataset.turn === rest.turn_id);
      if (!line) {
        line = h("li", { "data-turn": rest.turn_id }, `${clock(at ?? Date.now())} turn_text @${who} `, h("span", { class: "live-text" }));
        feed.prepend(line);
      }
      const span = line.querySelector(".live-text");
      if (span && span.textContent.length < LIVE_TEXT_KEPT_MAX) span.textContent += String(rest.text ?? "");
      while (feed.children.length > FEED_KEPT_MAX) feed.lastElementChild.remove();
      return;
    }
    const summary = Object.entries(rest)
      .filter(([k]) => k !== "seat" && k !== "handle")
      .slice(0, 6)
      .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`)
      .join(" ");
    feed.prepend(h("li", {}, `${clock(at ?? Date.now())} ${name}${who ? ` @${who}` : ""} ${summary}`));
    while (feed.children.length > FEED_KEPT_MAX) feed.lastElementChild.remove();
  }

  async function run() {
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (!token || abort) return;
    abort = new AbortController();
    const mine = abort;
    try {
      const res = await fetch("/events/stream", { headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" }, cache: "no-store", signal: mine.signal });
      if (res.status === 401) return signOut("That token was not accepted (401 unauthorized). Check it and enter it again.");
      if (res.status === 404) {
        state.textContent = "This node does not stream events.";
        return;
      }
      if (!res.ok || !res.body) throw new Error(`${res.status} ${res.statusText}`);
      state.textContent = "Connected.";
      retries = 0;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      const feedChunk = sseFrames((event, data) => {
        if (event === "ready") state.textContent = "Live.";
        else if (event === "dropped") state.textContent = `Live (this view fell behind and skipped ${data} events).`;
        else add(event, data);
      });
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        feedChunk(value);
      }
      throw new Error("the stream ended");
    } catch (err) {
      if (mine.signal.aborted) return;
      retries = Math.min(retries + 1, 5);
      state.textContent = `Disconnected (${err.message}); reconnecting…`;
      setTimeout(() => {
        if (abort === mine) {
          abort = null;
          if (!document.hidden && current?.view === view) void run();
        }
      }, Math.min(REFRESH_MS * 2 ** retries, REFRESH_MAX_MS));
      return;
    }
  }

  function stop() {
    abort?.abort();
    abort = null;
  }

  const view = {
    title: "Events",
    root,
    async refresh() {
      if (!abort) void run();
    },
    pause: stop,
    resume() {
      void run();
    },
    leave: stop,
  };
  return view;
}

registerView("events", eventsView);
