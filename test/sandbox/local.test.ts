// The sandbox conformance suite on the local box: real bubblewrap, real git, real processes,
// the engine being test/support/fake-coding-cli.sh. Plus what only a real box can show:
// isolation (network, environment, filesystem), the kernel-held limits, a tree left behind,
// a missing bwrap, and cloning.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LocalBoxProvider } from "../../src/sandbox/local.ts";
import { sandboxConformance, type SandboxHarness } from "../conformance/sandbox.ts";
import { runProcesses } from "./procs.ts";

export const FAKE_CLI = join(import.meta.dir, "..", "support", "fake-coding-cli.sh");

export function localHarness(provider = new LocalBoxProvider()): SandboxHarness {
  const root = mkdtempSync(join(tmpdir(), "crewlet-box-"));
  let n = 0;
  return {
    provider,
    engine: (steps) => ({ command: ["/bin/sh", FAKE_CLI, "--print", "{task}"], task: steps.join(";") }),
    dir: () => join(root, `box-${++n}`),
    pass: (ms) => Bun.sleep(ms),
    processes: runProcesses,
    teardown: async () => rmSync(root, { recursive: true, force: true }),
  };
}

sandboxConformance("local box (bubblewrap)", async () => localHarness());
