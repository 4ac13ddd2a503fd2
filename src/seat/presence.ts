// Presence: every node holds `node:{id}`, renewed on the seats' heartbeat. Counting the
// live rows is how a node learns the fleet size (it cannot be inferred from seat
// ownership: a fleet where nobody has claimed yet would read as zero nodes and every node
// would take every seat). The row also carries what peers place by (roles, labels) and
// what the fleet-full short cut sums (seats_held).
import { z } from "zod";
import type { LeaseStore, LeaseView } from "../coord/contract.ts";
import type { Logger } from "../log.ts";
import { ownerNodeId, type PresenceFact } from "./placement.ts";

export const PRESENCE_PREFIX = "node:";
export const SEAT_PREFIX = "seat:";

export function presenceKey(node_id: string): string {
  return `${PRESENCE_PREFIX}${node_id}`;
}
export function seatKey(handle: string): string {
  return `${SEAT_PREFIX}${handle}`;
}

/** What a presence row carries in its lease meta. */
export interface PresenceMeta {
  roles: string[];
  labels: Record<string, string>;
  /** Broker kind (member | leaf | external); null when the row does not say. */
  broker: string | null;
  started_at: number;
  draining: boolean;
  /** seats_withdrawn: unserviceable, so peers leave it out of every share. */
  withdrawn: boolean;
  /** Its estate copy is catching up: it claims nothing, so peers leave it out of shares. */
  behind: boolean;
  /** Seats it holds whose inbox the broker no longer delivers (the Fleet view shows them). */
  seat_mailbox_deaf: string[];
  seats_held: number;
  /** Seats held per placement group (placementKey → count), for balancing. */
  seats_by_group: Record<string, number>;
  /** A data node's copy: applied position per estate domain (the trim's floor reads it). */
  estate_applied?: Record<string, number>;
}

// A peer's row is input from outside: parsed, never trusted. Strictly first, so a bad
// row is reported naming its fields; then leniently, each field falling back to the value
// that errs toward trying (an unreadable count reads as 0 and adds nothing to the sum).
const strictMeta = z.object({
  roles: z.array(z.string()),
  labels: z.record(z.string(), z.string()),
  broker: z.string().nullable(),
  started_at: z.number(),
  draining: z.boolean(),
  withdrawn: z.boolean(),
  // Optional: a row from a node older than this field is still read strictly.
  behind: z.boolean().optional(),
  seat_mailbox_deaf: z.array(z.string()).optional(),
  seats_held: z.number().int().nonnegative(),
  seats_by_group: z.record(z.string(), z.number().int().nonnegative()),
  estate_applied: z.record(z.string(), z.number().int().nonnegative()).optional(),
});
const lenientMeta = z.object({
  roles: z.array(z.string()).catch([]),
  labels: z.record(z.string(), z.string()).catch({}),
  broker: z.string().nullable().catch(null),
  started_at: z.number().catch(0),
  draining: z.boolean().catch(false),
  withdrawn: z.boolean().catch(false),
  behind: z.boolean().catch(false),
  seat_mailbox_deaf: z.array(z.string()).catch([]),
  seats_held: z.number().int().nonnegative().catch(0),
  seats_by_group: z.record(z.string(), z.number().int().nonnegative()).optional().catch(undefined),
  // Unreadable reads as not said: the trim then purges nothing (unknown is never a floor).
  estate_applied: z.record(z.string(), z.number().int().nonnegative()).optional().catch(undefined),
});

export interface PresenceRow extends PresenceFact {
  broker: string | null;
  seat_mailbox_deaf: string[];
  started_at: number;
  /** Store clock, ms. */
  expires_at: number;
  owner: string;
  /** Applied position per estate domain, when the row says (a data node of this build). */
  estate_applied: Record<string, number> | null;
}

export function parsePresence(view: LeaseView, log?: Logger): PresenceRow {
  const strict = strictMeta.safeParse(view.meta);
  if (!strict.success && log) {
    const fields = [...new Set(strict.error.issues.map((i) => i.path.join(".") || "(meta)"))];
    log.debug("presence_unreadable", { key: view.key, fields });
  }
  const meta = strict.success ? strict.data : lenientMeta.parse(view.meta ?? {});
  return {
    node_id: view.key.startsWith(PRESENCE_PREFIX) ? view.key.slice(PRESENCE_PREFIX.length) : ownerNodeId(view.owner),
    roles: meta.roles,
    labels: meta.labels,
    protocol: view.protocol,
    seats_held: meta.seats_held,
    seats_by_group: meta.seats_by_group,
    draining: meta.draining,
    withdrawn: meta.withdrawn,
    behind: meta.behind ?? false,
    seat_mailbox_deaf: meta.seat_mailbox_deaf ?? [],
    broker: meta.broker,
    started_at: meta.started_at,
    expires_at: view.expires_at,
    owner: view.owner,
    estate_applied: meta.estate_applied ?? null,
  };
}

export type PresenceBeat = "acquired" | "renewed" | "lost" | "refused" | "unknown" | "given_up";

/** Holds this node's presence lease: acquired when absent, renewed on each heartbeat. */
export class PresenceLease {
  private epoch: number | null = null;
  private gaveUp = false;
  /** The owner that held this node's presence when it was last refused. */
  refusedBy: string | null = null;

  constructor(
    private readonly store: LeaseStore,
    private readonly opts: { node_id: string; owner: string; ttl_ms: () => number; takeover: ((owner: string) => boolean) | undefined; log: Logger },
  ) {}

  get held(): boolean {
    return this.epoch !== null;
  }

  /** One heartbeat's worth: renew the row (or take it when not held) with fresh meta. */
  async beat(meta: PresenceMeta): Promise<PresenceBeat> {
    if (this.gaveUp) return "given_up";
    const key = presenceKey(this.opts.node_id);
    if (this.epoch !== null) {
      const r = await this.store.renew(key, this.opts.owner, this.epoch, { ...meta });
      if (r.status === "renewed") return "renewed";
      if (r.status === "unknown") return "unknown";
      this.epoch = null;
      this.opts.log.warn("presence_lost", { key });
      return "lost";
    }
    const r = await this.store.acquire(key, {
      owner: this.opts.owner,
      preferred: this.opts.node_id,
      ttl_ms: this.opts.ttl_ms(),
      meta: { ...meta },
      gate: false,
      takeover: this.opts.takeover,
    });
    if (this.gaveUp) {
      // A drain began while the acquire was out: hand it straight back.
      if (r.ok) await this.store.release(key, this.opts.owner, r.lease.epoch);
      return "given_up";
    }
    if (r.ok) {
      this.epoch = r.lease.epoch;
      return "acquired";
    }
    if (r.rule === "unknown") return "unknown";
    // Held by another live incarnation under the same node id: two processes sharing an
    // id miscount the fleet, which the operator has to hear about.
    this.refusedBy = r.rule === "held" ? r.holder : "unknown";
    this.opts.log.error("node_id_in_use", { key, holder: this.refusedBy });
    return "refused";
  }

  /** Drain: the presence goes first, so peers stop counting this node in their shares. */
  async giveUp(): Promise<void> {
    this.gaveUp = true;
    const epoch = this.epoch;
    this.epoch = null;
    if (epoch === null) return;
    const r = await this.store.release(presenceKey(this.opts.node_id), this.opts.owner, epoch);
    if (r === "unknown") this.opts.log.warn("presence_release_unknown", { node: this.opts.node_id });
  }
}
