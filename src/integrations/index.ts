// The integrations as a node composes them: the webhook ingress (ingress role), the
// notifications handler (seats role, leaf nodes included), and the outbound tools and
// answer back the turn engine is given. All of it follows the company in force: a new
// revision's integrations and routes apply to the next delivery.
import type { Clock } from "../clock.ts";
import type { Company } from "../config/company.ts";
import type { KvSlot } from "../coord/contract.ts";
import type { Logger } from "../log.ts";
import { buildOrg, type Org } from "../org/org.ts";
import type { Queue } from "../queue/contract.ts";
import { NOTIFICATIONS_GROUP, NOTIFICATIONS_SUBJECT } from "../queue/topics.ts";
import type { RouteGroup } from "../api/app.ts";
import type { Tool } from "../agent/tools/contract.ts";
import type { IntegrationConfig } from "../config/integrations.ts";
import { NotificationHandler } from "./handler.ts";
import { Ingress } from "./ingress.ts";
import type { FetchLike } from "./outbound.ts";
import { Outbound, type AnswerBackRequest, type AnswerBackResult } from "./tools.ts";

export interface IntegrationsOptions {
  nodeId: string;
  company: () => Company;
  queue: Queue;
  claims: KvSlot;
  rate: KvSlot;
  clock: Clock;
  log: Logger;
  /** The outbound tools' HTTP (tests may route it; production is fetch). */
  fetch?: FetchLike;
}

export class Integrations {
  private org: { company: Company; org: Org } | null = null;
  readonly ingress: Ingress;
  readonly outbound: Outbound;
  private handler: NotificationHandler | null = null;

  constructor(private readonly o: IntegrationsOptions) {
    const integrations = () => this.list();
    const org = () => this.currentOrg();
    this.ingress = new Ingress({ nodeId: o.nodeId, integrations, org, claims: o.claims, queue: o.queue, clock: o.clock, log: o.log });
    this.outbound = new Outbound({ integrations, org, fetch: o.fetch });
  }

  list(): readonly IntegrationConfig[] {
    return this.o.company().integrations;
  }

  private currentOrg(): Org {
    const company = this.o.company();
    if (this.org?.company !== company) this.org = { company, org: buildOrg(company) };
    return this.org.org;
  }

  /**
   * The notifications group's durable consumer, before anything publishes: the stream
   * keeps a message only while a consumer covers it (interest retention). Every node does
   * this at boot, like every seat's mailbox.
   */
  ensureMailbox(): Promise<void> {
    return this.o.queue.ensureMailbox(NOTIFICATIONS_SUBJECT, NOTIFICATIONS_GROUP);
  }

  /** Joins the fleet-wide notifications group (a node with the seats role). */
  async startHandler(): Promise<void> {
    this.handler = new NotificationHandler({
      queue: this.o.queue,
      rate: this.o.rate,
      org: () => this.currentOrg(),
      integrations: () => this.list(),
      clock: this.o.clock,
      log: this.o.log,
    });
    await this.handler.start();
  }

  async stop(): Promise<void> {
    await this.handler?.stop();
    this.handler = null;
  }

  /** POST /hooks/{kind}/{id} (an ingress node). */
  routeGroup(): RouteGroup {
    return this.ingress.routeGroup();
  }

  readonly toolsFor = (handle: string): Tool[] => this.outbound.toolsFor(handle);
  readonly answerBack = (req: AnswerBackRequest): Promise<AnswerBackResult | null> => this.outbound.answerBack(req);
}

export type { AnswerBackRequest, AnswerBackResult } from "./tools.ts";
export { MAX_WEBHOOK_BODY_BYTES } from "./ingress.ts";
