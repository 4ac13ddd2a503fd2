// The agent engine as the node composes it: the org and providers of the applied company,
// the turn engine over the estate router, the per-node inbox (max_concurrent), the
// completion ledger, the seats' memory in node.db, MCP children per seat, and the events
// stream. The seat host knows nothing of this: it calls the hooks and the handler.
import { Database } from "bun:sqlite";
import { join } from "node:path";
import type { Clock, Timer } from "../clock.ts";
import { embeddingsClient, type Embedder } from "../agent/providers/embeddings.ts";
import type { Company } from "../config/company.ts";
import type { KvSlot } from "../coord/contract.ts";
import { TurnMemory } from "../agent/memory.ts";
import { ReflectDispatcher } from "../agent/reflect.ts";
import { ToolSkillRegistry } from "../agent/tool-skills.ts";
import type { Changelog } from "../memory/changelog.ts";
import { MemoryStore } from "../memory/store.ts";
import { MemorySync } from "../memory/sync.ts";
import { MAINTENANCE_TICK_MS } from "../duty/duties.ts";
import { startNodeRetention } from "../duty/retention.ts";
import type { Logger } from "../log.ts";
import { buildOrg, type Org } from "../org/org.ts";
import type { Tool } from "../agent/tools/contract.ts";
import type { AnswerBack } from "../agent/turn.ts";
import type { Queue } from "../queue/contract.ts";
import type { SeatHooks } from "../seat/host.ts";
import type { KeyCooldowns } from "../agent/providers/contract.ts";
import { budgetAlerter } from "../spend/alert.ts";
import { BudgetCounters } from "../spend/counters.ts";
import { BudgetGate } from "../spend/gate.ts";
import { costMicros } from "../spend/budget.ts";
import { TranscriptStore } from "../agent/transcripts.ts";
import { RECEIPT_STOP_WAIT_MS, ReceiptWriter } from "../agent/receipt.ts";
import type { RunStore } from "../sandbox/runs.ts";
import type { FileStore } from "../objects/store.ts";
import { SeatRuns, type BrokerAccess } from "../sandbox/seat-runs.ts";
import { ApprovalGate, unitsAround, type ApprovalAudit } from "../approvals/gate.ts";
import { companyChangeTool, type CompanyChangePort } from "../approvals/company-change-tool.ts";
import { mayProposeChanges } from "../config/approvals.ts";
import type { ApprovalStore } from "../approvals/records.ts";
import {
  buildProviders,
  CompletionLedger,
  McpPool,
  probeProviders,
  mcpPrepareStep,
  mcpReleaseStep,
  publishEventSink,
  SeatInbox,
  TurnEngine,
  type EstatePort,
  type Provider,
  type SeatTurnStatus,
} from "../agent/index.ts";

export const NODE_DB_FILE = "node.db";

export interface EngineOptions {
  nodeId: string;
  storeDir: string;
  company: Company;
  estate: EstatePort;
  queue: Queue;
  ledger: KvSlot;
  /** The seats' memory changelog (CREWLET_MEMORY). */
  changelog: Changelog;
  /** crewlet_claims: the onboarding step's fleet-wide claim (null: no onboarding). */
  claims: KvSlot | null;
  max_concurrent: number;
  clock: Clock;
  log: Logger;
  /** Tools the integrations offer a seat, and their answer back (src/integrations). */
  extraTools?: (handle: string) => readonly Tool[];
  answerBack?: AnswerBack;
  /** The fleet's shared key cooldowns (src/spend/cooldowns.ts): providers skip a cooling key. */
  cooldowns?: KeyCooldowns;
  /** crewlet_budgets: the fleet's spend counters (src/spend); null: spend is not capped here. */
  budgets?: KvSlot | null;
  /** The seats' coding runs (src/sandbox): null or absent, no seat here starts or collects one. */
  runs?: { store: RunStore; owner: string; runs_bucket: string; broker: () => BrokerAccess | null; files?: FileStore | null } | null;
  /** Calls parked for a person's yes (src/approvals): null or absent, nothing is parked. */
  approvals?: { store: ApprovalStore; owner: string; audit?: (e: ApprovalAudit) => void; companyChanges?: CompanyChangePort } | null;
  /** Secrets configured elsewhere (API tokens, broker secrets) that a provider's error
   * body must never carry into a log line, an event or /agents. */
  secrets?: readonly string[];
}

function embedderOf(company: Company, clock: Clock): Embedder | null {
  const cfg = company.providers.embeddings;
  return cfg ? embeddingsClient(cfg, clock) : null;
}

