// company.today: what the dashboard's Today view calls stuck (src/api/routes/turns.ts,
// GET /turns/stuck). The view itself reads everything else from the API.
import { z } from "zod";

/** In-progress work no turn touched for this long is stuck: a failing turn is given up within
 * ~17 min and a coding run ends at 30, so two quiet hours means nobody is on it, without
 * flagging work that is merely slow. */
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
