// `crewlet schedules` prints what GET /schedules answers: next fire, last fire and outcome.
import { describe, expect, test } from "bun:test";
import { formatSchedules } from "../../src/cli/schedules.ts";

describe("crewlet schedules", () => {
  test("one line per schedule: disabled, caught up, never fired, unreadable", () => {
    const out = formatSchedules([
      { id: "standup", seat: "ops", cron: "0 9 * * 1-5", timezone: "Europe/Paris", enabled: true, next_fire: "2026-01-06T08:00:00.000Z", last_fire: { instant_iso: "2026-01-05T08:00:00.000Z", outcome: "fired", missed: 2 } },
      { id: "off", seat: "ops", cron: "* * * * *", timezone: "UTC", enabled: false, next_fire: null, last_fire: null },
      { id: "broken", seat: "ops", cron: "* * * * *", timezone: "UTC", enabled: true, next_fire: "2026-01-05T08:01:00.000Z", last_fire: null, error: "store unreachable" },
    ]);
    const lines = out.split("\n");
    expect(lines[0]).toMatch(/^ID\s+SEAT\s+CRON\s+ZONE\s+NEXT FIRE\s+LAST FIRE$/);
    expect(lines[1]).toContain("@ops");
    expect(lines[1]).toContain("2026-01-05T08:00:00.000Z fired (caught up 2)");
    expect(lines[2]).toContain("disabled");
    expect(lines[3]).toContain("unreadable: store unreachable");
    expect(formatSchedules([])).toContain("no schedules");
  });
});
