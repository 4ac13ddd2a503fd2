// ---- Spend -----------------------------------------------------------------------------
// Model spend against the company's budgets (GET /budgets: each scope's cap, spent and
// window reset, read from the fleet's shared counters), as bars with the soft-alert line
// and the cap, the top spenders, and each seat's tokens since its holder started (GET
// /agents), and one scope's last 30 days (GET /budgets/history), in money when prices are
// configured. The charts are SVG drawn here: a bar per cap, its label as text.

const SVG_NS = "http://www.w3.org/2000/svg";
/** Bars are drawn up to this multiple of the cap, so an overshoot still shows. */
const CHART_MAX_FRACTION = 1.25;
const BAR_H = 22;
const BAR_GAP = 8;
const LABEL_W = 190;
const CHART_W = 640;
/** Spenders listed at most. */
const TOP_SPENDERS = 5;

/** One SVG element. The two charts are drawn with it, not uPlot or Chart.js: they are fifty
 * lines, and both libraries paint a canvas, losing each bar's text (its title, what a screen
 * reader and the tests read), and neither draws bars against a cap line without plugins. */
function svg(tag, attrs, text) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

function scopeLabel(scope) {
  return scope === "org" ? "Whole company" : `@${scope.replace(/^seat:/, "")}`;
}

function spentText(b) {
  const parts = [];
  if (b.cap.tokens !== undefined) parts.push(`${count(b.spent.tokens)} / ${count(b.cap.tokens)} tokens`);
  if (b.cap.money !== undefined) parts.push(`${b.spent.money.toFixed(2)} / ${b.cap.money.toFixed(2)} money`);
  if (!parts.length) parts.push(`${count(b.spent.tokens)} tokens`);
  // Priced models read in money too, even under a cap in tokens.
  if (b.cap.money === undefined && b.spent.money > 0) parts.push(`${b.spent.money.toFixed(4)} money`);
  return parts.join(" · ");
}

/**
 * Horizontal bars: each row a label, a bar whose length is its fraction, the soft-alert
 * line and the cap line across all rows. `rows`: {label, fraction, text, cls}.
 */
function barChart(title, rows, soft) {
  const plotW = CHART_W - LABEL_W - 10;
  const height = rows.length * (BAR_H + BAR_GAP) + 24;
  const x = (f) => LABEL_W + Math.min(f, CHART_MAX_FRACTION) / CHART_MAX_FRACTION * plotW;
  const chart = svg("svg", { viewBox: `0 0 ${CHART_W} ${height}`, role: "img", "aria-label": title, class: "chart", width: "100%" });
  chart.append(svg("title", {}, title));
  rows.forEach((r, i) => {
    const y = i * (BAR_H + BAR_GAP);
    chart.append(svg("text", { x: 0, y: y + BAR_H * 0.7, class: "chart-label" }, r.label));
    chart.append(svg("rect", { x: LABEL_W, y, width: plotW, height: BAR_H, class: "chart-track" }));
    chart.append(svg("rect", { x: LABEL_W, y, width: Math.max(1, x(r.fraction) - LABEL_W), height: BAR_H, class: `chart-bar ${r.cls}`, "data-scope": r.label }));
    chart.append(svg("text", { x: LABEL_W + 6, y: y + BAR_H * 0.7, class: "chart-value" }, r.text));
  });
  const bottom = rows.length * (BAR_H + BAR_GAP);
  if (soft !== null) {
    chart.append(svg("line", { x1: x(soft), x2: x(soft), y1: 0, y2: bottom, class: "chart-alert" }));
    chart.append(svg("text", { x: x(soft), y: bottom + 16, class: "chart-note", "text-anchor": "middle" }, `alert ${Math.round(soft * 100)}%`));
    chart.append(svg("line", { x1: x(1), x2: x(1), y1: 0, y2: bottom, class: "chart-cap" }));
    chart.append(svg("text", { x: x(1), y: bottom + 16, class: "chart-note", "text-anchor": "middle" }, "cap"));
  }
  return h("figure", { class: "chart-box" }, chart);
}

/** Days of history the chart shows (the counters keep 32). */
const HISTORY_DAYS = 30;
const COL_CHART_H = 160;

/** A sum of money as the cards show it: four decimals below one (a round costs fractions of a cent), two above. */
function moneyText(v) {
  return v >= 1 ? v.toFixed(2) : v.toFixed(4);
}

/**
 * One figure per day as columns, oldest on the left; the newest day's label and every 7th.
 * `unit` is "money" (each day's cost at the configured prices) or "tokens"; every column
 * carries both figures (data-tokens, data-money and its tooltip).
 */
