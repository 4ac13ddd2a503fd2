// Pure schedule arithmetic and records (no I/O): which instants fell due, the fire claim and
// cursor records the scheduler keeps in crewlet_fires and crewlet_schedules, and the
// trigger a fire lands as.
import { Cron } from "croner";
import { z } from "zod";
import type { Company } from "../config/company.ts";
import { cronOf, type ScheduleConfig } from "../config/schedules.ts";
import type { Trigger } from "../org/trigger.ts";

/**
 * Due instants counted per catch-up before the count stops. Catch-up fires once whatever
 * the count, so the bound only caps the work of counting (a 1 s cron after a day off would
 * be 86,400 steps); the log then says "at least".
 */
export const MAX_CATCHUP_COUNT = 10_000;

export interface EffectiveSchedule extends ScheduleConfig {
  /** schedule.timezone, else company.timezone. */
  zone: string;
}

export function effectiveSchedules(company: Company): EffectiveSchedule[] {
  return company.schedules.map((s) => ({ ...s, zone: s.timezone ?? company.timezone }));
}

/** One croner job per (expression, zone), reused across ticks. */
export class CronCache {
  private readonly jobs = new Map<string, Cron>();
  get(s: Pick<EffectiveSchedule, "cron" | "zone">): Cron {
    const key = `${s.zone}\u0000${s.cron}`;
    let job = this.jobs.get(key);
    if (!job) {
      job = cronOf(s.cron, s.zone);
      this.jobs.set(key, job);
    }
    return job;
  }
}

export interface Due {
  /** The latest instant in (after, now], or null when nothing fell due. */
  latest: number | null;
  /** How many instants fell due (capped at MAX_CATCHUP_COUNT). */
  count: number;
  capped: boolean;
}

/** The instants of `job` in (after_ms, now_ms]. */
export function dueBetween(job: Cron, after_ms: number, now_ms: number, cap = MAX_CATCHUP_COUNT): Due {
  let latest: number | null = null;
  let count = 0;
  let at = after_ms;
  for (;;) {
    const next = job.nextRun(new Date(at));
    if (!next || next.getTime() > now_ms) return { latest, count, capped: false };
    count++;
    latest = next.getTime();
    at = latest;
    if (count >= cap) {
      // Stop counting; the latest due instant is still the one before now.
      // croner's previousRuns is exclusive of its reference at second precision: ask from a
      // second past now, and step back once if that answered an instant after now.
      let prev = job.previousRuns(1, new Date(now_ms + 1000))[0];
      if (prev && prev.getTime() > now_ms) prev = job.previousRuns(1, prev)[0];
      return { latest: prev ? Math.max(prev.getTime(), latest) : latest, count, capped: true };
    }
  }
}

export function nextFire(job: Cron, after_ms: number): number | null {
  return job.nextRun(new Date(after_ms))?.getTime() ?? null;
}

// ---- records: fire claims in crewlet_fires, cursors in crewlet_schedules -----------------

/** One fire: created once per (schedule, instant), so two nodes racing a fire lose to one write. */
export function fireKey(id: string, instant_ms: number): string {
  return `fire.${id}.${instant_ms}`;
}
export const CURSOR_PREFIX = "cursor.";
/** Where a schedule's evaluation has reached, and how its last fire went. */
export function cursorKey(id: string): string {
  return `${CURSOR_PREFIX}${id}`;
}

export const fireRecordSchema = z.object({
  state: z.enum(["claimed", "published"]),
  /** The scheduler incarnation that claimed it (`{node}:{random}`). */
  owner: z.string(),
  claimed_at: z.number(),
  published_at: z.number().nullable(),
  /** The fleet's config revision (activation pointer epoch) the fire was judged against. */
  revision: z.number().int().optional(),
});
export type FireRecord = z.infer<typeof fireRecordSchema>;

export const cursorSchema = z.object({
  /** Every instant at or before this one has been handled (fired, or coalesced into a catch-up). */
  instant: z.number(),
  /** True while the schedule is disabled: re-enabling starts from then, with no catch-up. */
  disabled: z.boolean().default(false),
  last_fire: z
    .object({
      instant: z.number(),
      fired_at: z.number(),
      outcome: z.enum(["fired", "publish_failed"]),
      /** Instants coalesced into this fire (catch-up), 0 for an on-time one. */
      missed: z.number().int().nonnegative(),
      detail: z.string().optional(),
    })
    .nullable()
    .default(null),
});
export type Cursor = z.infer<typeof cursorSchema>;

const enc = new TextEncoder();
const dec = new TextDecoder();
export function encodeJson(v: unknown): Uint8Array {
  return enc.encode(JSON.stringify(v));
}
export function decodeJson<T>(schema: z.ZodType<T>, bytes: Uint8Array): T | null {
  try {
    const parsed = schema.safeParse(JSON.parse(dec.decode(bytes)));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

// ---- the trigger ----------------------------------------------------------------------------

export function scheduleEventId(id: string, instant_ms: number): string {
  return `schedule:${id}:${instant_ms}`;
}

/** What a fire lands as in the seat's inbox; its event id is also the inbox message id. */
export function scheduleTrigger(s: Pick<ScheduleConfig, "id" | "seat" | "prompt">, instant_ms: number, missed: number): Trigger {
  const note = missed > 0 ? `\n\n(${missed} earlier run${missed === 1 ? "" : "s"} of this schedule fell due while no node ran the scheduler; this one run covers them.)` : "";
  return {
    type: "schedule",
    event_id: scheduleEventId(s.id, instant_ms),
    seat: s.seat,
    conversation: `schedule:${s.id}`,
    from: `schedule:${s.id}`,
    text: `Scheduled (${s.id}, due ${new Date(instant_ms).toISOString()}): ${s.prompt}${note}`,
    refs: {},
    created_at: instant_ms,
  };
}
