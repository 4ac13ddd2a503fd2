// crewlet turns: the table a person scans (a receipt a line, its cost or "unpriced", its
// words or why it failed, the cursor when there is more), and usage named before any token.
import { expect, test } from "bun:test";
import { resolve } from "node:path";
import { formatTurns } from "../../src/cli/turns.ts";

const MAIN = resolve(import.meta.dir, "../../src/main.ts");

test("a line per turn: when, who, outcome, trigger, tokens, cost, words or why", () => {
  const base = { seat: "cto", duration_ms: 1200, trigger: { type: "chat_mention", from: "founder" }, tools: [], input_tokens: 120, output_tokens: 45 };
  const out = formatTurns(
    [
      { ...base, ended_at: Date.UTC(2026, 11, 6, 9), summary: "Planned it.\nMore lines", cost_micros: 25_000, outcome: "completed", error: null },
      { ...base, seat: "pm", ended_at: Date.UTC(2026, 11, 6, 8), summary: "", cost_micros: null, outcome: "failed", error: "my model endpoint refused the API key (401)" },
    ],
    41,
  ).split("\n");
  expect(out[0]).toMatch(/^ENDED\s+SEAT\s+OUTCOME\s+TRIGGER\s+TOKENS\s+COST\s+WORDS$/);
  expect(out[1]).toMatch(/^2026-12-06T09:00:00.000Z\s+@cto\s+completed\s+chat_mention from founder\s+120\/45\s+0\.0250\s+Planned it\.$/);
  expect(out[2]).toMatch(/@pm\s+failed .*unpriced\s+my model endpoint refused the API key \(401\)$/);
  expect(out[3]).toBe("(more: --cursor 41)");
  expect(formatTurns([], null)).toBe("no turns");
});

test.each([
  [["turns", "frob"], /unknown turns command "frob"/],
  [["turns", "--bogus"], /bogus/],
  [["turns", "list", "x"], /unexpected argument "x"/],
])("crewlet %p is a usage error (exit 2) naming it, whatever the token", (args, message) => {
  const r = Bun.spawnSync([process.execPath, MAIN, ...args], { stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH ?? "" }, cwd: "/" });
  expect(r.exitCode).toBe(2);
  expect(r.stderr.toString()).toMatch(message);
});
