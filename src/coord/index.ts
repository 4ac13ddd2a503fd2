// Builds a Coordination (ARCHITECTURE.md § Contracts). Only the lease half follows
// `coordination.type`: `local` keeps leases (and duty leases) in this process, one node;
// `embedded-kv` keeps them in crewlet_leases / crewlet_duties / crewlet_epochs. The KV
// slots always live in JetStream KV on the node's one connection, whatever the type.
// MemoryCoordination serves unit tests and simulations: many node handles on one
// in-memory store, each with its own protocol and its own injected faults.
import type { NatsConnection } from "nats";
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import {
  DEFAULT_LEASE_TTL_MS,
  LEASE_PROTOCOL,
  SLOT_NAMES,
  type Coordination,
  type KvSlot,
  type LeaseStore,
  type SlotName,
} from "./contract.ts";
import { encodedSlot, withFaults, type Bucket } from "./bucket.ts";
import { leaseBuckets, SLOT_BUCKETS } from "./buckets.ts";
import type { StoreFaults } from "./faults.ts";
import { GateView } from "./gate.ts";
import { openBucket } from "./kv.ts";
import { opTimeoutFor } from "./ttl.ts";
import { BucketLeaseStore } from "./leases.ts";
import { MemoryBuckets } from "./local.ts";

export type CoordinationType = "local" | "embedded-kv";

export interface CoordinationOptions {
  type: CoordinationType;
  nc: NatsConnection;
  /** Stream replicas for every bucket (1 on a single member, 3 on a cluster). */
  replicas: number;
  /** False on a leaf: buckets are the members' to create; a leaf adopts them only. */
  decidesStreams?: boolean;
  /** This node's configured lease TTL; a peer's bucket may overrule it (lease_ttl_ms). */
  lease_ttl_ms?: number;
  clock: Clock;
  log: Logger;
  /** The lease protocol this build speaks; tests simulate an older build with a lower one. */
  protocol?: number;
  /** Injected faults, tests only. */
  faults?: StoreFaults;
  /** Per-call budget; defaults from the lease TTL (opTimeoutFor). */
  op_timeout_ms?: number;
}

export interface CoordinationHandle extends Coordination {
  leases: BucketLeaseStore;
  duties: BucketLeaseStore;
  readonly gate: GateView;
}

interface Parts {
  leases: Bucket;
  epochs: Bucket;
  duties: Bucket;
  slots: Record<SlotName, Bucket>;
}

function slotRecord(make: (name: SlotName) => Bucket): Record<SlotName, Bucket> {
  const out: Partial<Record<SlotName, Bucket>> = {};
  for (const name of SLOT_NAMES) out[name] = make(name);
  return out as Record<SlotName, Bucket>;
}

function assemble(
  parts: Parts,
  opts: { clock: Clock; log: Logger; protocol: number; faults?: StoreFaults; gate_wait_ms: number },
): CoordinationHandle {
  const wrap = (b: Bucket) => (opts.faults ? withFaults(b, opts.faults) : b);
  const leasesBucket = wrap(parts.leases);
  const epochs = wrap(parts.epochs);
  const gate = new GateView(leasesBucket, opts.clock, opts.protocol, opts.gate_wait_ms, opts.log);
  const leases = new BucketLeaseStore({ records: leasesBucket, epochs, gate, protocol: opts.protocol, log: opts.log, clock: opts.clock });
  // Duty claims are ungated, but a duty store still answers the presence/seat floor.
  const duties = new BucketLeaseStore({ records: wrap(parts.duties), epochs, gate, protocol: opts.protocol, log: opts.log, clock: opts.clock });
  const slots = new Map<SlotName, KvSlot>();
  for (const name of SLOT_NAMES) slots.set(name, encodedSlot(wrap(parts.slots[name])));
  return {
    leases,
    duties,
    gate,
    lease_ttl_ms: parts.leases.max_age_ms,
    slot(name: SlotName): KvSlot {
      const s = slots.get(name);
      if (!s) throw new Error(`no such coordination slot: ${name}`);
      return s;
    },
    async close() {
      gate.stop();
      leases.stop();
      duties.stop();
    },
  };
}

