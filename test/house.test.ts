// The house stays one a person can live in (issue 30): no import circles, no arrow running
// back up the layers, every folder in a layer — scripts/import-graph.ts judges, and a new
// folder or a careless import fails here rather than in the next review.
import { expect, test } from "bun:test";
import { resolve } from "node:path";

test("the import graph has no circles, no back-up arrows and no folder without a layer", () => {
  const r = Bun.spawnSync([process.execPath, resolve(import.meta.dir, "../scripts/import-graph.ts")], { stdout: "pipe", stderr: "pipe" });
  const out = r.stdout.toString();
  expect(out).toContain("circles: 0");
  expect(out).toContain("back-up arrows: 0");
  expect(out).not.toContain("folders with no layer");
  expect(r.exitCode).toBe(0);
});
