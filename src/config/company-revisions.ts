// One company for the whole fleet (Scaling Out: "Control plane"). A company is stored as an
// immutable revision in crewlet_config (`revision.{digest}` → the body), and the activation
// pointer (`active` → {digest}) says which one is current; the pointer's KV revision is the
// activation epoch, so it only ever moves forward. Every node applies the active revision
// (a poll, plus an immediate nudge) and records what it applied in crewlet_status.
//
// Activation is a compare-and-set on the pointer: two nodes booting with different files
// cannot both win one epoch, and a node whose file matches the active company writes nothing.
import { createHash } from "node:crypto";
import { z } from "zod";
import type { Clock, Timer } from "../clock.ts";
import { agentSeats, companySchema, type Company } from "./company.ts";
import { decodeRevisionBody, encodeRevisionBody, revisionJson } from "./revision-body.ts";
import { CasConflict, type KvSlot } from "../coord/contract.ts";
import type { Logger } from "../log.ts";

/** Slow enough to cost nothing at fleet scale; the nudge makes the common case immediate. */
export const APPLY_POLL_MS = 15_000;
/** ± this share of the poll, so a fleet restarted together does not poll in lockstep. */
const APPLY_POLL_JITTER = 0.2;
/** Core NATS subject a node publishes after it activates a revision. */
export const REVISION_ACTIVATED_SUBJECT = "crewlet.config.revision_activated";

const ACTIVE_KEY = "active";
const revisionKey = (digest: string) => `revision.${digest}`;

const pointerSchema = z.object({ digest: z.string().regex(/^[0-9a-f]{64}$/), activated_by: z.string(), activated_at: z.number() });
const storedRevisionSchema = z.object({ digest: z.string(), company: z.unknown(), stored_by: z.string().optional() });
const appliedSchema = z.object({ digest: z.string(), epoch: z.number(), applied_at: z.number(), seats: z.number() });
export type AppliedRecord = z.infer<typeof appliedSchema>;

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Canonical JSON (sorted keys) so one company always has one digest. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

export function companyDigest(company: Company): string {
  return createHash("sha256").update(canonicalJson(company)).digest("hex");
}

export interface ActiveRevision {
  digest: string;
  /** The activation pointer's KV revision: monotonic across the fleet. */
  epoch: number;
  company: Company;
}

/** A stored revision as the API lists it. */
export interface RevisionSummary {
  digest: string;
  name: string;
  /** Agent seats the revision places. */
  seats: number;
  /** Store clock, ms: when the body was first stored. */
  stored_at: number;
  stored_by: string | null;
  active: boolean;
}

/** Revisions one listing reads: far more than an operator keeps, and a bound on the walk. */
export const MAX_LISTED_REVISIONS = 1_000;

export class RevisionNotFound extends Error {
  constructor(readonly digest: string) {
    super(`no company revision ${digest}`);
    this.name = "RevisionNotFound";
  }
}

/** A stored body this build cannot read as a company (written by another build, or damaged). */
export class RevisionUnreadable extends Error {
  constructor(readonly digest: string, readonly detail: string) {
    super(`company revision ${digest} cannot be read by this build: ${detail}`);
    this.name = "RevisionUnreadable";
  }
}

/** A stored body as its envelope, or why it cannot be: a value one revision's reader judges,
 * not one that fails the whole listing (or a route with a 500). */
function decodeStored(value: Uint8Array): ({ ok: true } & z.infer<typeof storedRevisionSchema>) | { ok: false; error: string } {
  try {
    const parsed = storedRevisionSchema.safeParse(JSON.parse(decodeRevisionBody(value)));
    return parsed.success ? { ok: true, ...parsed.data } : { ok: false, error: `field ${parsed.error.issues[0]?.path.join(".")}: ${parsed.error.issues[0]?.message}` };
  } catch (err) {
    return { ok: false, error: (err as Error).message };
  }
}

export const DIGEST_RE = /^[0-9a-f]{64}$/;

export { MAX_REVISION_BYTES, RevisionTooLarge } from "./revision-body.ts";