/** The coordination a node runs with. Checks (and creates or adopts) every bucket first. */
export async function createCoordination(opts: CoordinationOptions): Promise<CoordinationHandle> {
  const configured_ttl_ms = opts.lease_ttl_ms ?? DEFAULT_LEASE_TTL_MS;
  const timeout_ms = opts.op_timeout_ms ?? opTimeoutFor(configured_ttl_ms);
  const open = (spec: { name: string; max_age_ms: number }) =>
    openBucket({ nc: opts.nc, clock: opts.clock, spec, replicas: opts.replicas, timeout_ms, log: opts.log, creates: opts.decidesStreams ?? true });
  const specs = leaseBuckets(configured_ttl_ms);
  // Concurrently: an R3 bucket costs a raft campaign (~0.4 s) to create.
  const slotList = await Promise.all(SLOT_NAMES.map((n) => open(SLOT_BUCKETS[n])));
  const slots = slotRecord((n) => slotList[SLOT_NAMES.indexOf(n)]!);
  let leases: Bucket;
  let epochs: Bucket;
  let duties: Bucket;
  if (opts.type === "embedded-kv") {
    [leases, epochs, duties] = await Promise.all([open(specs.leases), open(specs.epochs), open(specs.duties)]);
    if (leases.max_age_ms !== configured_ttl_ms) {
      opts.log.warn("lease_ttl_adopted", { configured_ms: configured_ttl_ms, bucket_ms: leases.max_age_ms });
    }
  } else {
    const mem = new MemoryBuckets(opts.clock);
    leases = mem.bucket(specs.leases.name, specs.leases.max_age_ms);
    epochs = mem.bucket(specs.epochs.name, specs.epochs.max_age_ms);
    duties = mem.bucket(specs.duties.name, specs.duties.max_age_ms);
  }
  return assemble(
    { leases, epochs, duties, slots },
    { clock: opts.clock, log: opts.log, protocol: opts.protocol ?? LEASE_PROTOCOL, faults: opts.faults, gate_wait_ms: timeout_ms },
  );
}

/**
 * One in-memory coordination store that many simulated nodes share. Everything — leases,
 * duties and slots — is in memory on the injected Clock.
 */
export class MemoryCoordination {
  private readonly buckets: MemoryBuckets;
  readonly lease_ttl_ms: number;

  constructor(private readonly opts: { clock: Clock; log: Logger; lease_ttl_ms?: number }) {
    this.buckets = new MemoryBuckets(opts.clock);
    this.lease_ttl_ms = opts.lease_ttl_ms ?? DEFAULT_LEASE_TTL_MS;
  }

  /** One node's handle: its own protocol, its own faults, the shared store. */
  node(opts: { protocol?: number; faults?: StoreFaults; log?: Logger } = {}): CoordinationHandle {
    const specs = leaseBuckets(this.lease_ttl_ms);
    const b = (s: { name: string; max_age_ms: number }) => this.buckets.bucket(s.name, s.max_age_ms);
    const slots = slotRecord((n) => b(SLOT_BUCKETS[n]));
    return assemble(
      { leases: b(specs.leases), epochs: b(specs.epochs), duties: b(specs.duties), slots },
      {
        clock: this.opts.clock,
        log: opts.log ?? this.opts.log,
        protocol: opts.protocol ?? LEASE_PROTOCOL,
        faults: opts.faults,
        // In memory the view is current within a few microtask hops; the bound only
        // matters if the fault layer holds it back.
        gate_wait_ms: opTimeoutFor(this.lease_ttl_ms),
      },
    );
  }
}

export type { LeaseStore };
export { BucketLeaseStore } from "./leases.ts";
export { StoreFaults, writeTo } from "./faults.ts";
export { encodeLeaseKey } from "./bucket.ts";
