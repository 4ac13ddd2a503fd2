// Leases with epochs (spec: "The lease"), written once over the Bucket interface so the
// in-memory twin and JetStream KV run the same claim. A new tenure is three writes, each a
// compare-and-set on the key's revision:
//   1. the record in a `claiming` state (create, or update over a lapsed record),
//   2. the epoch counter in the untimed epochs bucket (CAS increment),
//   3. the token into the record (CAS on step 1's revision).
// A claim that fails after step 1 gives back exactly the record it wrote (a delete on that
// revision) and nothing else; a counter it advanced is a harmless gap. All liveness is
// judged on the store's clock: a record expires at its write's store timestamp + ttl_ms.
import { randomUUID } from "node:crypto";
import type { Logger } from "../log.ts";
import {
  CasConflict,
  LEASE_PROTOCOL,
  StoreUnavailable,
  type AcquireOptions,
  type AcquireResult,
  type KvEntry,
  type Lease,
  type LeaseMeta,
  type LeaseStore,
  type LeaseView,
  type ReleaseResult,
  type RenewResult,
} from "./contract.ts";
import { decodeLeaseKey, encodeLeaseKey, leaseFilter, type Bucket } from "./bucket.ts";
import type { GateView } from "./gate.ts";
import {
  decodeRecord,
  encodeRecord,
  isLive,
  judgeClaim,
  judgeRenew,
  toLease,
  toView,
  type LeaseRecord,
} from "./record.ts";

/** Epoch CAS retries: only a claimer whose own claiming record lapsed mid-claim races here. */
const EPOCH_CAS_ATTEMPTS = 3;

export interface LeaseStoreOptions {
  /** Holds the records (crewlet_leases or crewlet_duties). */
  records: Bucket;
  /** The untimed epoch counters (crewlet_epochs). */
  epochs: Bucket;
  /** The presence/seat view the protocol gate judges from; null = this store has no gate. */
  gate: GateView | null;
  /** The lease protocol this build speaks (tests simulate an older build with a lower one). */
  protocol?: number;
  log: Logger;
}