export class CompanyRevisions {
  constructor(
    private readonly config: KvSlot,
    private readonly status: KvSlot,
    private readonly nodeId: string,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  /** The activation pointer alone (one read): which revision is current, and its epoch. */
  async pointer(): Promise<{ digest: string; epoch: number } | null> {
    const ptr = await this.config.get(ACTIVE_KEY);
    if (!ptr || ptr.operation !== "put") return null;
    return { digest: pointerSchema.parse(JSON.parse(dec.decode(ptr.value))).digest, epoch: ptr.revision };
  }

  /** Reads the active revision, or null when the fleet has none yet. */
  async active(): Promise<ActiveRevision | null> {
    const ptr = await this.pointer();
    if (!ptr) return null;
    const found = await this.read(ptr.digest);
    if (!found) throw new Error(`active revision ${ptr.digest} has no body in crewlet_config`);
    return { digest: ptr.digest, epoch: ptr.epoch, company: found.company };
  }

  /** One stored revision, or null when there is none by that digest. */
  async read(digest: string): Promise<{ company: Company; stored_at: number; stored_by: string | null } | null> {
    const body = await this.config.get(revisionKey(digest));
    if (!body || body.operation !== "put") return null;
    const stored = decodeStored(body.value);
    if (!stored.ok) throw new RevisionUnreadable(digest, stored.error);
    const parsed = companySchema.safeParse(stored.company);
    if (!parsed.success) throw new RevisionUnreadable(digest, parsed.error.issues[0]?.message ?? "invalid");
    return { company: parsed.data, stored_at: body.created, stored_by: stored.stored_by ?? null };
  }

  /** The stored revisions, newest first (at most MAX_LISTED_REVISIONS). */
  async list(): Promise<RevisionSummary[]> {
    const ptr = await this.pointer();
    const keys = (await this.config.keys("revision.*")).slice(0, MAX_LISTED_REVISIONS);
    const out: RevisionSummary[] = [];
    for (const key of keys) {
      const digest = key.slice("revision.".length);
      const body = await this.config.get(key);
      if (!body || body.operation !== "put") continue;
      const stored = decodeStored(body.value);
      const parsed = stored.ok ? companySchema.safeParse(stored.company) : null;
      out.push({
        digest,
        name: parsed?.success ? parsed.data.name : "(unreadable by this build)",
        seats: parsed?.success ? agentSeats(parsed.data).length : 0,
        stored_at: body.created,
        stored_by: stored.ok ? (stored.stored_by ?? null) : null,
        active: ptr?.digest === digest,
      });
    }
    return out.sort((a, b) => b.stored_at - a.stored_at || (a.digest < b.digest ? -1 : 1));
  }

  /** Stores `company` as an immutable revision (a no-op when it is there); returns its digest. */
  async store(company: Company): Promise<string> {
    const digest = companyDigest(company);
    const body = encodeRevisionBody(revisionJson(digest, company, this.nodeId));
    try {
      await this.config.create(revisionKey(digest), body);
    } catch (err) {
      // Already stored: a revision is immutable, and its first stored_at stands.
      if (!(err instanceof CasConflict)) throw err;
    }
    return digest;
  }

  /**
   * Makes `company` the fleet's company unless it already is. Returns the active revision
   * after the call, whoever won a race.
   */
  async activate(company: Company): Promise<{ active: ActiveRevision; changed: boolean }> {
    const digest = await this.store(company);
    return this.point(digest, company, false);
  }

  /**
   * Makes `company` the fleet's company only if the fleet has none: a peer that activated
   * one first (two first boots racing) wins, and this call changes nothing. Returns null
   * then.
   */
  async activateIfNone(company: Company): Promise<{ active: ActiveRevision; changed: boolean } | null> {
    const digest = await this.store(company);
    return this.point(digest, company, true);
  }

  /** Makes a stored revision active again (a rollback, or a roll forward). */
  async activateDigest(digest: string): Promise<{ active: ActiveRevision; changed: boolean }> {
    const found = await this.read(digest);
    if (!found) throw new RevisionNotFound(digest);
    return this.point(digest, found.company, false);
  }

  /** Moves the activation pointer to a stored body (compare-and-set on the pointer). */
  private async point(digest: string, company: Company, onlyIfNone: true): Promise<{ active: ActiveRevision; changed: boolean } | null>;
  private async point(digest: string, company: Company, onlyIfNone: false): Promise<{ active: ActiveRevision; changed: boolean }>;
  private async point(digest: string, company: Company, onlyIfNone: boolean): Promise<{ active: ActiveRevision; changed: boolean } | null> {
    // Bounded: each lost race means a peer moved the pointer; a few laps settle it.
    for (let attempt = 0; attempt < 5; attempt++) {
      const ptr = await this.config.get(ACTIVE_KEY);
      const current = ptr && ptr.operation === "put" ? pointerSchema.parse(JSON.parse(dec.decode(ptr.value))) : null;
      if (current?.digest === digest) {
        return { active: { digest, epoch: ptr!.revision, company }, changed: false };
      }
      if (onlyIfNone && current) return null;
      const pointer = enc.encode(JSON.stringify({ digest, activated_by: this.nodeId, activated_at: this.clock.now() }));
      try {
        const epoch = ptr && ptr.operation === "put" ? await this.config.update(ACTIVE_KEY, pointer, ptr.revision) : await this.config.create(ACTIVE_KEY, pointer);
        this.log.info("config_revision_activated", { digest, epoch, previous: current?.digest ?? null });
        return { active: { digest, epoch, company }, changed: true };
      } catch (err) {
        if (!(err instanceof CasConflict)) throw err;
      }
    }
    throw new Error("could not activate the company: the activation pointer kept moving");
  }

  async recordApplied(active: ActiveRevision, seats: number): Promise<void> {
    const rec: AppliedRecord = { digest: active.digest, epoch: active.epoch, applied_at: this.clock.now(), seats };
    await this.status.put(`node.${this.nodeId}`, enc.encode(JSON.stringify(rec)));
  }

  async appliedBy(nodeId: string): Promise<AppliedRecord | null> {
    const e = await this.status.get(`node.${nodeId}`);
    if (!e || e.operation !== "put") return null;
    return appliedSchema.parse(JSON.parse(dec.decode(e.value)));
  }
}

/**
 * Applies the active revision whenever it moves: on a jittered poll and at once on a
 * nudge. `apply` runs one at a time, in epoch order, and only for a newer epoch.
 */
export class RevisionFollower {
  private appliedEpoch = 0;
  private timer: Timer | null = null;
  private running: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly revisions: CompanyRevisions,
    private readonly apply: (active: ActiveRevision) => Promise<void>,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly random: () => number = Math.random,
  ) {}

