// GET /metrics on a real one-box node running the root company: after the scripted "ask
// @ceo for a plan" history, a scrape parses as the Prometheus text format (a third-party
// parser, and a strict line check of our own) and carries the named series with the counts
// that history implies. The mapping from log lines to series is table-tested apart.
import { afterAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import parsePrometheusTextFormat, { type Family } from "parse-prometheus-text-format";
import { parse } from "yaml";
import { FakeClock } from "../../src/clock.ts";
import { createLogger, MemorySink } from "../../src/log.ts";
import { NodeMetrics } from "../../src/metrics/node-metrics.ts";
import { observedLogger } from "../../src/metrics/observed-logger.ts";
import { claimReason } from "../../src/seat/host.ts";
import { askCeoForAPlan, until } from "../e2e/support.ts";
import { makeFleet, TEST_TOKEN, type Fleet } from "../support/fleet.ts";

/** Every line of a text exposition: a comment (HELP/TYPE), or `name{labels} value`. */
const SAMPLE_LINE = /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*",?)*\})? (-?[0-9.e+-]+|NaN|[+-]Inf)$/;
const COMMENT_LINE = /^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .*$/;

function strictLines(text: string): void {
  for (const line of text.split("\n")) {
    if (line === "") continue;
    if (!SAMPLE_LINE.test(line) && !COMMENT_LINE.test(line)) throw new Error(`not a Prometheus text-format line: ${line}`);
  }
}

function family(fams: Family[], name: string): Family {
  const f = fams.find((x) => x.name === name);
  if (!f) throw new Error(`no ${name} in the scrape (has ${fams.map((x) => x.name).join(", ")})`);
  return f;
}

const sum = (f: Family, where: (l: Record<string, string>) => boolean = () => true): number =>
  f.metrics.filter((m) => where(m.labels ?? {})).reduce((a, m) => a + Number(m.value ?? m.buckets?.["+Inf"] ?? 0), 0);

describe("log lines to series (a table)", () => {
  const cases: { line: [string, Record<string, unknown>]; series: string; labels: Record<string, string>; value: number }[] = [
    { line: ["turn_completed", { seat: "ceo", outcome: "answered", tokens: { input: 10, output: 3 } }], series: "crewlet_turns_total", labels: { outcome: "answered" }, value: 1 },
    { line: ["turn_completed", { seat: "ceo", outcome: "answered", tokens: { input: 10, output: 3 } }], series: "crewlet_tokens_total", labels: { seat: "ceo", direction: "output" }, value: 3 },
    { line: ["tool_called", { seat: "ceo", tool: "work_create", ok: true }], series: "crewlet_tool_calls_total", labels: { tool: "work_create", ok: "true" }, value: 1 },
    { line: ["model_called", { provider: "p", ok: false, error_kind: "timeout", duration_ms: 5 }], series: "crewlet_provider_errors_total", labels: { provider: "p", kind: "timeout" }, value: 1 },
    { line: ["model_called", { provider: "p", ok: true, duration_ms: 5 }], series: "crewlet_provider_calls_total", labels: { provider: "p" }, value: 1 },
    { line: ["seat_claimed", { seat: "ceo", epoch: 1, reason: "first" }], series: "crewlet_seat_claims_total", labels: { reason: "first" }, value: 1 },
    { line: ["seat_claimed", { seat: "ceo", epoch: 7, reason: "free" }], series: "crewlet_seat_claims_total", labels: { reason: "free" }, value: 1 },
    { line: ["seat_claimed", { seat: "ceo", epoch: 7, reason: "free" }], series: "crewlet_seat_claims_total", labels: { reason: "first" }, value: 0 },
    { line: ["seat_claimed", { seat: "ceo", epoch: 3, reason: "takeover" }], series: "crewlet_seat_claims_total", labels: { reason: "takeover" }, value: 1 },
    { line: ["seat_detached", { seat: "ceo", reason: "drain", mode: "voluntary" }], series: "crewlet_seat_releases_total", labels: { reason: "drain", mode: "voluntary" }, value: 1 },
    { line: ["duty_tick", { duty: "maintenance", outcome: "ok" }], series: "crewlet_duty_ticks_total", labels: { duty: "maintenance", outcome: "ok" }, value: 1 },
    { line: ["duty_tick_skipped", { duty: "maintenance", reason: "busy" }], series: "crewlet_duty_ticks_total", labels: { duty: "maintenance", outcome: "skipped" }, value: 1 },
    { line: ["seat_probe_sent", { seat: "s1", probe: "x-1" }], series: "crewlet_seat_mailbox_probes_total", labels: { result: "sent" }, value: 1 },
    { line: ["seat_probe_heard", { seat: "s1", probe: "x-1", rtt_ms: 3 }], series: "crewlet_seat_mailbox_probes_total", labels: { result: "heard" }, value: 1 },
    { line: ["seat_mailbox_deaf", { seat: "s1", reason: "probe_unheard", heal: "rewind" }], series: "crewlet_seat_mailbox_deaf_total", labels: { reason: "probe_unheard" }, value: 1 },
    { line: ["spend_charged", { seat: "cto", provider: "p", input_tokens: 1000, output_tokens: 100, cost_micros: 3_000 }], series: "crewlet_spend_total", labels: { seat: "cto" }, value: 0.003 },
    // No pricing: no money to count (tokens are counted by crewlet_tokens_total).
    { line: ["spend_charged", { seat: "cto", provider: "p", input_tokens: 1000, output_tokens: 100, cost_micros: null }], series: "crewlet_spend_total", labels: { seat: "cto" }, value: 0 },
    { line: ["seat_failover", { seat: "cto", from: "node-a", epoch: 4 }], series: "crewlet_seat_failovers_total", labels: {}, value: 1 },
    // A malformed field moves nothing and throws nothing.
    { line: ["turn_completed", { seat: "ceo", outcome: "answered", tokens: { input: "lots", output: -4 } }], series: "crewlet_tokens_total", labels: { seat: "ceo", direction: "input" }, value: 0 },
  ];
  for (const c of cases) {
    test(`${c.line[0]} → ${c.series}${JSON.stringify(c.labels)} = ${c.value}`, async () => {
      const m = new NodeMetrics("n1", new FakeClock(0));
      m.observe(c.line[0], c.line[1]);
      const fams = parsePrometheusTextFormat((await m.scrape()).body);
      expect(sum(family(fams, c.series), (l) => Object.entries(c.labels).every(([k, v]) => l[k] === v))).toBe(c.value);
    });
  }

  test.each([
    [1, undefined, "first"],
    // Epoch 1 is a seat's first tenure whatever the pass read (no lease can precede it).
    [1, { live: false, predecessor: false }, "first"],
    [4, undefined, "free"],
    [4, { live: false, predecessor: true }, "free"],
    [4, { live: true, predecessor: true }, "takeover"],
    [4, { live: true, predecessor: false }, "free"],
  ] as const)("a claim at epoch %d over %j is labelled %s", (epoch, seen, reason) => {
    const fact = seen === undefined ? undefined : { node_id: "a", mine: false, protocol: 4, ...seen };
    expect(claimReason(epoch, fact)).toBe(reason);
  });

  test("a debug line counts through an info logger, and children carry their fields", async () => {
    const m = new NodeMetrics("n1", new FakeClock(0));
    const sink = new MemorySink();
    const log = observedLogger(createLogger({ level: "info", sinks: [sink] }), (e, f) => m.observe(e, f));
    log.child({ seat: "ceo" }).debug("model_called", { provider: "p", ok: true, duration_ms: 1500 });
    expect(sink.lines.length).toBe(0); // filtered from the log
    const fams = parsePrometheusTextFormat((await m.scrape()).body);
    const h = family(fams, "crewlet_provider_latency_seconds");
    expect(h.type).toBe("HISTOGRAM");
    expect(h.metrics[0]!.buckets!["+Inf"]).toBe("1");
    expect(h.metrics[0]!.buckets!["1"]).toBe("0");
    expect(h.metrics[0]!.buckets!["2.5"]).toBe("1");
  });
});

const rootCompany = (parse(readFileSync(resolve(import.meta.dir, "../../crewlet.yaml"), "utf8")) as { company: unknown }).company;
let fleet: Fleet | null = null;
afterAll(async () => {
  await fleet?.stop();
});

test("a scrape after a scripted turn history parses and has the named series", async () => {
  // The node logs at info: model calls and duty ticks are debug lines, and must count anyway.
  fleet = await makeFleet({ nodes: [{ id: "node-1", kind: "member" }], company: rootCompany, logLevel: "info" });
  const node = fleet.node("node-1");
  await node.start();
  await node.waitReady(60_000);

  expect((await fetch(`${node.apiUrl}/metrics`)).status).toBe(401);

  await askCeoForAPlan(node.apiUrl);
  // @ceo answered, then @cto and @pm picked up their items: three turns at least. The
  // items read in progress once the pick-up's tool ran; its turn completes just after.
  const { text, fams, turns } = await until("three completed turns in a scrape", async () => {
    const res = await fetch(`${node.apiUrl}/metrics`, { headers: { authorization: `Bearer ${TEST_TOKEN}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/plain; version=0.0.4");
    const text = await res.text();
    strictLines(text);
    const fams = parsePrometheusTextFormat(text);
    const turns = family(fams, "crewlet_turns_total");
    return sum(turns) >= 3 ? { text, fams, turns } : null;
  });
  expect(turns.type).toBe("COUNTER");
  expect(turns.metrics.every((m) => m.labels?.node === "node-1" && typeof m.labels?.outcome === "string")).toBe(true);
  // @ceo's turn created two work items and posted: tool calls, all ok.
  expect(sum(family(fams, "crewlet_tool_calls_total"), (l) => l.ok === "true")).toBeGreaterThanOrEqual(2);
  // One model call per round, at least one round per turn; each timed in the histogram.
  const calls = sum(family(fams, "crewlet_provider_calls_total"));
  expect(calls).toBeGreaterThanOrEqual(sum(turns));
  const latency = family(fams, "crewlet_provider_latency_seconds");
  expect(latency.type).toBe("HISTOGRAM");
  expect(sum(latency)).toBe(calls); // the +Inf bucket counts every observation
  expect(text).toMatch(new RegExp(`^crewlet_provider_latency_seconds_count\\{[^}]*\\} ${calls}$`, "m"));
  expect(family(fams, "crewlet_provider_errors_total").type).toBe("COUNTER");
  expect(family(fams, "crewlet_tokens_total").metrics.some((m) => m.labels?.seat === "ceo")).toBe(true);
  // The four agent seats, claimed and held here; each inbox's depth is read.
  expect(sum(family(fams, "crewlet_seats_held"))).toBe(4);
  // A fresh one-box node: each claim is its seat's first tenure, and says so.
  const claims = family(fams, "crewlet_seat_claims_total");
  expect(sum(claims, (l) => l.reason === "first")).toBeGreaterThanOrEqual(4);
  expect(claims.metrics.map((m) => m.labels?.reason)).toEqual(["first"]);
  expect(family(fams, "crewlet_seat_releases_total").type).toBe("COUNTER");
  // Nobody failed over on a one-box node; the series is there, at zero.
  expect(family(fams, "crewlet_seat_failovers_total").type).toBe("COUNTER");
  expect(sum(family(fams, "crewlet_seat_failovers_total"))).toBe(0);
  // Spend in money by seat: the root company's scripted provider has no pricing, so the
  // family is declared with no seat yet (priced figures: the table above and test/spend).
  expect(family(fams, "crewlet_spend_total").type).toBe("COUNTER");
  expect(family(fams, "crewlet_mailbox_depth").metrics.map((m) => m.labels?.seat).sort()).toEqual(["ceo", "cto", "engineer", "pm"]);
  // The estate: chat and work were written, so their positions moved; lag per domain.
  const applied = family(fams, "crewlet_estate_applied_position");
  for (const domain of ["chat", "tracker"]) expect(sum(applied, (l) => l.domain === domain)).toBeGreaterThan(0);
  // Lag is known once the copy has read the log's end (its check runs every 5 s); until
  // then the series is absent rather than a guess.
  const lag = await until("apply lag for every domain", async () => {
    const again = await fetch(`${node.apiUrl}/metrics`, { headers: { authorization: `Bearer ${TEST_TOKEN}` } });
    const f = family(parsePrometheusTextFormat(await again.text()), "crewlet_estate_apply_lag");
    return f.metrics.length === applied.metrics.length ? f : null;
  });
  for (const m of lag.metrics) expect(Number(m.value)).toBeGreaterThanOrEqual(0);
  expect(family(fams, "crewlet_duty_ticks_total").type).toBe("COUNTER");
}, 180_000);