function dayChart(title, days, unit) {
  const shown = [...days].reverse();
  const value = (d) => (unit === "money" ? d.money : d.tokens);
  const max = unit === "money" ? Math.max(0, ...shown.map(value)) : Math.max(1, ...shown.map(value));
  const colW = (CHART_W - 60) / shown.length;
  const chart = svg("svg", { viewBox: `0 0 ${CHART_W} ${COL_CHART_H + 30}`, role: "img", "aria-label": title, class: `chart day-chart day-chart-${unit}`, width: "100%" });
  chart.append(svg("title", {}, title));
  chart.append(svg("text", { x: 0, y: 12, class: "chart-note" }, unit === "money" ? `${moneyText(max)} money` : `${count(max)} tokens`));
  chart.append(svg("line", { x1: 56, x2: CHART_W, y1: COL_CHART_H, y2: COL_CHART_H, class: "chart-axis" }));
  shown.forEach((d, i) => {
    const v = value(d);
    const hgt = max > 0 ? (v / max) * (COL_CHART_H - 20) : 0;
    const x = 60 + i * colW;
    const day = new Date(new Date(d.reset_at).getTime() - 1);
    const label = `${day.getDate()} ${day.toLocaleString("en", { month: "short" })}`;
    const bar = svg("rect", { x: x + 1, y: COL_CHART_H - hgt, width: Math.max(1, colW - 2), height: Math.max(hgt, v > 0 ? 1 : 0), class: `chart-bar bar-${unit}`, "data-day": label, "data-tokens": d.tokens, "data-money": d.money });
    bar.append(svg("title", {}, `${label}: ${count(d.tokens)} tokens${d.money > 0 ? ` · ${moneyText(d.money)} money` : ""}`));
    chart.append(bar);
    // The newest day's label ends at the chart's edge rather than being cut by it.
    const last = i === shown.length - 1;
    if (last || (shown.length - 1 - i) % 7 === 0) chart.append(svg("text", { x: last ? x + colW : x + colW / 2, y: COL_CHART_H + 16, class: "chart-note", "text-anchor": last ? "end" : "middle" }, label));
  });
  return h("figure", { class: "chart-box" }, chart);
}

