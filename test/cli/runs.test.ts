// crewlet runs: the table a person scans, and usage named before any token is looked for.
import { expect, test } from "bun:test";
import { resolve } from "node:path";
import { formatRuns } from "../../src/cli/runs.ts";

const MAIN = resolve(import.meta.dir, "../../src/main.ts");

test("a parked run shows its question, a failed one its reason", () => {
  const base = { seat: "engineer", engine: "claude", node: "a", created_at: Date.UTC(2026, 11, 6) };
  const out = formatRuns([
    { ...base, id: "r1", state: "parked", question: { text: "Which branch?\nmore" }, result: null },
    { ...base, id: "r2", state: "done", question: null, result: { outcome: "limit", reason: "wall time limit of 60 s reached" } },
  ]).split("\n");
  expect(out[0]).toMatch(/^RUN\s+SEAT\s+ENGINE\s+STATE/);
  expect(out[1]).toMatch(/r1\s+@engineer\s+claude\s+parked .*asks: Which branch\?$/);
  expect(out[2]).toMatch(/r2 .*limit .*wall time limit of 60 s reached$/);
  expect(formatRuns([])).toBe("no runs");
});

test.each([
  [["runs", "frob"], /unknown runs command "frob"/],
  [["runs", "show"], /usage: crewlet runs list/],
  [["runs", "cancel"], /usage: crewlet runs list/],
])("crewlet %p is a usage error (exit 2) naming it, whatever the token", (args, message) => {
  const r = Bun.spawnSync([process.execPath, MAIN, ...args], { stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH ?? "" }, cwd: "/" });
  expect(r.exitCode).toBe(2);
  expect(r.stderr.toString()).toMatch(message);
});
