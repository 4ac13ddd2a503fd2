// company.schedules: a seat woken on a cron (spec: Singleton duties, `scheduler`). Each
// entry is checked at load — croner parses the expression, the time zone must be one the
// runtime knows — so a bad schedule is refused naming its field, never found by the
// scheduler at 3 a.m. The seat reference is checked with the other cross-references
// (company.ts), because it needs the roles.
import { Cron } from "croner";
import { z } from "zod";

/** A schedule's id is part of its fire keys and event ids: a KV token and an event-id token. */
export const SCHEDULE_ID_RE = /^[a-z0-9][a-z0-9_\-]{0,63}$/;
/**
 * Five fields (minute precision) or six (a leading seconds field). No year field: a
 * schedule that can only ever fire in one year is a date, not a schedule.
 */
export const CRON_MODE = "5-or-6-parts" as const;
/** A prompt becomes a trigger's text, which is capped at 32 KiB (org/trigger.ts); 30 KiB
 * leaves room for the line naming the schedule and its instant. */
const MAX_PROMPT_BYTES = 30 * 1024;

/** The croner job for an expression in a zone; paused, so it never runs anything itself. */
export function cronOf(expression: string, timezone: string): Cron {
  return new Cron(expression, { paused: true, timezone, mode: CRON_MODE });
}

export function validTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

export const scheduleSchema = z
  .strictObject({
    id: z.string().regex(SCHEDULE_ID_RE, "schedule ids are lower-case letters, digits, _ and -, at most 64 chars"),
    cron: z.string().min(1).describe("Cron expression: 5 fields, or 6 with a leading seconds field"),
    timezone: z.string().min(1).optional().describe("IANA time zone; defaults to company.timezone"),
    seat: z.string().min(1).describe("The agent seat whose inbox the schedule wakes"),
    prompt: z
      .string()
      .min(1)
      .refine((s) => Buffer.byteLength(s, "utf8") <= MAX_PROMPT_BYTES, `is over ${MAX_PROMPT_BYTES} bytes`),
    enabled: z.boolean().default(true),
  })
  .superRefine((s, ctx) => {
    if (s.timezone !== undefined && !validTimeZone(s.timezone)) {
      ctx.addIssue({ code: "custom", path: ["timezone"], message: `unknown time zone "${s.timezone}" (want an IANA name such as Europe/Paris)` });
      return;
    }
    try {
      const job = cronOf(s.cron, s.timezone ?? "UTC");
      if (job.nextRun() === null) ctx.addIssue({ code: "custom", path: ["cron"], message: `"${s.cron}" never fires` });
    } catch (err) {
      ctx.addIssue({ code: "custom", path: ["cron"], message: `invalid cron expression "${s.cron}": ${(err as Error).message}` });
    }
  });

export type ScheduleConfig = z.output<typeof scheduleSchema>;
