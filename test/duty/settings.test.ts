// The test-only shortenings (Tier A `testing`) are refused outside tests, naming the field,
// so no deployment can shorten the 24 h mailbox grace by accident.
import { describe, expect, test } from "bun:test";
import { ConfigError, parseConfig } from "../../src/config/load.ts";
import { TESTING_ENV } from "../../src/config/tier-a.ts";

const YAML = "testing:\n  mailbox_grace_seconds: 5\n  maintenance_tick_seconds: 2\n";

describe("testing settings", () => {
  test("refused without CREWLET_TESTING=1, naming the field", () => {
    let err: unknown = null;
    try {
      parseConfig(YAML, "crewlet.yaml", {});
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const problems = (err as ConfigError).problems;
    expect(problems.some((p) => p.path === "testing" && p.message.includes(TESTING_ENV))).toBe(true);
  });

  test("accepted under the test harness's variable; absent means the shipped numbers", () => {
    const { config } = parseConfig(YAML, "crewlet.yaml", { [TESTING_ENV]: "1" });
    expect(config.testing).toEqual({ mailbox_grace_seconds: 5, maintenance_tick_seconds: 2 });
    expect(parseConfig("{}", "crewlet.yaml", {}).config.testing).toBeUndefined();
  });

  test("an unknown testing key is refused like any other", () => {
    expect(() => parseConfig("testing:\n  grace: 5\n", "crewlet.yaml", { [TESTING_ENV]: "1" })).toThrow(ConfigError);
  });
});
