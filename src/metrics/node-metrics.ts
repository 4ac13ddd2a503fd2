// The node's Prometheus metrics (prom-client, one registry per node so two nodes in one
// test process never share counts). Counters and the latency histogram are fed from ONE
// place: the node's structured log lines (observe(), wired by observedLogger), so a metric
// counts exactly what the log tells; nothing else in the code base touches a counter.
// Gauges (seats held, mailbox depth, estate positions and lag) are read at scrape time
// from the node's own views (GaugeSources), so they are never stale.
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { Clock } from "../clock.ts";
import type { Fields } from "../log.ts";

/** What the gauges read at scrape time; each may be absent on a node without that part. */
export interface GaugeSources {
  /** Seats this node holds. */
  seatsHeld?: () => readonly string[];
  /** Messages waiting in a held seat's inbox (broker's num_pending), null when unknown. */
  mailboxDepth?: (handle: string) => Promise<number | null>;
  /** Per estate domain: position applied here and how far behind the log's last it is. */
  estate?: () => Record<string, { applied: number; lag: number | null }> | null;
}

/**
 * Model call latency buckets (seconds): a scripted provider answers in ~1 ms, a hosted
 * model in 0.5–30 s, and a call past 120 s is a timeout in all but name.
 */
export const PROVIDER_LATENCY_BUCKETS = [0.005, 0.05, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

/** A mailbox inspection per held seat at scrape time; past this a seat's depth is skipped
 * rather than holding the scrape (Prometheus' default scrape timeout is 10 s). */
const MAILBOX_INSPECT_TIMEOUT_MS = 2_000;

const str = (v: unknown, fallback = "unknown"): string => (typeof v === "string" && v.length > 0 ? v : fallback);
const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : 0);

export class NodeMetrics {
  readonly registry = new Registry();
  private sources: GaugeSources = {};
  private readonly turns: Counter<"outcome">;
  private readonly toolCalls: Counter<"tool" | "ok">;
  private readonly providerCalls: Counter<"provider">;
  private readonly providerErrors: Counter<"provider" | "kind">;
  private readonly providerLatency: Histogram<"provider">;
  private readonly tokens: Counter<"seat" | "direction">;
  private readonly spend: Counter<"seat">;
  private readonly failovers: Counter<never>;
  private readonly claims: Counter<"reason">;
  private readonly releases: Counter<"reason" | "mode">;
  private readonly dutyTicks: Counter<"duty" | "outcome">;
  private readonly probes: Counter<"result">;
  private readonly deaf: Counter<"reason">;

  constructor(nodeId: string, private readonly clock: Clock) {
    this.registry.setDefaultLabels({ node: nodeId });
    const registers = [this.registry];
    this.turns = new Counter({ name: "crewlet_turns_total", help: "Turns completed on this node, by outcome", labelNames: ["outcome"], registers });
    this.toolCalls = new Counter({ name: "crewlet_tool_calls_total", help: "Tool calls made by turns on this node", labelNames: ["tool", "ok"], registers });
    this.providerCalls = new Counter({ name: "crewlet_provider_calls_total", help: "Model calls (one per round, retries inside)", labelNames: ["provider"], registers });
    this.providerErrors = new Counter({ name: "crewlet_provider_errors_total", help: "Model calls that failed, by error kind", labelNames: ["provider", "kind"], registers });
    this.providerLatency = new Histogram({ name: "crewlet_provider_latency_seconds", help: "Model call duration", labelNames: ["provider"], buckets: PROVIDER_LATENCY_BUCKETS, registers });
    this.tokens = new Counter({ name: "crewlet_tokens_total", help: "Model tokens used by turns, by seat", labelNames: ["seat", "direction"], registers });
    this.spend = new Counter({ name: "crewlet_spend_total", help: "Money spent on model calls by seat (turns and reflections), in the currency of providers.llm.*.pricing; priced providers only", labelNames: ["seat"], registers });
    this.failovers = new Counter({ name: "crewlet_seat_failovers_total", help: "Seats this node claimed whose previous holder had not let them go (seat_failover)", registers });
    this.claims = new Counter({ name: "crewlet_seat_claims_total", help: "Seats claimed by this node, by why the seat was free (free, lapsed, takeover: src/seat/host.ts claimReason)", labelNames: ["reason"], registers });
    this.releases = new Counter({ name: "crewlet_seat_releases_total", help: "Seats this node let go, by reason", labelNames: ["reason", "mode"], registers });
    this.dutyTicks = new Counter({ name: "crewlet_duty_ticks_total", help: "Duty ticks run on this node, by outcome", labelNames: ["duty", "outcome"], registers });
    this.probes = new Counter({ name: "crewlet_seat_mailbox_probes_total", help: "Inbox probes this node's holder sent and heard back (seat/mailbox-watch.ts)", labelNames: ["result"], registers });
    this.deaf = new Counter({ name: "crewlet_seat_mailbox_deaf_total", help: "Deaf-seat alarms raised on this node, by reason", labelNames: ["reason"], registers });
    const self = this;
    new Gauge({
      name: "crewlet_seats_held",
      help: "Seats this node holds now",
      registers,
      collect() {
        this.set(self.sources.seatsHeld?.().length ?? 0);
      },
    });
    new Gauge({
      name: "crewlet_mailbox_depth",
      help: "Messages waiting in a held seat's inbox",
      labelNames: ["seat"],
      registers,
      async collect() {
        this.reset();
        const depth = self.sources.mailboxDepth;
        if (!depth) return;
        const held = self.sources.seatsHeld?.() ?? [];
        const read = await Promise.all(held.map((h) => withTimeout(self.clock, depth(h), MAILBOX_INSPECT_TIMEOUT_MS).catch(() => null)));
        held.forEach((h, i) => {
          const n = read[i];
          if (typeof n === "number") this.set({ seat: h }, n);
        });
      },
    });
    new Gauge({
      name: "crewlet_estate_applied_position",
      help: "Estate log position applied to this node's copy, per domain",
      labelNames: ["domain"],
      registers,
      collect() {
        this.reset();
        for (const [domain, d] of Object.entries(self.sources.estate?.() ?? {})) this.set({ domain }, d.applied);
      },
    });
    new Gauge({
      name: "crewlet_estate_apply_lag",
      help: "Records in the estate log not yet applied to this node's copy, per domain",
      labelNames: ["domain"],
      registers,
      collect() {
        this.reset();
        for (const [domain, d] of Object.entries(self.sources.estate?.() ?? {})) if (d.lag !== null) this.set({ domain }, d.lag);
      },
    });
  }