export class NodeEngine {
  private org: Org;
  private company: Company;
  /** The fleet's spend counters (GET /budgets reads them); null without the slot. */
  readonly budgets: BudgetCounters | null;
  private providers: Map<string, Provider>;
  /** The company's embeddings endpoint (memory_search blends vectors), or null. */
  private embedder: Embedder | null;
  private readonly db: Database;
  private readonly mcp: McpPool;
  readonly turns: TurnEngine;
  readonly inbox: SeatInbox;
  readonly memoryStore: MemoryStore;
  readonly memorySync: MemorySync;
  /** Turn transcripts this node ran (read through the holder, src/agent/holder-reads.ts). */
  readonly transcripts: TranscriptStore;
  /** Each finished turn's receipt, written to the estate (GET /turns, src/agent/receipt.ts). */
  readonly receipts: ReceiptWriter;
  private readonly reflect: ReflectDispatcher;
  /** This node's tool skills (the skills source's pages), walked here as on every node. */
  readonly toolSkills: ToolSkillRegistry;
  /** The seats' coding runs, when this node can start and collect them. */
  readonly runs: SeatRuns | null;
  /** This node's own retention tick over node.db (src/duty/retention.ts). */
  private readonly retention: Timer;

  constructor(private readonly o: EngineOptions) {
    this.org = buildOrg(o.company);
    this.company = o.company;
    this.providers = buildProviders(o.company.providers.llm, o.clock, { secrets: this.secretsOf(o.company), cooldowns: o.cooldowns });
    void probeProviders(o.company.providers.llm, o.clock, o.log);
    this.embedder = embedderOf(o.company, o.clock);
    this.db = new Database(join(o.storeDir, NODE_DB_FILE), { create: true, strict: true });
    // WAL: turns write episodes while the API reads them.
    this.db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
    this.mcp = new McpPool({ clock: o.clock, log: o.log });
    this.memoryStore = new MemoryStore(this.db, o.clock);
    this.transcripts = new TranscriptStore(this.db);
    this.toolSkills = new ToolSkillRegistry({ estate: o.estate, clock: o.clock, log: o.log });
    this.receipts = new ReceiptWriter({ estate: o.estate, clock: o.clock, log: o.log, timezone: () => this.company.timezone });
    this.memorySync = new MemorySync({ store: this.memoryStore, changelog: o.changelog, clock: o.clock, log: o.log });
    const providerFor = (seat: { llm?: string | null }) => (seat.llm ? this.providers.get(seat.llm) : undefined);
    const events = publishEventSink(o.queue, o.log, () => o.clock.now());
    const timezone = () => this.company.timezone;
    this.budgets = o.budgets
      ? new BudgetCounters({
          db: this.db,
          slot: o.budgets,
          clock: o.clock,
          log: o.log,
          budgets: () => this.company.budgets,
          timezone,
          pricing: (name) => {
            const p = this.company.providers.llm[name];
            return p && p.type !== "scripted" ? p.pricing : undefined;
          },
          onAlert: budgetAlerter({ events, estate: o.estate, org: () => this.org, timezone, log: o.log, node_id: o.nodeId }),
        })
      : null;
    // One spend gate for every model call this node makes: turns' rounds and reflections.
    const spend = this.budgets ? new BudgetGate({ counters: this.budgets, timezone, events, log: o.log, node_id: o.nodeId }) : null;
    this.reflect = new ReflectDispatcher({ queue: o.queue, store: this.memoryStore, sync: this.memorySync, org: () => this.org, providerFor, clock: o.clock, log: o.log, spend, events });
    this.runs = o.runs
      ? new SeatRuns({
          node_id: o.nodeId,
          owner: o.runs.owner,
          storeDir: o.storeDir,
          store: o.runs.store,
          runs_bucket: o.runs.runs_bucket,
          queue: o.queue,
          estate: o.estate,
          company: () => this.company,
          broker: o.runs.broker,
          files: o.runs.files ?? null,
          clock: o.clock,
          log: o.log,
          events,
        })
      : null;
    const approvals = o.approvals
      ? new ApprovalGate({ store: o.approvals.store, estate: o.estate, config: () => this.company.approvals, org: () => this.org, owner: o.approvals.owner, node_id: o.nodeId, clock: o.clock, log: o.log, events, ...(o.approvals.audit ? { audit: o.approvals.audit } : {}) })
      : null;
    const runTool = this.runs?.tool() ?? null;
    const changeTool = o.approvals?.companyChanges ? companyChangeTool(o.approvals.companyChanges) : null;
    // propose_company_change for a seat a company_changes rule covers (and only then: the
    // rule is what parks it for a person's yes).
    const mayChange = (h: string) => changeTool !== null && mayProposeChanges(this.company.approvals.rules, h, unitsAround(this.org, h));
    const runs = this.runs;
    this.turns = new TurnEngine({
      org: () => this.org,
      node_id: o.nodeId,
      clock: o.clock,
      log: o.log,
      estate: o.estate,
      queue: o.queue,
      providerFor: (seat) => (seat.llm ? this.providers.get(seat.llm) : undefined),
      mcpTools: (handle) => this.mcp.tools(handle),
      // run_sandbox for a seat the company lets start coding runs.
      extraTools: (h) => [...(o.extraTools?.(h) ?? []), ...(runTool && runs?.mayRun(h) ? [runTool] : []), ...(changeTool && mayChange(h) ? [changeTool] : [])],
      answerBack: o.answerBack,
      runAnswers: runs,
      approvals,
      ledger: new CompletionLedger(o.ledger, o.clock, o.log),
      // The seat's episodes are its memory's (src/memory), written before the completion.
      memory: new TurnMemory({
        store: this.memoryStore,
        sync: this.memorySync,
        estate: o.estate,
        queue: o.queue,
        claims: o.claims,
        node_id: o.nodeId,
        toolSkills: () => this.toolSkills.skills(),
        embedder: () => this.embedder,
        clock: o.clock,
        log: o.log,
      }),
      events,
      transcripts: {
        // The fleet's receipt first (it never throws), then this node's transcript.
        keep: (t, facts) => {
          this.receipts.keep(t, facts);
          this.transcripts.insert(t, o.clock.now());
        },
        costOf: (name, usage) => {
          const p = this.company.providers.llm[name];
          return p && p.type !== "scripted" && p.pricing ? costMicros(usage, p.pricing) : null;
        },
        modelOf: (llm) => this.modelOf(llm),
      },
      spend,
    });
    this.inbox = new SeatInbox({ engine: this.turns, log: o.log, max_concurrent: o.max_concurrent });
    this.memorySync.start();
    this.toolSkills.start(o.company.skills.source?.space ?? null);
    this.budgets?.start();
    // Every node sweeps its own node.db (the maintenance duty runs on one node of the fleet):
    // the table rules, and the diary cap over the seats held here, on one tick.
    this.retention = startNodeRetention({
      db: () => this.nodeDb,
      sweeps: [{ name: "memory_diary", run: () => void this.memorySync.capDiaries() }],
      clock: o.clock,
      log: o.log,
      every_ms: MAINTENANCE_TICK_MS,
    });
  }

