// Table tests on the pure parts of the coordination store: who may write a claiming record
// over what a key holds, and the key encodings both backends share.
import { describe, expect, test } from "bun:test";
import { decodeLeaseKey, decodeSlotKey, encodeLeaseKey, encodeSlotKey, filterMatches, leaseFilter } from "../../src/coord/bucket.ts";
import type { KvEntry } from "../../src/coord/contract.ts";
import { isTenure, judgeClaim, judgeToken, nodeIdOf, type LeaseRecord } from "../../src/coord/record.ts";

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
    ["live, own node's old incarnation proved dead: takeover", [{ entry: entry(0), record: record("n1:s1.old") }, 5, "n1:s1.new", (o) => o.startsWith("n1:s1.")], { take: "update", revision: 7 }],
    ["live, own node's old incarnation, no takeover", [{ entry: entry(0), record: record("n1:s1.old") }, 5, "n1:s1.new", undefined], { take: "refuse", holder: "n1:s1.old", epoch: 3 }],
    ["live, own node id on another store (not proved dead): refuse", [{ entry: entry(0), record: record("n1:s2.x") }, 5, "n1:s1.new", (o) => o.startsWith("n1:s1.")], { take: "refuse", holder: "n1:s2.x", epoch: 3 }],
    ["live, other node, however loose the predicate: refuse", [{ entry: entry(0), record: record("n10:x") }, 5, "n1:new", () => true], { take: "refuse", holder: "n10:x", epoch: 3 }],
    ["unreadable record: refuse", [{ entry: entry(0), record: null }, 5000, "n1:a", undefined], { take: "refuse", holder: "unknown", epoch: 0 }],
  ];
  for (const [name, args, want] of cases) test(name, () => expect(judgeClaim(...args)).toEqual(want));
});

describe("judgeToken: what the record read back after a token write says about the claim", () => {
  const claiming = (claim: string): LeaseRecord => ({ ...record("n1:a"), epoch: 0, state: "claiming", claim, acquired_at: null });
  const held = (claim: string, epoch: number): LeaseRecord => ({ ...record("n1:a"), epoch, claim });
  const cases: [string, Parameters<typeof judgeToken>, ReturnType<typeof judgeToken>][] = [
    ["nothing there (given back, or aged out)", [null, "c1", 5, 7], { token: "gone" }],
    ["unreadable record", [{ entry: entry(0), record: null }, "c1", 5, 7], { token: "gone" }],
    ["our token landed, whatever the answer said", [{ entry: entry(0, 8), record: held("c1", 5) }, "c1", 5, 7], { token: "committed" }],
    ["our claiming record still at its revision", [{ entry: entry(0, 7), record: claiming("c1") }, "c1", 5, 7], { token: "pending" }],
    ["our claiming record at another revision", [{ entry: entry(0, 9), record: claiming("c1") }, "c1", 5, 7], { token: "gone" }],
    ["another claim of the same owner", [{ entry: entry(0, 8), record: held("c2", 6) }, "c1", 5, 7], { token: "gone" }],
    ["a rival's claiming record", [{ entry: entry(0, 8), record: { ...claiming("c2"), owner: "n2:b" } }, "c1", 5, 7], { token: "gone" }],
  ];
  for (const [name, args, want] of cases) test(name, () => expect(judgeToken(...args)).toEqual(want));
});

describe("isTenure", () => {
  test("owner and epoch of a held record, nothing less", () => {
    expect(isTenure(record("n1:a"), "n1:a", 3)).toBe(true);
    expect(isTenure(record("n1:a"), "n1:a", 4)).toBe(false);
    expect(isTenure(record("n1:a"), "n1:b", 3)).toBe(false);
    expect(isTenure({ ...record("n1:a"), state: "claiming" }, "n1:a", 3)).toBe(false);
    expect(isTenure(null, "n1:a", 3)).toBe(false);
  });
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