  /** The node's views, once it has them (set during boot). */
  setSources(sources: GaugeSources): void {
    this.sources = { ...this.sources, ...sources };
  }

  /** One structured log line. Never throws: metrics must not break the work. */
  observe(event: string, f: Fields): void {
    try {
      switch (event) {
        case "turn_completed": {
          this.turns.inc({ outcome: str(f.outcome) });
          const t = (f.tokens ?? {}) as { input?: unknown; output?: unknown };
          const seat = str(f.seat);
          this.tokens.inc({ seat, direction: "input" }, num(t.input));
          this.tokens.inc({ seat, direction: "output" }, num(t.output));
          break;
        }
        case "tool_called":
          this.toolCalls.inc({ tool: str(f.tool), ok: f.ok === true ? "true" : "false" });
          break;
        case "model_called": {
          const provider = str(f.provider);
          this.providerCalls.inc({ provider });
          if (f.ok !== true) this.providerErrors.inc({ provider, kind: str(f.error_kind, "other") });
          this.providerLatency.observe({ provider }, num(f.duration_ms) / 1000);
          break;
        }
        case "spend_charged":
          // null: the provider has no pricing, so there is no money to count (tokens still are).
          if (typeof f.cost_micros === "number") this.spend.inc({ seat: str(f.seat) }, num(f.cost_micros) / 1_000_000);
          break;
        case "seat_claimed":
          this.claims.inc({ reason: str(f.reason) });
          break;
        case "seat_failover":
          this.failovers.inc();
          break;
        case "seat_detached":
          this.releases.inc({ reason: str(f.reason), mode: str(f.mode) });
          break;
        case "seat_orphan_released":
          this.releases.inc({ reason: "orphan", mode: "voluntary" });
          break;
        case "duty_tick":
          this.dutyTicks.inc({ duty: str(f.duty), outcome: str(f.outcome) });
          break;
        case "duty_tick_skipped":
          this.dutyTicks.inc({ duty: str(f.duty), outcome: "skipped" });
          break;
        case "seat_probe_sent":
          this.probes.inc({ result: "sent" });
          break;
        case "seat_probe_heard":
          this.probes.inc({ result: "heard" });
          break;
        case "seat_mailbox_deaf":
          this.deaf.inc({ reason: str(f.reason) });
          break;
      }
    } catch {
      // A malformed field is the log's to show; the counter simply does not move.
    }
  }

  /** The scrape: Prometheus text exposition format. */
  async scrape(): Promise<{ body: string; contentType: string }> {
    return { body: await this.registry.metrics(), contentType: this.registry.contentType };
  }
}

function withTimeout<T>(clock: Clock, p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = clock.setTimeout(() => reject(new Error("timeout")), ms);
    p.then(
      (v) => (t.cancel(), resolve(v)),
      (e: unknown) => (t.cancel(), reject(e)),
    );
  });
}
