// Table tests on the pure parts of the coordination store: who may write a claiming record
// over what a key holds, and the key encodings both backends share.
import { describe, expect, test } from "bun:test";
import { decodeLeaseKey, decodeSlotKey, encodeLeaseKey, encodeSlotKey, filterMatches, leaseFilter } from "../../src/coord/bucket.ts";
import type { KvEntry } from "../../src/coord/contract.ts";
import { judgeClaim, nodeIdOf, type LeaseRecord } from "../../src/coord/record.ts";

const entry = (created: number, revision = 7): KvEntry => ({ key: "seat.a", value: new Uint8Array(), revision, created, operation: "put" });
const record = (owner: string, ttl_ms = 1000): LeaseRecord => ({
  owner,
  epoch: 3,
  state: "held",
  claim: "c",
  acquired_at: 0,
  ttl_ms,
  preferred: nodeIdOf(owner),
  protocol: 4,
  meta: {},
});

describe("judgeClaim", () => {
  const cases: [string, Parameters<typeof judgeClaim>, ReturnType<typeof judgeClaim>][] = [
    ["nothing there: create", [null, null, "n1:a", undefined], { take: "create" }],
    ["lapsed: update over it", [{ entry: entry(0), record: record("n2:b") }, 1000, "n1:a", undefined], { take: "update", revision: 7 }],
    ["live, another owner: refuse", [{ entry: entry(0), record: record("n2:b") }, 999, "n1:a", undefined], { take: "refuse", holder: "n2:b", epoch: 3 }],
    ["live, same owner: re-acquire", [{ entry: entry(0), record: record("n1:a") }, 5, "n1:a", undefined], { take: "update", revision: 7 }],
    ["live, own node's old incarnation, takeover", [{ entry: entry(0), record: record("n1:old") }, 5, "n1:new", "n1"], { take: "update", revision: 7 }],
    ["live, own node's old incarnation, no takeover", [{ entry: entry(0), record: record("n1:old") }, 5, "n1:new", undefined], { take: "refuse", holder: "n1:old", epoch: 3 }],
    ["live, other node, takeover names mine", [{ entry: entry(0), record: record("n10:x") }, 5, "n1:new", "n1"], { take: "refuse", holder: "n10:x", epoch: 3 }],
    ["unreadable record: refuse", [{ entry: entry(0), record: null }, 5000, "n1:a", undefined], { take: "refuse", holder: "unknown", epoch: 0 }],
  ];
  for (const [name, args, want] of cases) test(name, () => expect(judgeClaim(...args)).toEqual(want));
});

describe("key encodings", () => {
  test("lease keys: kind and name are one token each, round trip, prefix filters", () => {
    for (const key of ["seat:alice", "node:node-a", "worker:setup-provision-github", "seat:a.b c:ü"]) {
      const wire = encodeLeaseKey(key);
      expect(wire.split(".")).toHaveLength(2);
      expect(wire).toMatch(/^[-/=.\w]+$/);
      expect(decodeLeaseKey(wire)).toBe(key);
      expect(filterMatches(leaseFilter(key.slice(0, key.indexOf(":") + 1)), wire)).toBe(true);
    }
    expect(() => encodeLeaseKey("nokind")).toThrow(/kind:name/);
    expect(decodeLeaseKey("_clock")).toBeNull();
  });
  test("slot keys: dots stay token separators, anything else round trips, wildcards survive in filters", () => {
    for (const key of ["current", "node.a:1", "work/key=x y", "ü.ß"]) expect(decodeSlotKey(encodeSlotKey(key))).toBe(key);
    expect(encodeSlotKey("a.*.>", true)).toBe("a.*.>");
    expect(() => encodeSlotKey("a..b")).toThrow(/empty token/);
    expect(filterMatches("a.*", "a.b")).toBe(true);
    expect(filterMatches("a.*", "a.b.c")).toBe(false);
    expect(filterMatches("a.>", "a")).toBe(false);
  });
});
