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
import { companySchema, type Company } from "../config/company.ts";
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
const storedRevisionSchema = z.object({ digest: z.string(), company: z.unknown() });
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

export class CompanyRevisions {
  constructor(
    private readonly config: KvSlot,
    private readonly status: KvSlot,
    private readonly nodeId: string,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  /** Reads the active revision, or null when the fleet has none yet. */
  async active(): Promise<ActiveRevision | null> {
    const ptr = await this.config.get(ACTIVE_KEY);
    if (!ptr || ptr.operation !== "put") return null;
    const pointer = pointerSchema.parse(JSON.parse(dec.decode(ptr.value)));
    const body = await this.config.get(revisionKey(pointer.digest));
    if (!body || body.operation !== "put") throw new Error(`active revision ${pointer.digest} has no body in crewlet_config`);
    const stored = storedRevisionSchema.parse(JSON.parse(dec.decode(body.value)));
    return { digest: pointer.digest, epoch: ptr.revision, company: companySchema.parse(stored.company) };
  }

  /**
   * Makes `company` the fleet's company unless it already is. Returns the active revision
   * after the call, whoever won a race.
   */
  async activate(company: Company): Promise<{ active: ActiveRevision; changed: boolean }> {
    const digest = companyDigest(company);
    // Bounded: each lost race means a peer moved the pointer; a few laps settle it.
    for (let attempt = 0; attempt < 5; attempt++) {
      const ptr = await this.config.get(ACTIVE_KEY);
      const current = ptr && ptr.operation === "put" ? pointerSchema.parse(JSON.parse(dec.decode(ptr.value))) : null;
      if (current?.digest === digest) {
        return { active: { digest, epoch: ptr!.revision, company }, changed: false };
      }
      // The body first: a pointer must never name a revision that is not there.
      await this.config.put(revisionKey(digest), enc.encode(JSON.stringify({ digest, company })));
      const pointer = enc.encode(JSON.stringify({ digest, activated_by: this.nodeId, activated_at: this.clock.now() }));
      try {
        const epoch = ptr && ptr.operation === "put" ? await this.config.update(ACTIVE_KEY, pointer, ptr.revision) : await this.config.create(ACTIVE_KEY, pointer);
        this.log.info("config_revision_activated", { digest, epoch });
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
