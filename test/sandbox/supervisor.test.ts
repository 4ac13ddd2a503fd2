// The supervisor's pure part: a box's result cut to what a run record holds, and the run's
// own secrets (the seat's CLI key) taken out of everything the seat will post.
import { expect, test } from "bun:test";
import { redactor } from "../../src/agent/providers/redact.ts";
import { RECORD_DIFF_MAX_BYTES, RECORD_TAIL_MAX_BYTES, runResultSchema } from "../../src/sandbox/runs.ts";
import { boundResult } from "../../src/sandbox/supervisor.ts";

const KEY = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz";

test("a result quoting the seat's key is recorded without it", () => {
  const r = boundResult(
    { outcome: "failed", exit_code: 1, reason: `the engine exited with code 1: invalid x-api-key ${KEY}`, output_tail: `Error: key ${KEY} refused\n`, output_bytes: 40, diff: `+KEY=${KEY}\n`, commits: [`abc123 add ${KEY}`], summary: `key ${KEY} refused` },
    redactor([KEY]),
  );
  expect(JSON.stringify(r)).not.toContain(KEY);
  expect(JSON.stringify(r)).not.toContain(KEY.slice(0, 8));
  expect(r.summary).toBe("key [redacted] refused");
});

test("a result over a record's bounds is cut, saying so, and still decodes", () => {
  const r = boundResult({ outcome: "succeeded", exit_code: 0, reason: "", output_tail: "x".repeat(RECORD_TAIL_MAX_BYTES * 2), output_bytes: RECORD_TAIL_MAX_BYTES * 2, diff: "d".repeat(RECORD_DIFF_MAX_BYTES + 10), commits: Array.from({ length: 500 }, (_, i) => `c${i}`), summary: "ok" });
  expect(runResultSchema.safeParse(r).success).toBe(true);
  expect(r.diff.endsWith("(diff cut: it is longer than a run record keeps)")).toBe(true);
  expect(r.output_bytes).toBe(RECORD_TAIL_MAX_BYTES * 2);
  expect(r.commits).toHaveLength(200);
});