function spendView() {
  const root = h("div");
  let windowChoice = "";
  const windowSelect = h("select", { id: "spend-window" });
  windowSelect.addEventListener("change", () => {
    windowChoice = windowSelect.value;
    refreshNow();
  });
  let historyScope = "";
  const historySelect = h("select", { id: "spend-history-scope" });
  historySelect.addEventListener("change", () => {
    historyScope = historySelect.value;
    refreshNow();
  });
  const historyBox = h("div");
  // The week's turns and outcomes per agent beside the spend (GET /turns/week; today.client.js).
  const weekBox = h("div");
  return {
    title: "Spend",
    root,
    async refresh() {
      const [budgets, { agents }, weekR] = await Promise.all([readBudgets(), api("/agents"), attempt(api("/turns/week"))]);
      weekBox.replaceChildren(weekR.ok ? weekChart(`Turns per agent per day, the last ${weekR.value.days.length} days`, weekR.value) : notRead("the turn ledger", weekR.err));
      if (budgets !== null) {
        const scopes = ["org", ...agents.map((a) => `seat:${a.handle}`)];
        if (JSON.stringify(scopes) !== JSON.stringify([...historySelect.options].map((o) => o.value))) {
          historySelect.replaceChildren(...scopes.map((sc) => h("option", { value: sc }, scopeLabel(sc))));
        }
        // The first scope a day cap counts, unless the person chose one.
        if (!historyScope) historyScope = budgets.budgets.find((b) => b.window === "day")?.scope ?? "org";
        historySelect.value = historyScope;
        try {
          const hist = await api(`/budgets/history?${new URLSearchParams({ scope: historyScope, days: String(HISTORY_DAYS) })}`);
          // In money when a price is configured: the API says so only by charging money (a
          // priced provider's every round costs something), so any day with money means prices.
          const unit = hist.days.some((d) => d.money > 0) ? "money" : "tokens";
          historyBox.replaceChildren(
            hist.counted
              ? dayChart(`${scopeLabel(historyScope)}: ${unit} per day, the last ${HISTORY_DAYS} days`, hist.days, unit)
              : h("p", { class: "muted" }, `No day cap holds ${scopeLabel(historyScope)}, so its days are not counted (counters are kept per cap).`),
          );
        } catch (err) {
          if (err instanceof AuthError) throw err;
          historyBox.replaceChildren(h("p", { class: "muted" }, `Spend history unavailable: ${err.message}.`));
        }
      }
      const held = agents.filter((a) => a.turns);
      const tokenMax = Math.max(1, ...held.map((a) => a.turns.input_tokens + a.turns.output_tokens));
      const tokenChart = held.length
        ? barChart(
            "Tokens per seat since its holder started",
            [...held]
              .sort((a, b) => b.turns.input_tokens + b.turns.output_tokens - (a.turns.input_tokens + a.turns.output_tokens))
              .map((a) => ({ label: `@${a.handle}`, fraction: (a.turns.input_tokens + a.turns.output_tokens) / tokenMax, text: `${count(a.turns.input_tokens)} in / ${count(a.turns.output_tokens)} out`, cls: "bar-tokens" })),
            null,
          )
        : h("p", { class: "muted" }, "No seat is held on this node; open the dashboard of a node that holds seats to see their tokens.");
      if (budgets === null) {
        root.replaceChildren(h("p", {}, "This node keeps no spend counters, so no budgets are shown."), h("h3", {}, "Tokens per seat"), tokenChart, h("h3", {}, "Turns per agent this week"), weekBox);
        return;
      }
      const soft = budgets.soft_alert ?? BUDGET_NEAR_FRACTION;
      const windows = [...new Set(budgets.budgets.map((b) => b.window))];
      if (JSON.stringify(windows) !== JSON.stringify([...windowSelect.options].map((o) => o.value).slice(1))) {
        windowSelect.replaceChildren(h("option", { value: "" }, "Every window"), windows.map((w) => h("option", { value: w }, w)));
      }
      windowSelect.value = windows.includes(windowChoice) ? windowChoice : "";
      const shown = budgets.budgets.filter((b) => !windowSelect.value || b.window === windowSelect.value).sort((a, b) => (a.scope === "org" ? -1 : b.scope === "org" ? 1 : b.fraction - a.fraction));
      const cls = (b) => (b.exhausted ? "bar-over" : b.fraction >= soft ? "bar-near" : "bar-ok");
      const rows = shown.map((b) =>
        h(
          "tr",
          {},
          h("th", { scope: "row" }, b.scope === "org" ? scopeLabel(b.scope) : h("a", { href: `#agent/${encodeURIComponent(b.scope.replace(/^seat:/, ""))}` }, scopeLabel(b.scope))),
          h("td", {}, b.window),
          h("td", { class: "num" }, spentText(b)),
          h("td", { class: `num ${b.exhausted ? "error" : b.fraction >= soft ? "busy" : ""}` }, `${Math.round(b.fraction * 100)}%${b.exhausted ? " · over cap" : b.fraction >= soft ? " · near cap" : ""}`),
          h("td", {}, when(b.reset_at)),
        ),
      );
      const spenders = budgets.budgets
        .filter((b) => b.scope !== "org" && b.spent.tokens > 0)
        .sort((a, b) => b.spent.money - a.spent.money || b.spent.tokens - a.spent.tokens)
        .filter((b, i, all) => all.findIndex((x) => x.scope === b.scope) === i)
        .slice(0, TOP_SPENDERS);
      root.replaceChildren(
        h("div", { class: "filters" }, h("label", { for: "spend-window" }, "Window "), windowSelect),
        shown.length
          ? barChart(`Spend against each cap${windowSelect.value ? ` (${windowSelect.value})` : ""}; the alert line at ${Math.round(soft * 100)}%`, shown.map((b) => ({ label: `${scopeLabel(b.scope)} · ${b.window}`, fraction: b.fraction, text: spentText(b), cls: cls(b) })), soft)
          : h("p", { class: "muted" }, "No budget is configured (company.budgets): spend is counted only against caps."),
        table("Budgets: spent, cap and when each window resets", ["Scope", "Window", "Spent / cap", "Used", "Resets"], rows, "No caps."),
        h("h3", {}, `The last ${HISTORY_DAYS} days`),
        h("div", { class: "filters" }, h("label", { for: "spend-history-scope" }, "Scope "), historySelect),
        historyBox,
        h("h3", {}, "Turns per agent this week"),
        weekBox,
        h("h3", {}, "Top spenders"),
        spenders.length ? h("ol", { class: "plain" }, spenders.map((b) => h("li", {}, `${scopeLabel(b.scope)} · ${spentText(b)} this ${b.window}`))) : h("p", { class: "muted" }, "Nobody has spent anything in the current windows."),
        h("h3", {}, "Tokens per seat"),
        tokenChart,
      );
    },
  };
}

registerView("spend", spendView);
