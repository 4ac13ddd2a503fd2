// The agent engine as the node composes it: the org and providers of the applied company,
// the turn engine over the estate router, the per-node inbox (max_concurrent), the
// completion ledger, the episode store in node.db, MCP children per seat, and the events
// stream. The seat host knows nothing of this: it calls the hooks and the handler.
import { Database } from "bun:sqlite";
import { join } from "node:path";
import type { Clock } from "../clock.ts";
import type { Company } from "../config/company.ts";
import type { KvSlot } from "../coord/contract.ts";
import type { Logger } from "../log.ts";
import { buildOrg, type Org } from "../org/org.ts";
import type { Queue } from "../queue/contract.ts";
import type { SeatHooks } from "../seat/host.ts";
import {
  buildProviders,
  CompletionLedger,
  EpisodeStore,
  McpPool,
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
  max_concurrent: number;
  clock: Clock;
  log: Logger;
}

export class NodeEngine {
  private org: Org;
  private providers: Map<string, Provider>;
  private readonly db: Database;
  private readonly mcp: McpPool;
  readonly turns: TurnEngine;
  readonly inbox: SeatInbox;

  constructor(private readonly o: EngineOptions) {
    this.org = buildOrg(o.company);
    this.providers = buildProviders(o.company.providers.llm, o.clock);
    this.db = new Database(join(o.storeDir, NODE_DB_FILE), { create: true, strict: true });
    // WAL: turns write episodes while the API reads them.
    this.db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
    this.mcp = new McpPool({ clock: o.clock, log: o.log });
    this.turns = new TurnEngine({
      org: () => this.org,
      node_id: o.nodeId,
      clock: o.clock,
      log: o.log,
      estate: o.estate,
      queue: o.queue,
      providerFor: (seat) => (seat.llm ? this.providers.get(seat.llm) : undefined),
      mcpTools: (handle) => this.mcp.tools(handle),
      ledger: new CompletionLedger(o.ledger, o.clock, o.log),
      episodes: new EpisodeStore(this.db),
      events: publishEventSink(o.queue, o.log, () => o.clock.now()),
    });
    this.inbox = new SeatInbox({ engine: this.turns, log: o.log, max_concurrent: o.max_concurrent });
  }

  /** The seat host's hooks: MCP children up before the inbox attaches, down on release. */
  hooks(): SeatHooks {
    const release = mcpReleaseStep(this.mcp);
    return {
      prepare: [mcpPrepareStep(this.mcp, () => this.org, this.o.log)],
      onRelease: (grant) => release(grant),
    };
  }

  /** A newer company: turns started from now on see its org and providers. */
  setCompany(company: Company): void {
    this.org = buildOrg(company);
    this.providers = buildProviders(company.providers.llm, this.o.clock);
  }

  get currentOrg(): Org {
    return this.org;
  }

  status(handle: string): SeatTurnStatus {
    return this.turns.status(handle);
  }

  async stop(): Promise<void> {
    await this.mcp.stopAll();
    this.db.close();
  }
}
