// ---- Today (the landing page) -----------------------------------------------------------
// A day at a glance, answering first what a person asks first. At the top, what waits on
// them: approvals pending (GET /approvals?state=pending) and coding runs parked on a
// question (GET /runs?state=parked). Then what is stuck: work in progress no turn moved for
// company.today.stuck_after_minutes (GET /turns/stuck), agent seats no node holds (GET
// /agents), dead letters (GET /deadletters). Then, per agent, today's turns with a receipt
// each (GET /turns?day=…, the fleet's turn ledger: any node answers) linking to the
// transcript, the work item and the thread, and the week's turns and outcomes per agent
// (GET /turns/week), drawn like the Spend view's charts. Words come from today-words.js.

/** Stuck work and dead letters are read this often, not every 3 s: listing dead letters
 * costs the node one read per letter, and "stuck" is measured in hours. */
const TODAY_SLOW_MS = 15_000;
/** Week chart geometry: a label column and a column per day. */
const WEEK_LABEL_W = 130;
const WEEK_ROW_H = 34;
/** Agents the week chart draws at most, busiest first: a chart of 2,000 rows reads as none. */
const WEEK_ROWS_MAX = 25;
/** Characters of a handle in the chart's label column (the full handle is in its title). */
const WEEK_LABEL_CHARS = 14;
/** Idle agents named by handle at most under "No turns today"; the rest are counted. */
const IDLE_NAMED_MAX = 30;

/** A read that may fail on its own without failing the view: {ok, value} or {ok: false, err}. */
async function attempt(promise) {
  try {
    return { ok: true, value: await promise };
  } catch (err) {
    if (err instanceof AuthError) throw err;
    return { ok: false, err };
  }
}

/** Why a block could not be read, in words. */
function notRead(what, err) {
  if (err.status === 404) return h("p", { class: "muted" }, `This node does not serve ${what}.`);
  if (err.status === 403) return h("p", { class: "muted" }, `This token may not read ${what}: ${err.message}.`);
  return h("p", { class: "error" }, `Could not read ${what}: ${err.message}.`);
}

/** "6 Dec" for a YYYY-MM-DD day. */
function dayLabel(day) {
  const d = new Date(`${day}T12:00:00Z`);
  return `${d.getUTCDate()} ${d.toLocaleString("en", { month: "short", timeZone: "UTC" })}`;
}

/**
 * Turns per agent per day as stacked columns (done, passing, trouble), a row per agent and
 * a column per day, each column titled with its counts; the same SVG approach as the Spend
 * view's charts (svg() there), so every figure is text a screen reader and a test can read.
 */
function weekChart(title, week) {
  const busiest = [...week.seats].sort((a, b) => b.turns - a.turns);
  const rows = busiest.slice(0, WEEK_ROWS_MAX).sort((a, b) => week.seats.indexOf(a) - week.seats.indexOf(b));
  const left = busiest.length - rows.length;
  const cols = week.days.length;
  const colW = (CHART_W - WEEK_LABEL_W) / cols;
  const max = Math.max(1, ...rows.flatMap((r) => r.days.map((d) => d.turns)));
  const height = rows.length * WEEK_ROW_H + 24;
  const chart = svg("svg", { viewBox: `0 0 ${CHART_W} ${height}`, role: "img", "aria-label": title, class: "chart week-chart", width: "100%" });
  chart.append(svg("title", {}, title));
  rows.forEach((r, i) => {
    const y = i * WEEK_ROW_H;
    const name = r.seat.length > WEEK_LABEL_CHARS ? `${r.seat.slice(0, WEEK_LABEL_CHARS - 1)}…` : r.seat;
    const label = svg("text", { x: 0, y: y + WEEK_ROW_H * 0.6, class: "chart-label" }, `@${name} · ${r.turns}`);
    label.append(svg("title", {}, `@${r.seat}: ${r.turns} turn${r.turns === 1 ? "" : "s"} in ${cols} days`));
    chart.append(label);
    r.days.forEach((d, j) => {
      const x = WEEK_LABEL_W + j * colW;
      const kinds = { done: 0, passing: 0, trouble: 0 };
      for (const [o, n] of Object.entries(d.outcomes)) kinds[outcomeKind(o)] += n;
      const words = Object.entries(d.outcomes).map(([o, n]) => `${n} ${outcomeWords(o)}`).join(", ");
      const cell = svg("g", { class: "week-cell", "data-seat": r.seat, "data-day": d.day, "data-turns": d.turns, "data-trouble": kinds.trouble });
      cell.append(svg("title", {}, `@${r.seat}, ${dayLabel(d.day)}: ${d.turns} turn${d.turns === 1 ? "" : "s"}${words ? ` (${words})` : ""}`));
      cell.append(svg("rect", { x: x + 2, y: y + 2, width: Math.max(1, colW - 4), height: WEEK_ROW_H - 6, class: "chart-track" }));
      let top = y + WEEK_ROW_H - 4;
      for (const kind of ["done", "passing", "trouble"]) {
        const hgt = (kinds[kind] / max) * (WEEK_ROW_H - 6);
        if (hgt <= 0) continue;
        top -= hgt;
        cell.append(svg("rect", { x: x + 2, y: top, width: Math.max(1, colW - 4), height: hgt, class: `chart-bar week-${kind}` }));
      }
      if (d.turns > 0) cell.append(svg("text", { x: x + colW / 2, y: y + WEEK_ROW_H * 0.6, class: "chart-value", "text-anchor": "middle" }, String(d.turns)));
      chart.append(cell);
    });
  });
  const bottom = rows.length * WEEK_ROW_H;
  week.days.forEach((day, j) => chart.append(svg("text", { x: WEEK_LABEL_W + j * colW + colW / 2, y: bottom + 16, class: "chart-note", "text-anchor": "middle" }, dayLabel(day))));
  return h(
    "figure",
    { class: "chart-box" },
    chart,
    h("figcaption", { class: "muted" }, `Each column: a day's turns, finished (green), to run again (amber), not finished (red).${left > 0 ? ` The ${rows.length} busiest agents; ${left} more not drawn.` : ""}`),
  );
}

