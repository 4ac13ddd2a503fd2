// crewlet approvals: the table a person scans, and usage named before any token is looked for.
import { expect, test } from "bun:test";
import { resolve } from "node:path";
import { formatApprovals } from "../../src/cli/approvals.ts";

const MAIN = resolve(import.meta.dir, "../../src/main.ts");

test("a pending request shows its rule and expiry, a decided one who decided and why", () => {
  const base = { seat: "engineer", tool: "deploy", rule: "deploys", requested_at: Date.UTC(2026, 11, 6), expires_at: Date.UTC(2026, 11, 9) };
  const out = formatApprovals([
    { ...base, id: "ap-1", state: "pending", decided_by: null, reason: null },
    { ...base, id: "ap-2", state: "rejected", decided_by: "token:ana", reason: "not on a Friday\nmore" },
  ]).split("\n");
  expect(out[0]).toMatch(/^REQUEST\s+SEAT\s+TOOL\s+STATE/);
  expect(out[1]).toMatch(/ap-1\s+@engineer\s+deploy\s+pending .*rule "deploys", expires 2026-12-09/);
  expect(out[2]).toMatch(/ap-2 .*rejected .*token:ana: not on a Friday$/);
  expect(formatApprovals([])).toBe("no approval requests");
});

test.each([
  [["approvals", "frob"], /unknown approvals command "frob"/],
  [["approvals", "approve"], /usage: crewlet approvals list/],
  [["approvals", "reject", "ap-0123456789abcdef0123"], /a rejection says why/],
  [["approvals", "list", "x"], /usage: crewlet approvals list/],
])("crewlet %p is a usage error (exit 2) naming it, whatever the token", (args, message) => {
  const r = Bun.spawnSync([process.execPath, MAIN, ...args], { stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH ?? "" }, cwd: "/" });
  expect(r.exitCode).toBe(2);
  expect(r.stderr.toString()).toMatch(message);
});
