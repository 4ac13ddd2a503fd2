// The lease record as stored, and the pure judgements made on it. No I/O here: the claim,
// renew and gate decisions are functions of (record, store time), tested by tables and
// shared by both backends through leases.ts.
import { z } from "zod";
import type { KvEntry, Lease, LeaseMeta, LeaseView } from "./contract.ts";

/**
 * Stored in the lease bucket under the lease's key. `expires_at` is not stored: it is the
 * store's timestamp on the write that carried the record plus `ttl_ms`, so a renewal is
 * one compare-and-set with no clock reading before it, and the expiry is on the store's
 * clock by construction. Additive-only (spec: lease schema evolution): a field an older
 * build does not read must stay optional for it.
 */
export const LeaseRecordSchema = z.object({
  owner: z.string().min(1),
  /** 0 while claiming: the epoch is minted by the second write of a claim. */
  epoch: z.number().int().nonnegative(),
  state: z.enum(["claiming", "held"]),
  /** Names the claim call that wrote this record, so its give-back can tell it apart. */
  claim: z.string().min(1),
  /** Store clock, ms; null while claiming. */
  acquired_at: z.number().nullable(),
  ttl_ms: z.number().int().positive(),
  preferred: z.string(),
  protocol: z.number().int().nonnegative(),
  meta: z.record(z.string(), z.unknown()),
});
export type LeaseRecord = z.infer<typeof LeaseRecordSchema>;

export function encodeRecord(r: LeaseRecord): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(r));
}

/** A record that does not parse is treated as a foreign claim: never taken while it may be live. */
export function decodeRecord(value: Uint8Array): LeaseRecord | null {
  try {
    const parsed = LeaseRecordSchema.safeParse(JSON.parse(new TextDecoder().decode(value)));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

export function expiresAt(entry: KvEntry, record: LeaseRecord): number {
  return entry.created + record.ttl_ms;
}

export function isLive(entry: KvEntry, record: LeaseRecord, now: number): boolean {
  return expiresAt(entry, record) > now;
}

/** `{node_id}:{random}` → node_id (an owner without a colon is its own node id). */
export function nodeIdOf(owner: string): string {
  const i = owner.lastIndexOf(":");
  return i < 0 ? owner : owner.slice(0, i);
}

export function toLease(key: string, entry: KvEntry, record: LeaseRecord): Lease {
  return {
    key,
    owner: record.owner,
    epoch: record.epoch,
    acquired_at: record.acquired_at ?? entry.created,
    expires_at: expiresAt(entry, record),
    preferred: record.preferred,
    protocol: record.protocol,
    meta: record.meta as LeaseMeta,
  };
}

export function toView(key: string, entry: KvEntry, record: LeaseRecord, now: number): LeaseView {
  return { ...toLease(key, entry, record), live: isLive(entry, record, now), remaining_ms: expiresAt(entry, record) - now };
}

export type ClaimJudgement =
  | { take: "create" }
  | { take: "update"; revision: number }
  | { take: "refuse"; holder: string; epoch: number };

/**
 * May a claim by `owner` write its claiming record over what the key holds now?
 * Free when nothing is there or what is there lapsed. A live record is taken only by its
 * own owner (a re-acquire, which fences that owner's past self with a new epoch) or by a
 * new incarnation of its node that has proved that owner dead (`takeover`: it holds the
 * store-dir lock the owner ran under). Another node's lease is never taken over.
 */
export function judgeClaim(
  current: { entry: KvEntry; record: LeaseRecord | null } | null,
  now: number | null,
  owner: string,
  takeover: ((owner: string) => boolean) | undefined,
): ClaimJudgement {
  if (!current) return { take: "create" };
  const { entry, record } = current;
  if (!record) {
    // Unreadable: only its age can free it; its TTL is unknown, so wait out the bucket's.
    return { take: "refuse", holder: "unknown", epoch: 0 };
  }
  if (now !== null && !isLive(entry, record, now)) return { take: "update", revision: entry.revision };
  if (record.owner === owner) return { take: "update", revision: entry.revision };
  if (takeover !== undefined && nodeIdOf(record.owner) === nodeIdOf(owner) && takeover(record.owner)) {
    return { take: "update", revision: entry.revision };
  }
  return { take: "refuse", holder: record.owner, epoch: record.epoch };
}

export type RenewJudgement = { renew: true } | { renew: false };

/** A renewal needs the record to be this tenure's and held; lapse is judged after the write. */
export function judgeRenew(record: LeaseRecord | null, owner: string, epoch: number): RenewJudgement {
  if (!record || record.state !== "held") return { renew: false };
  if (record.owner !== owner || record.epoch !== epoch) return { renew: false };
  return { renew: true };
}

/** Only presence and seat leases speak for a build that is still running (spec: Mixed-version fleets). */
export function countsForGate(key: string): boolean {
  return key.startsWith("node:") || key.startsWith("seat:");
}

/** True when the record is the tenure (owner, epoch) names: epochs never repeat on a key. */
export function isTenure(record: LeaseRecord | null, owner: string, epoch: number): boolean {
  return record !== null && record.state === "held" && record.owner === owner && record.epoch === epoch;
}

export type TokenJudgement =
  /** The token landed: the tenure committed, whatever the write's own answer said. */
  | { token: "committed" }
  /** The key still holds this claim's claiming record: the token did not land (yet). */
  | { token: "pending" }
  /** The key holds nothing of this claim's: another claim or a give-back came between. */
  | { token: "gone" };

/**
 * A token write (a claim's third write) failed or lost its answer, and the key was read
 * back from the stream leader: what does the record say about this claim? Judged by the
 * claim's own nonce and epoch, never by the write's error, because a write whose answer
 * was lost, and a compare-and-set refused by a leader that has not yet applied the claim's
 * first write, both leave the record saying something else than the error did.
 */
export function judgeToken(
  seen: { entry: KvEntry; record: LeaseRecord | null } | null,
  claim: string,
  epoch: number,
  claiming_revision: number,
): TokenJudgement {
  const record = seen?.record ?? null;
  if (!seen || !record || record.claim !== claim) return { token: "gone" };
  if (record.state === "held" && record.epoch === epoch) return { token: "committed" };
  if (record.state === "claiming" && seen.entry.revision === claiming_revision) return { token: "pending" };
  return { token: "gone" };
}
