// Every bench reads its command line through bench/args.ts: a bad flag or value is refused
// with the bench's name, the field and the usage (exit 2) before any server starts.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { z } from "zod";
import { benchArgs, countFlag, numberListFlag } from "../../bench/args.ts";

const schema = z.object({
  seats: countFlag(10, 100),
  join: numberListFlag("0,0", z.number().nonnegative()),
  quick: z.boolean().default(false),
});

describe("benchArgs", () => {
  test("defaults, both flag spellings, switches and lists", () => {
    expect(benchArgs("t", "", schema, ["quick"], [])).toEqual({ seats: 10, join: [0, 0], quick: false });
    expect(benchArgs("t", "", schema, ["quick"], ["--seats=7", "--join", "1,2,3", "--quick"])).toEqual({
      seats: 7,
      join: [1, 2, 3],
      quick: true,
    });
  });

  const refused: [string, string[], string][] = [
    ["an unknown flag", ["--seat", "3"], "--seat"],
    ["a non-number", ["--seats", "many"], "--seats:"],
    ["a value out of bounds", ["--seats", "101"], "--seats:"],
    ["a bad list item", ["--join", "1,x"], "--join"],
    ["a positional argument", ["300"], "300"],
  ];
  // A real bench process (`bun -e` would take the flags as its own).
  const script = join(import.meta.dir, "args-fixture.ts");
  for (const [what, argv, says] of refused) {
    test(`refuses ${what}: exit 2, the field and the usage`, () => {
      const child = Bun.spawnSync({ cmd: [process.execPath, script, ...argv], cwd: import.meta.dir, stderr: "pipe", stdout: "pipe" });
      expect(child.exitCode).toBe(2);
      expect(child.stdout.toString()).not.toContain("ran");
      const err = child.stderr.toString();
      expect(err).toContain("bench/t:");
      expect(err).toContain(says);
      expect(err).toContain("usage: bun bench/t.ts [--seats 10]");
    });
  }
});