/** A time the API gives as ms or as an ISO string. */
function toMs(v) {
  return typeof v === "number" ? v : Date.parse(v);
}

/** Characters of a parked call's arguments shown when the agent said nothing of it. */
const CALL_TEXT_SHOWN = 240;

/** A call's arguments as one line, cut: what the agent wants to do, when it did not say. */
function callText(args) {
  const text = JSON.stringify(args ?? {});
  return text.length > CALL_TEXT_SHOWN ? `${text.slice(0, CALL_TEXT_SHOWN - 1)}…` : text;
}

/** One approval waiting on a person (GET /approvals?state=pending). */
function approvalItem(a) {
  return h(
    "li",
    { class: "waiting-item approval", "data-approval": a.id },
    h("p", {}, h("strong", {}, `@${a.seat}`), ` asks to use ${a.tool}: `, a.summary || callText(a.args)),
    h("p", { class: "muted" }, `Rule: ${a.rule} · asked `, when(toMs(a.requested_at)), " · expires ", when(toMs(a.expires_at)), a.conversation ? ` · ${place(a.conversation)}` : ""),
    h("p", {}, h("a", { href: "#approvals" }, `Decide on @${a.seat}'s ${a.tool} request`)),
  );
}

/** A coding run parked on its question. */
function parkedItem(r) {
  const target = /^chat:([^:]+):/.exec(r.conversation);
  const where = r.question?.where ? place(r.question.where) : place(r.conversation);
  return h(
    "li",
    { class: "waiting-item parked-run", "data-run": r.id },
    h("p", {}, h("strong", {}, `@${r.seat}`), `'s coding run `, h("code", { title: r.id }, shortRun(r.id)), " asks: ", h("span", { class: "run-question-text" }, r.question?.text ?? "(a question not posted yet)")),
    h("p", { class: "muted" }, `For ${r.from}${where ? ` ${where}` : ""}; a reply there mentioning @${r.seat} answers it. Waiting since `, when(r.question?.asked_at ?? r.updated_at), "."),
    h(
      "p",
      {},
      target ? [h("a", { href: `#chat/${encodeURIComponent(target[1])}` }, `Answer in #${target[1]}`), " · "] : null,
      h("a", { href: `#agent/${encodeURIComponent(r.seat)}` }, `@${r.seat}'s runs`),
    ),
  );
}

function receiptItem(r) {
  const kind = outcomeKind(r.outcome);
  const at = new Date(r.ended_at);
  const hm = `${pad2(at.getHours())}:${pad2(at.getMinutes())}`;
  const links = [h("a", { href: `#turn/${encodeURIComponent(r.seat)}/${encodeURIComponent(r.turn_id)}`, "aria-label": `Transcript of @${r.seat}'s turn at ${hm}` }, "Transcript")];
  if (r.links.work_key) links.push(h("a", { href: `#work/${encodeURIComponent(r.links.work_key)}` }, `Work item ${r.links.work_key}`));
  if (r.links.channel) links.push(h("a", { href: `#chat/${encodeURIComponent(r.links.channel)}`, "aria-label": `Thread in #${r.links.channel} (@${r.seat}'s turn at ${hm})` }, `Thread in #${r.links.channel}`));
  return h(
    "li",
    { class: `receipt receipt-${kind}`, "data-turn": r.turn_id, "data-outcome": r.outcome },
    h("p", { class: "receipt-head" }, h("span", { class: `badge outcome-${kind}` }, outcomeWords(r.outcome)), " ", when(r.ended_at), " · ", h("span", { class: "receipt-trigger" }, triggerWords(r.trigger))),
    r.summary ? h("p", { class: "receipt-summary" }, r.summary) : h("p", { class: "receipt-summary muted" }, "(no final words)"),
    r.error ? h("p", { class: "receipt-error error" }, "Why: ", r.error) : null,
    h("p", { class: "receipt-facts muted" }, `Tools: ${toolsWords(r.tools)} · ${count(r.input_tokens)} tokens in / ${count(r.output_tokens)} out · cost ${costWords(r.cost_micros)} · took ${durationWords(r.duration_ms)}`),
    h("p", { class: "receipt-links" }, links.flatMap((l, i) => (i ? [" · ", l] : [l]))),
  );
}

