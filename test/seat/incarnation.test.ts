// Owner strings and the takeover rule: only an earlier incarnation on this store (whose
// lock this process holds) is a provably dead predecessor.
import { expect, test } from "bun:test";
import { lineageOf, mintOwner, predecessorsOf } from "../../src/seat/incarnation.ts";

test("an owner names its node and store; lineage is both", () => {
  const o = mintOwner("leaf-1", "00aa11bb22cc33dd");
  expect(o).toMatch(/^leaf-1:00aa11bb22cc33dd\.[0-9a-f]{8}$/);
  expect(lineageOf(o)).toBe("leaf-1:00aa11bb22cc33dd.");
  expect(lineageOf("leaf-1:deadbeef")).toBeNull();
});

test("predecessors: the same store only (and an older build's owners on a store it used)", () => {
  const me = "n1:s1.cafe";
  const table: [string, boolean, boolean][] = [
    ["n1:s1.beef", false, true],
    ["n1:s1.cafe", false, false],
    ["n1:s2.beef", false, false],
    ["n10:s1.beef", false, false],
    ["n1:deadbeef", false, false],
    ["n1:deadbeef", true, true],
    ["n1:s2.beef", true, false],
    ["n10:deadbeef", true, false],
  ];
  for (const [other, legacy, want] of table) expect([other, legacy, predecessorsOf(me, { legacy })(other)]).toEqual([other, legacy, want]);
});
