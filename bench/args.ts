// A bench's command line: node's parseArgs splits it (`--name value` and `--name=value`, an
// unknown flag refused), the bench's zod schema judges it. One parser for every bench, so a
// typo is a usage line and exit 2 instead of a NaN figure printed as if it were measured.
import { parseArgs } from "node:util";
import { z } from "zod";

/** The parsed arguments, or (on a bad one) `bench/NAME: --field: why` and the usage, exit 2.
 * Each key of the schema is a flag; those listed in `switches` take no value (booleans), the
 * rest take one string the schema coerces. */
export function benchArgs<S extends z.ZodObject>(
  name: string,
  usage: string,
  schema: S,
  switches: readonly (keyof z.infer<S> & string)[] = [],
  argv: string[] = process.argv.slice(2),
): z.infer<S> {
  const options = Object.fromEntries(
    Object.keys(schema.shape).map((k) => [k, { type: switches.includes(k as never) ? "boolean" : "string" } as const]),
  );
  let raw: Record<string, unknown>;
  try {
    raw = parseArgs({ args: argv, options, strict: true, allowPositionals: false }).values;
  } catch (err) {
    return refuse(name, usage, (err as Error).message);
  }
  const parsed = schema.strict().safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return refuse(name, usage, `--${issue.path.join(".") || "?"}: ${issue.message}`);
  }
  return parsed.data as z.infer<S>;
}

/** A whole-number flag from `min` to `max`. */
export const wholeFlag = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

/** A count: a whole number from 1 to `max`, `fallback` when the flag is not given. */
export const countFlag = (fallback: number, max: number) => wholeFlag(1, max).default(fallback);

/** A comma-separated list of numbers, each judged by `item`; `fallback` when the flag is not given. */
export const numberListFlag = (fallback: string, item: z.ZodNumber) =>
  z.string().default(fallback).transform((s) => s.split(",").map(Number)).pipe(z.array(item).min(1));

/** --members: one nats-server or a three-member cluster (coerced first: a literal union does not coerce). */
export const membersFlag = z.coerce.number().pipe(z.union([z.literal(1), z.literal(3)], { error: "1 or 3 members" }));

function refuse(name: string, usage: string, why: string): never {
  console.error(`bench/${name}: ${why}\nusage: bun bench/${name}.ts ${usage}`);
  process.exit(2);
}
