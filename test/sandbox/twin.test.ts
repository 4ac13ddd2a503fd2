// The sandbox conformance suite on the in-process twin, its time on a FakeClock (a 60 s wall
// limit passes in milliseconds). Plus what only the twin shows: its limits on the clock.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { TwinBoxProvider } from "../../src/sandbox/twin.ts";
import { ROOMY_LIMITS, sandboxConformance, settle, spec, type SandboxHarness } from "../conformance/sandbox.ts";

function twinHarness(): SandboxHarness {
  const clock = new FakeClock();
  let n = 0;
  return {
    provider: new TwinBoxProvider({ clock }),
    engine: (steps) => ({ command: ["twin", "{task}"], task: steps.join(";") }),
    dir: () => `/nonexistent/twin-box-${++n}`,
    pass: (ms) => clock.advance(ms),
    processes: () => 0,
    teardown: async () => undefined,
  };
}

sandboxConformance("in-process twin (FakeClock)", async () => twinHarness());

describe("twin box: its own limits and steps", () => {
  test("spin ends at the CPU limit, naming cpu_seconds", async () => {
    const h = twinHarness();
    const box = await h.provider.open(spec(h, ["spin"], { limits: { ...ROOMY_LIMITS, cpu_seconds: 5 } }), h.dir());
    const r = await settle(h, box);
    expect(r.outcome).toBe("limit");
    expect(r.reason).toContain("providers.sandbox.limits.cpu_seconds");
  });

  test("files past disk_mb end the run, naming disk_mb", async () => {
    const h = twinHarness();
    const box = await h.provider.open(spec(h, ["fill:2", "fill:2", "sleep:30"], { limits: { ...ROOMY_LIMITS, disk_mb: 3 } }), h.dir());
    const r = await settle(h, box);
    expect(r.outcome).toBe("limit");
    expect(r.reason).toContain("providers.sandbox.limits.disk_mb");
  });

  test("env shows the seat's env and nothing else; a non-twin command is refused at open", async () => {
    const h = twinHarness();
    const box = await h.provider.open(spec(h, ["env:CLI_KEY", "env:HOSTNAME"], { env: { CLI_KEY: "k-1" } }), h.dir());
    const r = await settle(h, box);
    expect(r.output_tail).toBe("CLI_KEY=k-1\nHOSTNAME is unset\n");
    await expect(h.provider.open({ ...spec(h, []), command: ["claude", "-p", "{task}"] }, h.dir())).rejects.toThrow(/twin/);
  });

  test("an unknown step fails the run with exit 2", async () => {
    const h = twinHarness();
    const box = await h.provider.open(spec(h, ["print:ok", "frobnicate"]), h.dir());
    const r = await settle(h, box);
    expect(r.outcome).toBe("failed");
    expect(r.exit_code).toBe(2);
    expect(r.reason).toContain("unknown step: frobnicate");
  });
});