  get epoch(): number {
    return this.appliedEpoch;
  }

  /** The boot applied this epoch itself (mailboxes, estate seed, seats): start after it. */
  markApplied(epoch: number): void {
    this.appliedEpoch = Math.max(this.appliedEpoch, epoch);
  }

  /** Checks now; resolves once any newer revision has been applied. */
  check(): Promise<void> {
    this.running = this.running.then(() => this.checkOnce());
    return this.running;
  }

  start(): void {
    const schedule = () => {
      if (this.stopped) return;
      const jitter = 1 + (this.random() * 2 - 1) * APPLY_POLL_JITTER;
      this.timer = this.clock.setTimeout(() => {
        void this.check().finally(schedule);
      }, APPLY_POLL_MS * jitter);
    };
    schedule();
  }

  stop(): void {
    this.stopped = true;
    this.timer?.cancel();
  }

  private async checkOnce(): Promise<void> {
    if (this.stopped) return;
    let active: ActiveRevision | null;
    try {
      // The pointer alone says whether anything moved: the body (the whole company, a few
      // hundred KiB at 2,000 seats) is read only for a newer epoch, not on every poll of
      // every node (an idle node read both each 15 s; bench/scale.ts).
      const ptr = await this.revisions.pointer();
      if (!ptr || ptr.epoch <= this.appliedEpoch) return;
      active = await this.revisions.active();
    } catch (err) {
      this.log.warn("config_revision_unreadable", { error: err as Error });
      return;
    }
    if (!active || active.epoch <= this.appliedEpoch) return;
    try {
      await this.apply(active);
      this.appliedEpoch = active.epoch;
    } catch (err) {
      this.log.error("config_apply_failed", { digest: active.digest, epoch: active.epoch, error: err as Error });
    }
  }
}

/**
 * The fleet's current revision, read from the store on every call: the pointer each time
 * (one read), the body only when the pointer names another digest than last time (a body
 * parse costs milliseconds on a large company; the scheduler asks every second).
 */
export function currentRevisionReader(revisions: Pick<CompanyRevisions, "pointer" | "read">): () => Promise<{ epoch: number; company: Company } | null> {
  let cached: { digest: string; company: Company } | null = null;
  return async () => {
    const ptr = await revisions.pointer();
    if (!ptr) return null;
    if (cached?.digest !== ptr.digest) {
      const body = await revisions.read(ptr.digest);
      if (!body) throw new Error(`active revision ${ptr.digest} has no body in crewlet_config`);
      cached = { digest: ptr.digest, company: body.company };
    }
    return { epoch: ptr.epoch, company: cached.company };
  };
}
