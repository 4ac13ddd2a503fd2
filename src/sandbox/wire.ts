// Bytes off the wire or out of the store, judged by their one schema: the first problem
// named by its field, never a throw.
import type { z } from "zod";

export type Decoded<T> = { ok: true; value: T } | { ok: false; error: string };

export function decodeWith<S extends z.ZodType>(schema: S, data: Uint8Array, what: string): Decoded<z.output<S>> {
  let raw: unknown;
  try {
    raw = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(data));
  } catch (err) {
    return { ok: false, error: `not JSON: ${(err as Error).message}` };
  }
  const parsed = schema.safeParse(raw);
  if (parsed.success) return { ok: true, value: parsed.data };
  const issue = parsed.error.issues[0];
  return { ok: false, error: `${issue?.path.join(".") || what}: ${issue?.message ?? "invalid"}` };
}

export function encodeWith<S extends z.ZodType>(schema: S, value: z.input<S>): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(schema.parse(value)));
}