/** The agents that ran no turn today, named (up to IDLE_NAMED_MAX) and counted. */
function idleLine(idle) {
  if (idle.length === 0) return h("p", { class: "muted" }, "Every agent ran at least one turn today.");
  const named = idle.slice(0, IDLE_NAMED_MAX);
  const more = idle.length - named.length;
  return h(
    "p",
    { class: "muted idle-agents" },
    `No turns today: `,
    named.flatMap((seat, i) => [i ? ", " : "", h("a", { href: `#agent/${encodeURIComponent(seat)}` }, `@${seat}`)]),
    more > 0 ? ` and ${more} more` : "",
    ".",
  );
}

/** A link or control as the person knows it: where it goes and what it says. */
function focusKey(el) {
  return `${el.tagName}|${el.getAttribute("href") ?? ""}|${el.getAttribute("aria-label") ?? el.textContent}`;
}

/**
 * Rebuilds one part of the view only when what it shows changed (or its minute turned, for
 * its relative times), and puts the keyboard focus back on the same link when the person was
 * on one: the 3 s refresh must not throw a keyboard user back to the top of the page, nor
 * rebuild a page that did not change. `shown`: the data the part is drawn from. Null
 * children are left out (replaceChildren would print them as "null").
 */
function renderPart(box, shown, build) {
  const signature = `${Math.floor(Date.now() / 60_000)}|${JSON.stringify(shown)}`;
  if (box.dataset.shown === signature) return;
  box.dataset.shown = signature;
  const active = document.activeElement;
  const key = active && box.contains(active) ? focusKey(active) : null;
  box.replaceChildren(...build().filter((c) => c !== null && c !== undefined && c !== false));
  if (key !== null) [...box.querySelectorAll("a[href], button")].find((el) => focusKey(el) === key)?.focus();
}

/** Today's receipts, every page of them (at most PAGES_MAX pages of PAGE_LIMIT). */
async function readDay(day) {
  const out = [];
  let cursor = null;
  for (let page = 0; page < PAGES_MAX; page++) {
    const q = new URLSearchParams({ day, limit: String(PAGE_LIMIT) });
    if (cursor !== null) q.set("cursor", String(cursor));
    const got = await api(`/turns?${q}`);
    out.push(...got.turns);
    if (got.next === null) break;
    cursor = got.next;
  }
  return out;
}