  /**
   * The seat host's hooks. Acquire: MCP children, then the seat's memory hydrated from the
   * changelog (a failure refuses the seat), then its reflection subject, then its coding
   * runs' recovery and control subject — the host attaches the inbox last. Release: the
   * control and reflection subjects go first, then the last flush, then the children.
   */
  hooks(): SeatHooks {
    const release = mcpReleaseStep(this.mcp);
    return {
      prepare: [
        mcpPrepareStep(this.mcp, () => this.org, this.o.log),
        async (grant) => {
          await this.memorySync.hydrate(grant.handle);
          await this.reflect.attach(grant.handle);
          // Its coding runs taken over at this grant's epoch, then their control subject.
          await this.runs?.prepare(grant);
        },
      ],
      onRelease: async (grant) => {
        await this.runs?.release(grant.handle);
        await this.reflect.detach(grant.handle);
        await this.memorySync.release(grant.handle);
        await release(grant);
      },
    };
  }

  /** A newer company: turns started from now on see its org and providers. */
  setCompany(company: Company): void {
    this.org = buildOrg(company);
    this.company = company;
    this.toolSkills.setSource(company.skills.source?.space ?? null);
    this.providers = buildProviders(company.providers.llm, this.o.clock, { secrets: this.secretsOf(company), cooldowns: this.o.cooldowns });
    void probeProviders(company.providers.llm, this.o.clock, this.o.log);
    this.embedder = embedderOf(company, this.o.clock);
  }

  /** Every secret a provider's error must not carry: the node's, and the company's
   * integration secrets and tokens, and its embeddings keys (model keys are added by buildProviders). */
  private secretsOf(company: Company): string[] {
    const integrations = company.integrations.flatMap((i) => [i.secret, i.token].filter((x): x is string => typeof x === "string"));
    return [...(this.o.secrets ?? []), ...integrations, ...(company.providers.embeddings?.api_keys ?? [])];
  }

  private stopped = false;

  /** node.db while the engine runs (its retention tick sweeps it). */
  get nodeDb(): Database | null {
    return this.stopped ? null : this.db;
  }

  /** The model a provider key calls ("scripted" for the offline provider), null if no such key. */
  modelOf(llm: string): string | null {
    const p = this.company.providers.llm[llm];
    return p ? (p.type === "scripted" ? "scripted" : p.model) : null;
  }

  get currentOrg(): Org {
    return this.org;
  }

  status(handle: string): SeatTurnStatus {
    return this.turns.status(handle);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    // The last turns' receipts, while the router can still write them (bounded: a store
    // that is away keeps the stop waiting no longer than RECEIPT_STOP_WAIT_MS).
    await this.receipts.settled(this.o.clock, RECEIPT_STOP_WAIT_MS);
    this.retention.cancel();
    this.toolSkills.stop();
    this.budgets?.stop();
    await this.reflect.detachAll();
    await this.memorySync.stop();
    await this.mcp.stopAll();
    this.db.close();
  }
}
