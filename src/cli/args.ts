// CLI arguments are input from outside like any other: parsed with zod, refused with the
// flag named.
import { parseArgs } from "node:util";

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

export type FlagSpec = Record<string, { type: "string" | "boolean"; short?: string }>;

export function parseFlags<F extends FlagSpec>(args: string[], flags: F, maxPositionals: number) {
  let parsed;
  try {
    parsed = parseArgs({ args, options: flags, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (parsed.positionals.length > maxPositionals) {
    throw new UsageError(`unexpected argument "${parsed.positionals[maxPositionals]}"`);
  }
  return parsed;
}