function todayView() {
  const waitingList = h("div");
  const stuckList = h("div");
  const dayBox = h("div");
  const weekBox = h("div");
  const section = (id, title, body) => h("section", { class: "today-part", "aria-labelledby": id }, h("h3", { id }, title), body);
  const root = h(
    "div",
    { class: "today" },
    section("today-waiting", "Waiting on you", waitingList),
    section("today-stuck", "Stuck", stuckList),
    section("today-day", "What the agents did today", dayBox),
    section("today-week", "This week: turns per agent", weekBox),
  );
  let slowAt = 0;
  let slow = { stuck: null, dead: null };
  return {
    title: "Today",
    root,
    async refresh() {
      const readSlow = Date.now() - slowAt >= TODAY_SLOW_MS;
      const [agentsR, runsR, approvalsR, weekR, stuckR, deadR] = await Promise.all([
        api("/agents"),
        attempt(api("/runs?state=parked")),
        attempt(api("/approvals?state=pending")),
        attempt(api("/turns/week")),
        readSlow ? attempt(api("/turns/stuck")) : null,
        readSlow ? attempt(api("/deadletters")) : null,
      ]);
      if (readSlow) {
        slow = { stuck: stuckR, dead: deadR };
        slowAt = Date.now();
      }
      const agents = agentsR.agents;

      // Waiting on you: approvals first (a turn is parked on each), then parked runs.
      const approvals = approvalsR.ok ? approvalsR.value.approvals.filter((a) => a.state === "pending") : [];
      const parked = runsR.ok ? runsR.value.runs.filter((r) => r.state === "parked") : [];
      renderPart(waitingList, [approvals, parked, approvalsR.ok || approvalsR.err.message, runsR.ok || runsR.err.message], () => [
        approvals.length + parked.length
          ? h("ul", { class: "waiting" }, approvals.map(approvalItem), parked.map(parkedItem))
          : h("p", { class: "muted nothing-waiting" }, "Nothing is waiting on you: no approval pending, no coding run waiting for an answer."),
        approvalsR.ok ? null : notRead("approvals", approvalsR.err),
        runsR.ok ? null : notRead("coding runs", runsR.err),
      ]);

      // Stuck: quiet work, seats nobody holds, dead letters.
      const s = slow.stuck;
      const d = slow.dead;
      const unheld = agents.filter((x) => !x.holder);
      const letters = d?.ok ? d.value.dead_letters : [];
      const reasons = [...new Set(letters.map((l) => l.reason).filter(Boolean))].slice(0, 3);
      renderPart(stuckList, [s?.ok ? s.value : s?.err.message, unheld.map((a) => [a.handle, a.paused]), letters.length, reasons, d?.ok || d?.err.message], () => {
        const stuck = [];
        for (const w of s?.ok ? s.value.work : []) {
          stuck.push(
            h(
              "li",
              { class: "stuck-work", "data-work": w.key },
              h("a", { href: `#work/${encodeURIComponent(w.key)}` }, w.key),
              ` ${w.title} — @${w.assignee}, in progress, quiet for ${durationWords(w.quiet_ms)} (`,
              w.last_turn_at ? ["last turn ", when(w.last_turn_at)] : "no turn on it yet",
              ")",
            ),
          );
        }
        for (const a of unheld) {
          stuck.push(h("li", { class: "stuck-seat", "data-seat": a.handle }, h("a", { href: `#agent/${encodeURIComponent(a.handle)}` }, `@${a.handle}`), ` is held by no node${a.paused ? ` (paused by ${a.paused.by})` : ""}: its mail waits until a node takes it.`));
        }
        if (letters.length) {
          stuck.push(
            h(
              "li",
              { class: "stuck-dead" },
              h("a", { href: "#ops/deadletters" }, `${letters.length} dead letter${letters.length === 1 ? "" : "s"}`),
              `: mail given up on${reasons.length ? ` (${reasons.join("; ")})` : ""}.`,
            ),
          );
        }
        return [
          stuck.length ? h("ul", { class: "stuck" }, stuck) : h("p", { class: "muted" }, "Nothing is stuck."),
          s?.ok ? h("p", { class: "muted" }, `Work counts as stuck after ${s.value.stuck_after_minutes} minute${s.value.stuck_after_minutes === 1 ? "" : "s"} with no turn on it (company.today.stuck_after_minutes).`) : null,
          s && !s.ok ? notRead("stuck work", s.err) : null,
          d && !d.ok ? notRead("dead letters", d.err) : null,
        ];
      });

      // Today, per agent: a receipt per turn.
      if (!weekR.ok) {
        renderPart(dayBox, weekR.err.message, () => [notRead("the turn ledger", weekR.err)]);
        renderPart(weekBox, "", () => []);
        return;
      }
      const week = weekR.value;
      const today = week.days[week.days.length - 1];
      const receipts = await readDay(today);
      const handles = agents.map((a) => a.handle);
      renderPart(dayBox, [today, week.timezone, handles, receipts], () => {
        const groups = bySeat(receipts, handles);
        return [
          h("p", { class: "today-total" }, h("strong", {}, `${dayLabel(today)} (${week.timezone}): `), tallyWords(tallies(receipts))),
          ...groups
            .filter((g) => g.receipts.length > 0)
            .map((g) =>
              h(
                "article",
                { class: "today-agent", "data-seat": g.seat, "aria-labelledby": `today-agent-${g.seat}` },
                h("h4", { id: `today-agent-${g.seat}` }, h("a", { href: `#agent/${encodeURIComponent(g.seat)}` }, `@${g.seat}`), " · ", h("span", { class: "agent-tally" }, tallyWords(tallies(g.receipts)))),
                h("ol", { class: "receipts" }, g.receipts.map(receiptItem)),
              ),
            ),
          idleLine(groups.filter((g) => g.receipts.length === 0).map((g) => g.seat)),
        ];
      });
      renderPart(weekBox, week, () => [weekChart(`Turns per agent per day, the last ${week.days.length} days`, week), h("p", {}, "Cost per day is on the ", h("a", { href: "#spend" }, "Spend"), " view.")]);
    },
  };
}

registerView("today", todayView);
