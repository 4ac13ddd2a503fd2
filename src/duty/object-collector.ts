// The `object-collector` singleton duty: hourly, deletes what objects/collect.ts judges
// orphaned (never while this node's copy is not whole), abandons unfinished uploads, reports
// named objects gone missing, and records the pass in the `objects` slot. One collector, not
// for safety (two would be safe) but so the whole store is listed once an hour.
import { z } from "zod";
import type { Clock } from "../clock.ts";
import type { KvSlot } from "../coord/contract.ts";
import type { Logger } from "../log.ts";
import { planCollection, type CollectPlan, type CopyState } from "../objects/collect.ts";
import type { FileStore } from "../objects/store.ts";
import { bounded } from "./bound.ts";
import { DUTY_CLAIM_BOUND_MS, type DutyContext, type DutyWork } from "./runner.ts";

/** The spec's cadence: hourly. Garbage a day old waits at most an hour more. */
export const OBJECTS_TICK_MS = 60 * 60 * 1000;
/** Three ticks, as every duty here: one slow claim never moves the duty. */
const TTL_TICKS = 3;
/** The slot key of the last pass's record. */
export const COLLECTOR_KEY = "collector";
/** Missing keys one log line names: enough to look them up, bounded like every line. */
const MISSING_LOGGED_MAX = 20;

export const collectorRecordSchema = z.strictObject({
  v: z.literal(1),
  node: z.string(),
  at: z.number().int(),
  objects: z.number().int(),
  named: z.number().int(),
  deleted: z.number().int(),
  abandoned: z.number().int(),
  young: z.number().int(),
  deferred: z.number().int(),
  held: z.string().nullable(),
  failed: z.number().int(),
  /** Objects a row names that the store does not hold. */
  missing: z.number().int(),
});
export type CollectorRecord = z.output<typeof collectorRecordSchema>;

export interface ObjectCollectorOptions {
  node_id: string;
  files: Pick<FileStore, "list" | "delete" | "unfinished" | "abandon">;
  /** Every object id this node's copy's rows name (read AFTER the store's listing). */
  named: () => Set<string>;
  /** Whether this node's copy is whole right now (asked again before every delete). */
  copy: () => CopyState;
  slot: KvSlot;
  clock: Clock;
  log: Logger;
  call_bound_ms?: () => number;
  tick_ms?: number;
  keep_ms?: number;
  unfinished_after_ms?: number;
}

export class ObjectCollector implements DutyWork {
  readonly name = "object-collector";
  readonly ttl_ms: number;

  constructor(private readonly o: ObjectCollectorOptions) {
    // A shortened tick (tests) keeps the other duties' 30 s floor.
    this.ttl_ms = o.tick_ms === undefined ? TTL_TICKS * OBJECTS_TICK_MS : Math.max(30_000, TTL_TICKS * o.tick_ms);
  }

  nextTickIn(): number {
    return this.o.tick_ms ?? OBJECTS_TICK_MS;
  }

  /** One listing (a second or two at 100,000 objects) or delete: the node's duty call bound,
   *  under the watchdog's threshold, so a listing held across an election fails the tick. */
  private bound(): number {
    return this.o.call_bound_ms?.() ?? DUTY_CLAIM_BOUND_MS;
  }

  async tick(ctx: DutyContext): Promise<string> {
    const { clock } = this.o;
    ctx.beat();
    // Names before the listing prove an object missing; names after it keep an object from
    // deletion (a row written meanwhile is then seen).
    const namedBefore = this.o.named();
    const objects = await bounded(this.o.files.list(), this.bound(), clock, "object store listing");
    const unfinished = await bounded(this.o.files.unfinished(), this.bound(), clock, "unfinished uploads listing");
    const named = this.o.named();
    const plan = planCollection({
      objects,
      named,
      namedBefore,
      copy: this.o.copy(),
      unfinished,
      now_ms: clock.now(),
      ...(this.o.keep_ms !== undefined ? { keep_ms: this.o.keep_ms } : {}),
      ...(this.o.unfinished_after_ms !== undefined ? { unfinished_after_ms: this.o.unfinished_after_ms } : {}),
    });
    const done = await this.carryOut(plan, ctx);
    const record: CollectorRecord = { v: 1, node: this.o.node_id, at: clock.now(), objects: objects.length, named: named.size, young: plan.young, deferred: plan.deferred, missing: plan.missing.length, ...done };
    if (record.held) this.o.log.warn("objects_collect_held", { reason: record.held, objects: record.objects });
    if (plan.missing.length > 0) this.o.log.error("objects_missing", { count: plan.missing.length, keys: plan.missing.slice(0, MISSING_LOGGED_MAX) });
    this.o.log.info("objects_collected", { ...record });
    await bounded(this.o.slot.put(COLLECTOR_KEY, new TextEncoder().encode(JSON.stringify(record))), this.bound(), clock, "collector record");
    return `objects: ${done.deleted} deleted, ${done.abandoned} abandoned, ${record.young} young, ${record.missing} missing${record.held ? `, held: ${record.held}` : ""}`;
  }

  /** Deletes and abandons; stops deleting the moment the copy stops being whole. */
  private async carryOut(plan: CollectPlan, ctx: DutyContext): Promise<{ deleted: number; abandoned: number; failed: number; held: string | null }> {
    let deleted = 0;
    let abandoned = 0;
    let failed = 0;
    let held = plan.held;
    for (const key of plan.delete) {
      if (ctx.signal.aborted) break;
      // A copy that began a restore (or fell behind) since the plan was made may be
      // missing rows: asked again before every delete, not once per pass.
      const copy = this.o.copy();
      if (!copy.whole) {
        held = copy.reason;
        break;
      }
      ctx.beat();
      try {
        await bounded(this.o.files.delete(key), this.bound(), this.o.clock, `delete ${key}`);
        deleted++;
        this.o.log.info("object_deleted", { key });
      } catch (err) {
        failed++;
        this.o.log.warn("object_delete_failed", { key, error: err as Error });
      }
    }
    for (const nuid of plan.abandon) {
      if (ctx.signal.aborted) break;
      ctx.beat();
      try {
        const chunks = await bounded(this.o.files.abandon(nuid), this.bound(), this.o.clock, `abandon ${nuid}`);
        abandoned++;
        this.o.log.info("object_upload_abandoned", { nuid, chunks });
      } catch (err) {
        failed++;
        this.o.log.warn("object_abandon_failed", { nuid, error: err as Error });
      }
    }
    return { deleted, abandoned, failed, held };
  }
}