type Current = { entry: KvEntry; record: LeaseRecord | null } | null;

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export class BucketLeaseStore implements LeaseStore {
  readonly protocol: number;
  private readonly records: Bucket;
  private readonly epochs: Bucket;
  private readonly gate: GateView | null;
  private readonly log: Logger;

  constructor(opts: LeaseStoreOptions) {
    this.records = opts.records;
    this.epochs = opts.epochs;
    this.gate = opts.gate;
    this.protocol = opts.protocol ?? LEASE_PROTOCOL;
    this.log = opts.log;
  }

  async acquire(key: string, opts: AcquireOptions): Promise<AcquireResult> {
    const wire = encodeLeaseKey(key);
    this.checkTtl(opts.ttl_ms);
    if (opts.takeoverNodeId !== undefined && !opts.owner.startsWith(`${opts.takeoverNodeId}:`)) {
      throw new Error(`takeoverNodeId ${opts.takeoverNodeId} is not the claimant's node (${opts.owner})`);
    }
    let current: Current;
    let now: number | null = null;
    try {
      current = await this.read(wire);
      // Only a record that is there needs the store's clock to judge it.
      if (current) now = await this.records.now();
    } catch (err) {
      return { ok: false, rule: "unknown", error: errorText(err) };
    }
    const judged = judgeClaim(current, now, opts.owner, opts.takeoverNodeId);
    if (judged.take === "refuse") return { ok: false, rule: "held", holder: judged.holder, epoch: judged.epoch };

    // Write 1: the record, claiming.
    const nonce = randomUUID();
    const claiming: LeaseRecord = {
      owner: opts.owner,
      epoch: 0,
      state: "claiming",
      claim: nonce,
      acquired_at: null,
      ttl_ms: opts.ttl_ms,
      preferred: opts.preferred,
      protocol: this.protocol,
      meta: opts.meta ?? {},
    };
    let r1: number;
    try {
      r1 =
        judged.take === "create"
          ? await this.records.create(wire, encodeRecord(claiming))
          : await this.records.update(wire, encodeRecord(claiming), judged.revision);
    } catch (err) {
      if (err instanceof CasConflict) return this.refusedByRace(wire, err);
      // The write may have landed with its answer lost: give back a record that is ours.
      await this.giveBackIfOurs(wire, nonce);
      return { ok: false, rule: "unknown", error: errorText(err) };
    }

    // From here on, any failure gives back exactly revision r1.
    let claimed_at: number;
    try {
      const written = await this.records.at(wire, r1);
      if (!written) throw new CasConflict(wire, r1);
      claimed_at = written.created;
      if (opts.gate) {
        if (!this.gate) throw new Error(`${this.records.bucket}: this lease store has no protocol gate`);
        const floor = await this.gate.lowerFloor(claimed_at, key);
        if (floor !== null) {
          await this.giveBack(wire, r1);
          this.log.debug("lease_claim_gated", { key, floor, protocol: this.protocol });
          return { ok: false, rule: "protocol", floor };
        }
      }
    } catch (err) {
      await this.giveBack(wire, r1);
      if (err instanceof CasConflict) return this.refusedByRace(wire, err);
      return { ok: false, rule: "unknown", error: errorText(err) };
    }

    // Write 2: the epoch counter.
    let epoch: number;
    try {
      const floor = current?.record?.epoch ?? 0;
      epoch = await this.bumpEpoch(wire, floor);
    } catch (err) {
      await this.giveBack(wire, r1);
      return { ok: false, rule: "unknown", error: errorText(err) };
    }

    // Write 3: the token into the record.
    const held: LeaseRecord = { ...claiming, epoch, state: "held", acquired_at: claimed_at };
    try {
      const r3 = await this.records.update(wire, encodeRecord(held), r1);
      const entry = await this.records.at(wire, r3);
      if (!entry) throw new StoreUnavailable(`${key}: the record written at revision ${r3} is gone`);
      return { ok: true, lease: toLease(key, entry, held) };
    } catch (err) {
      if (err instanceof CasConflict) {
        await this.giveBack(wire, r1);
        return this.refusedByRace(wire, err);
      }
      // Did the token land? If the record carries it, the tenure committed: say so.
      try {
        const now_current = await this.read(wire);
        const rec = now_current?.record;
        if (now_current && rec && rec.claim === nonce && rec.state === "held" && rec.epoch === epoch) {
          return { ok: true, lease: toLease(key, now_current.entry, rec) };
        }
      } catch {
        // unreachable: fall through to the give-back, which is refused the same way or not
      }
      await this.giveBack(wire, r1);
      return { ok: false, rule: "unknown", error: errorText(err) };
    }
  }

  async renew(key: string, owner: string, epoch: number, meta?: LeaseMeta): Promise<RenewResult> {
    const wire = encodeLeaseKey(key);
    let current: Current;
    try {
      current = await this.read(wire);
    } catch (err) {
      return { status: "unknown", error: errorText(err) };
    }
    if (!current || judgeRenew(current.record, owner, epoch).renew === false) return { status: "lost" };
    const record = current.record!;
    const next: LeaseRecord = { ...record, meta: meta ?? record.meta };
    let revision: number;
    try {
      revision = await this.records.update(wire, encodeRecord(next), current.entry.revision);
    } catch (err) {
      if (err instanceof CasConflict) return { status: "lost" };
      return { status: "unknown", error: errorText(err) };
    }
    let written: KvEntry | null;
    try {
      written = await this.records.at(wire, revision);
    } catch (err) {
      return { status: "unknown", error: errorText(err) };
    }
    if (!written) return { status: "lost" };
    // Lapsed before this renewal landed: nobody took it (the CAS proves it), but work done
    // in the gap was unprotected, so the tenure is over. Give the write back; re-acquire.
    if (!isLive(current.entry, record, written.created)) {
      await this.giveBack(wire, revision);
      this.log.info("lease_renew_lapsed", { key, epoch });
      return { status: "lost" };
    }
    return { status: "renewed", lease: toLease(key, written, next) };
  }

  async release(key: string, owner: string, epoch: number): Promise<ReleaseResult> {
    const wire = encodeLeaseKey(key);
    try {
      const current = await this.read(wire);
      const record = current?.record;
      if (!current || !record || record.owner !== owner || record.epoch !== epoch) return "not_held";
      await this.records.delete(wire, current.entry.revision);
      return "released";
    } catch (err) {
      if (err instanceof CasConflict) return "not_held";
      return "unknown";
    }
  }

  async get(key: string): Promise<LeaseView | null> {
    const wire = encodeLeaseKey(key);
    const current = await this.read(wire);
    if (!current?.record) return null;
    const now = await this.records.now();
    return toView(key, current.entry, current.record, now);
  }

  async list(prefix: string): Promise<LeaseView[]> {
    const entries = await this.records.entries(leaseFilter(prefix));
    const now = await this.records.now();
    const out: LeaseView[] = [];
    for (const entry of entries) {
      const key = decodeLeaseKey(entry.key);
      if (key === null || !key.startsWith(prefix)) continue;
      const record = decodeRecord(entry.value);
      if (record) out.push(toView(key, entry, record, now));
    }
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async protocolFloor(): Promise<number | null> {
    if (!this.gate) throw new Error(`${this.records.bucket}: this lease store has no protocol gate`);
    const now = await this.records.now();
    return this.gate.floor(now);
  }

  now(): Promise<number> {
    return this.records.now();
  }

  private checkTtl(ttl_ms: number): void {
    if (!Number.isInteger(ttl_ms) || ttl_ms <= 0) throw new RangeError(`ttl_ms must be a positive integer, got ${ttl_ms}`);
    const age = this.records.max_age_ms;
    // The bucket would silently drop a record still live by its own TTL: two holders.
    if (age > 0 && ttl_ms > age) {
      throw new RangeError(`ttl_ms ${ttl_ms} exceeds ${this.records.bucket}'s age limit of ${age} ms`);
    }
  }

  private async read(wire: string): Promise<Current> {
    const entry = await this.records.get(wire);
    if (!entry) return null;
    return { entry, record: decodeRecord(entry.value) };
  }

  private async bumpEpoch(wire: string, floor: number): Promise<number> {
    let lastErr: unknown = null;
    for (let attempt = 0; attempt < EPOCH_CAS_ATTEMPTS; attempt++) {
      const counter = await this.epochs.get(wire);
      const stored = counter ? Number(new TextDecoder().decode(counter.value)) : 0;
      // max with the record's epoch: a counter lost to an operator can never hand out a used token.
      const next = Math.max(Number.isFinite(stored) ? stored : 0, floor) + 1;
      const value = new TextEncoder().encode(String(next));
      try {
        if (counter) await this.epochs.update(wire, value, counter.revision);
        else await this.epochs.create(wire, value);
        return next;
      } catch (err) {
        if (!(err instanceof CasConflict)) throw err;
        lastErr = err;
      }
    }
    throw lastErr;
  }

  /** Delete exactly the revision this claim wrote; a later write (a sibling's, or a tenure
   *  that committed) makes the delete's CAS fail and is left alone. */
  private async giveBack(wire: string, revision: number): Promise<void> {
    try {
      await this.records.delete(wire, revision);
    } catch (err) {
      this.log.debug("lease_give_back_failed", { key: wire, revision, error: errorText(err) });
    }
  }

  /** After a lost answer to write 1 the revision is unknown: read it, and give back only ours. */
  private async giveBackIfOurs(wire: string, nonce: string): Promise<void> {
    try {
      const current = await this.read(wire);
      if (current?.record?.claim === nonce && current.record.state === "claiming") {
        await this.giveBack(wire, current.entry.revision);
      }
    } catch (err) {
      this.log.debug("lease_give_back_failed", { key: wire, error: errorText(err) });
    }
  }

  private async refusedByRace(wire: string, err: CasConflict): Promise<AcquireResult> {
    try {
      const current = await this.read(wire);
      if (current?.record) return { ok: false, rule: "held", holder: current.record.owner, epoch: current.record.epoch };
    } catch {
      // fall through
    }
    return { ok: false, rule: "unknown", error: errorText(err) };
  }
}
