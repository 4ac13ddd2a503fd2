// The pure half of Idempotency-Key: which keys are usable, and what a key names.
import { expect, test } from "bun:test";
import { checkKey, fingerprint, MAX_KEY_CHARS, scopeOf } from "../../src/api/idempotency.ts";
import { opId } from "../../src/estate/records.ts";

test("checkKey: printable ASCII without spaces, 1..200 characters", () => {
  const cases: [string, boolean][] = [
    ["3f1c2a9e-0000-4000-8000-000000000000", true],
    ["a", true],
    ["k".repeat(MAX_KEY_CHARS), true],
    ["k".repeat(MAX_KEY_CHARS + 1), false],
    ["", false],
    ["has space", false],
    ["tab\there", false],
    ["naïve", false],
    ["!#$%&'*+-.^_`|~", true],
  ];
  for (const [key, ok] of cases) expect({ key, ok: checkKey(key) === null }).toEqual({ key, ok });
});

test("scopeOf: one key names one write per token and route; its op id is a valid record op id", () => {
  const a = scopeOf("ops", "POST", "/chat/channels/general/messages", "k1");
  expect(scopeOf("ops", "post", "/chat/channels/general/messages", "k1")).toEqual(a);
  // The router serves "/x/" as "/x": one write either way.
  expect(scopeOf("ops", "POST", "/chat/channels/general/messages/", "k1")).toEqual(a);
  expect(scopeOf("other", "POST", "/chat/channels/general/messages", "k1").op_id).not.toBe(a.op_id);
  expect(scopeOf("ops", "POST", "/chat/channels/eng/messages", "k1").op_id).not.toBe(a.op_id);
  expect(scopeOf("ops", "PUT", "/chat/channels/general/messages", "k1").op_id).not.toBe(a.op_id);
  expect(scopeOf("ops", "POST", "/chat/channels/general/messages", "k2").op_id).not.toBe(a.op_id);
  expect(opId.safeParse(a.op_id).success).toBe(true);
  expect(a.slot_key).toMatch(/^idem_[0-9a-f]{64}$/);
  expect(fingerprint("{}")).not.toBe(fingerprint("{ }"));
});
