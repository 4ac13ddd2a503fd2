// ---- Shared by the live and paged views: SSE reading, live streams, paging, confirmations ---
// (chat, events, work, operations, knowledge). Placed after core, before the views.

/** Bytes of one event stream frame at most: a frame larger than this is not ours. */
const FRAME_MAX_BYTES = 256 * 1024;

/** Splits a server-sent event stream into frames: onFrame(event, data, id). */
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
      let id = null;
      const data = [];
      for (const line of raw.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
        else if (line.startsWith("id:")) id = line.slice(3).trim();
      }
      if (data.length) onFrame(event, data.join("\n"), id);
    }
  };
}

/** First wait before reconnecting a stream; it doubles per failure up to REFRESH_MAX_MS. */
const STREAM_RETRY_FIRST_MS = 1000;

/**
 * A server-sent event stream read with fetch (EventSource cannot send the token), that
 * reconnects after a failure with backoff and jitter. `path()` is asked at each connect (a
 * chat stream resumes after its last position). `onState(state, detail)`: "connecting",
 * "live", "retrying" (detail: {error, wait_ms}), "absent" (the node has no such stream).
 */
function liveStream({ path, onFrame, onState }) {
  let abort = null;
  let retries = 0;
  let timer = null;
  let stopped = true;

  async function run() {
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (!token || abort || stopped) return;
    abort = new AbortController();
    const mine = abort;
    onState?.("connecting");
    try {
      const res = await fetch(path(), { headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" }, cache: "no-store", signal: mine.signal });
      if (res.status === 401) {
        stop();
        return signOut("That token was not accepted (401 unauthorized). Check it and enter it again.");
      }
      if (res.status === 404) {
        abort = null;
        onState?.("absent");
        return;
      }
      if (!res.ok || !res.body) throw new Error(`${res.status} ${res.statusText}`);
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      const feed = sseFrames((event, data, id) => {
        if (event === "ready") {
          retries = 0;
          onState?.("live");
        }
        onFrame(event, data, id);
      });
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        feed(value);
      }
      throw new Error("the stream ended");
    } catch (err) {
      if (mine.signal.aborted || stopped) return;
      retries = Math.min(retries + 1, 8);
      const wait_ms = Math.round(Math.min(STREAM_RETRY_FIRST_MS * 2 ** (retries - 1), REFRESH_MAX_MS) * (0.8 + Math.random() * 0.4));
      onState?.("retrying", { error: err.message, wait_ms });
      timer = setTimeout(() => {
        if (abort === mine) {
          abort = null;
          void run();
        }
      }, wait_ms);
    }
  }

  function stop() {
    stopped = true;
    clearTimeout(timer);
    timer = null;
    abort?.abort();
    abort = null;
  }

  return {
    start() {
      if (!stopped) return;
      stopped = false;
      void run();
    },
    stop,
  };
}

/** Rows per page of a list held in the page (work, schedules, revisions, dead letters). */
const ROWS_PER_PAGE = 25;

/**
 * A list shown a page at a time with Previous / Next, keeping its page across refreshes.
 * `render(rows)` builds the element for one page's rows (a table, a list).
 */
function pager(label, render) {
  let page = 0;
  let rows = [];
  let key = null;
  const body = h("div");
  const where = h("span", { class: "muted", "aria-live": "polite" });
  const prev = h("button", { type: "button", class: "link" }, "← Previous");
  const nextB = h("button", { type: "button", class: "link" }, "Next →");
  const nav = h("nav", { class: "pager", "aria-label": `${label}: pages` }, prev, " ", where, " ", nextB);
  const root = h("div", {}, body, nav);
  prev.addEventListener("click", () => {
    page--;
    draw();
  });
  nextB.addEventListener("click", () => {
    page++;
    draw();
  });
  function draw() {
    const pages = Math.max(1, Math.ceil(rows.length / ROWS_PER_PAGE));
    page = Math.min(Math.max(0, page), pages - 1);
    const from = page * ROWS_PER_PAGE;
    body.replaceChildren(render(rows.slice(from, from + ROWS_PER_PAGE), rows.length));
    nav.hidden = pages <= 1;
    prev.disabled = page === 0;
    nextB.disabled = page >= pages - 1;
    where.textContent = `${from + 1}–${Math.min(from + ROWS_PER_PAGE, rows.length)} of ${rows.length}`;
  }
  return {
    root,
    /** Shows `next` (`extra`: anything else the rows show, e.g. which is selected); the
     * same again draws nothing, so a refresh keeps an open confirmation. */
    set(next, extra = "") {
      const k = JSON.stringify([next, extra]);
      if (k === key) return;
      key = k;
      rows = next;
      draw();
    },
    first() {
      page = 0;
    },
  };
}

/** An inline "are you sure": the button becomes a question with a Yes and a Cancel
 * (`noLabel`: the Cancel's words, where "Cancel" would read as the action itself). */
function confirmButton(label, question, yesLabel, onYes, noLabel = "Cancel") {
  const wrap = h("span", { class: "confirm" });
  const ask = h("button", { type: "button" }, label);
  wrap.append(ask);
  ask.addEventListener("click", () => {
    const yes = h("button", { type: "button", class: "danger" }, yesLabel);
    const no = h("button", { type: "button" }, noLabel);
    const q = h("span", { role: "alertdialog", "aria-label": question }, question, " ", yes, " ", no);
    wrap.replaceChildren(q);
    no.addEventListener("click", () => {
      wrap.replaceChildren(ask);
      ask.focus();
    });
    yes.addEventListener("click", async () => {
      yes.disabled = true;
      no.disabled = true;
      try {
        await onYes();
      } finally {
        if (wrap.isConnected) wrap.replaceChildren(ask);
      }
    });
    no.focus();
  });
  return wrap;
}
