// A seat's whole failure path on real parts, for test/agent/failures.test.ts and
// bench/failures.ts: a real nats-server (JetStream queue: NAK delays, dead letters), a real
// estate.db, the completion ledger, the turn engine and the seat inbox attached to the
// seat's mailbox, talking to a real HTTP model endpoint (model-server.ts) over the OpenAI
// or the Anthropic wire. A person posts; the rig says what they saw, what the endpoint got
// and where the message ended.
import type { KvSlot } from "../../src/coord/contract.ts";
import { Database } from "bun:sqlite";
import { systemClock } from "../../src/clock.ts";
import type { ProviderConfig } from "../../src/config/company.ts";
import { MemoryCoordination } from "../../src/coord/index.ts";
import { memoryLogger, type MemorySink } from "../../src/log.ts";
import type { RedeliveryPolicy } from "../../src/agent/classify.ts";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { SeatInbox } from "../../src/agent/inbox.ts";
import { CompletionLedger } from "../../src/agent/ledger.ts";
import { buildProviders } from "../../src/agent/providers/index.ts";
import type { Tool } from "../../src/agent/tools/contract.ts";
import { TurnEngine } from "../../src/agent/turn.ts";
import { buildOrg } from "../../src/org/org.ts";
import { encodeTrigger, type Trigger } from "../../src/org/trigger.ts";
import type { Attachment, DeadLetter, Queue } from "../../src/queue/contract.ts";
import { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { mailbox } from "../../src/queue/topics.ts";
import type { Budgets } from "../../src/config/budgets.ts";
import { BudgetCounters } from "../../src/spend/counters.ts";
import { BudgetGate } from "../../src/spend/gate.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { LocalEstate, mentionTrigger, rootCompany, taskTrigger } from "./support.ts";

export type Wire = "openai" | "anthropic";

/** Short numbers for tests: the shapes of the production ones (classify.ts), scaled down. */
export const TEST_REDELIVERY: RedeliveryPolicy = { base_ms: 300, max_ms: 1_200, give_up_after: 3 };

export interface RigOptions {
  wire: Wire;
  base_url: string;
  api_keys?: string[];
  /** Provider settings beyond type/base_url/model/api_keys. */
  settings?: Partial<Record<string, unknown>>;
  /** A second provider the first falls back to. */
  fallback?: { wire: Wire; base_url: string; api_keys?: string[] };
  redelivery?: RedeliveryPolicy;
  extraTools?: Tool[];
  /** Extra secrets (API tokens) the redaction must cover. */
  secrets?: string[];
  /** The seat has no provider at all (llm unset). */
  no_provider?: boolean;
  /** Spend caps (company.budgets): the turn engine asks the counters before every call. */
  budgets?: Budgets;
  /** The budget counters' store answers no read (a coordination outage, as the counters see it). */
  budgets_unreadable?: boolean;
}

export interface Ending {
  /** The message's fate: answered (acked with a reply), dead-lettered, or still out. */
  where: "answered" | "dead_letter" | "pending";
  dead_letter: DeadLetter | null;
  /** The person's thread after the turn(s): [author, body] pairs. */
  thread: [string, string][];
  reports: number;
}

const company = rootCompany();
const org = buildOrg(company);

function providerConfig(wire: Wire, base_url: string, api_keys: string[], settings: Record<string, unknown> = {}, fallback?: string): ProviderConfig {
  const common = { base_url, model: "test-model", api_keys, timeout_seconds: 10, retry_budget_seconds: 5, stream: false, ...settings, ...(fallback ? { fallback } : {}) };
  return (wire === "openai" ? { type: "openai", ...common } : { type: "anthropic", max_tokens: 256, ...common }) as ProviderConfig;
}

export class FailureRig {
  readonly estate = new LocalEstate(company);
  readonly events = new MemoryEventSink();
  readonly log;
  readonly logs: MemorySink;
  readonly engine: TurnEngine;
  readonly inbox: SeatInbox;
  readonly ledger: CompletionLedger;
  readonly counters: BudgetCounters | null = null;
  private attachments: Attachment[] = [];

  private constructor(
    readonly nats: TestNats,
    readonly queue: Queue,
    private readonly close_nc: () => Promise<void>,
    opts: RigOptions,
  ) {
    const { log, sink } = memoryLogger("debug");
    this.log = log;
    this.logs = sink;
    const coord = new MemoryCoordination({ clock: systemClock, log });
    this.ledger = new CompletionLedger(coord.node().slot("ledger"), systemClock, log);
    const llm: Record<string, ProviderConfig> = {
      model: providerConfig(opts.wire, opts.base_url, opts.api_keys ?? ["test-key-0001"], opts.settings as Record<string, unknown>, opts.fallback ? "backup" : undefined),
    };
    if (opts.fallback) llm.backup = providerConfig(opts.fallback.wire, opts.fallback.base_url, opts.fallback.api_keys ?? ["backup-key-0002"], {});
    // Zero jitter: a transient failure's retries are back to back, so a test can count them.
    const providers = buildProviders(llm, systemClock, { secrets: opts.secrets, random: () => 0 });
    const budgets = opts.budgets;
    if (budgets) {
      const real = coord.node().slot("budgets");
      const slot: KvSlot = opts.budgets_unreadable ? Object.assign(Object.create(real) as KvSlot, { get: async () => Promise.reject(new Error("TIMEOUT: no answer from crewlet_budgets")) }) : real;
      this.counters = new BudgetCounters({ db: new Database(":memory:"), slot, clock: systemClock, log, budgets: () => budgets, timezone: () => "UTC", pricing: () => undefined });
    }
    const spend = this.counters ? new BudgetGate({ counters: this.counters, timezone: () => "UTC", events: this.events, log, node_id: "node-a" }) : null;
    this.engine = new TurnEngine({
      org: () => org,
      node_id: "node-a",
      clock: systemClock,
      log,
      estate: this.estate,
      queue,
      providerFor: () => (opts.no_provider ? undefined : providers.get("model")),
      mcpTools: () => opts.extraTools ?? [],
      ledger: this.ledger,
      events: this.events,
      redelivery: opts.redelivery ?? TEST_REDELIVERY,
      spend,
    });
    this.inbox = new SeatInbox({ engine: this.engine, log, max_concurrent: 2 });
  }

  static async start(opts: RigOptions, nats?: TestNats): Promise<FailureRig> {
    const n = nats ?? (await startNats(1));
    const nc = await n.connect({ name: "failure-rig" });
    const { log } = memoryLogger("warn");
    const queue = new JetStreamQueue({ nc, replicas: 1, clock: systemClock, log });
    await queue.ensureStreams();
    return new FailureRig(n, queue, () => nc.close(), opts);
  }

  /** The seat's inbox, attached as the node attaches it (a drain handler). */
  async attach(seat: string): Promise<void> {
    const { subject, group } = mailbox(seat, "inbox");
    await this.queue.ensureMailbox(subject, group);
    const grant = { handle: seat, epoch: 1, fence: () => true };
    this.attachments.push(await this.queue.attachBatch(subject, group, (ds) => this.inbox.batchHandler(ds, grant), { batch: 16 }));
  }

  /** A person mentions `seat` in #general; its trigger goes to the seat's inbox. */
  async ask(seat: string, text: string, from = "founder"): Promise<{ message_id: string; trigger: Trigger }> {
    const message_id = await this.estate.post("general", from, `@${seat} ${text}`);
    const trigger = mentionTrigger(seat, "general", message_id, text, from);
    await this.publish(trigger);
    return { message_id, trigger };
  }

  /** A task assigned to `seat`. */
  async assign(seat: string, title: string): Promise<{ work_key: string; trigger: Trigger }> {
    const out = await this.estate.write("tracker", { op: "work.create", project: "ENG", type: "task", title, body: "", status: "todo", priority: "medium", assignee: seat, parent: null, labels: [], due: null, reporter: "founder" });
    if (out.status !== "applied" || !out.outcome.ok) throw new Error(`work.create failed: ${JSON.stringify(out)}`);
    const work_key = out.outcome.key as string;
    const trigger = taskTrigger(seat, work_key, title, "founder");
    await this.publish(trigger);
    return { work_key, trigger };
  }

  async publish(trigger: Trigger, msgId: string = trigger.event_id): Promise<void> {
    await this.queue.publish(mailbox(trigger.seat, "inbox").subject, encodeTrigger(trigger), { msgId });
  }

  /** Turns that ran on this trigger, in order. */
  turnsOn(event_id: string) {
    return this.events.named("turn_completed").filter((f) => (f.trigger_ids as string[]).includes(event_id));
  }

  /** Waits until the message is answered, dead-lettered, or `timeout_ms` passes. */
  async ending(seat: string, message_id: string | null, event_id: string, timeout_ms = 30_000): Promise<Ending> {
    const deadline = Date.now() + timeout_ms;
    const subject = mailbox(seat, "inbox").subject;
    for (;;) {
      const dl = (await this.queue.deadLetters()).find((d) => d.originalSubject === subject && d.headers["Nats-Msg-Id"] === event_id) ?? null;
      const done = this.turnsOn(event_id).some((t) => t.settle === "ack");
      if (dl || done || Date.now() > deadline) {
        // Let the settle land and the notice post (they follow the turn_completed event).
        await Bun.sleep(50);
        const thread = message_id ? (await this.estate.thread("general", message_id)).map((m) => [m.author, m.body] as [string, string]) : [];
        return { where: dl ? "dead_letter" : done ? "answered" : "pending", dead_letter: dl, thread, reports: this.turnsOn(event_id).length };
      }
      await Bun.sleep(20);
    }
  }

  async stop(keepNats = false): Promise<void> {
    for (const a of this.attachments) await a.detach();
    // The connection first: its close ends the pulls still out, which close() would
    // otherwise wait out (up to their 5 s expiry) — a teardown cost, not behaviour.
    await this.close_nc();
    await this.queue.close();
    this.estate.close();
    if (!keepNats) await this.nats.stop();
  }
}
