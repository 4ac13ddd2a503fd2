// company.today: what the dashboard's Today view calls stuck (src/api/routes/turns.ts,
// GET /turns/stuck). The view itself reads everything else from the API.
import { z } from "zod";

/**
 * Work in progress that no turn has touched for this long is called out as stuck. Two
 * hours: a turn takes minutes, a failing one is given up within ~17 min (classify.ts
 * FAILED_DELIVERIES_MAX) and a coding run is ended at 30 min (sandbox DEFAULT_WALL_SECONDS),
 * so an item in progress quiet for two hours is waiting on something nobody is doing —
 * found the same morning, without flagging work that is merely slow.
 */
export const DEFAULT_STUCK_AFTER_MINUTES = 120;

export const todaySchema = z
  .strictObject({
    stuck_after_minutes: z
      .number()
      .int()
      .min(1)
      .max(7 * 24 * 60)
      .default(DEFAULT_STUCK_AFTER_MINUTES)
      .describe("Work in progress with no turn for this many minutes is shown as stuck on the Today view"),
  })
  .default({ stuck_after_minutes: DEFAULT_STUCK_AFTER_MINUTES });
export type TodaySettings = z.infer<typeof todaySchema>;
