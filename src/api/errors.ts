// One shape for every API error: {error: {code, message, field?}}. Bad input is a 4xx that
// names the field; nothing a client sends may become a 500.
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { z } from "zod";
import { formatPath } from "../config/load.ts";

export interface ApiErrorBody {
  error: { code: string; message: string; field?: string };
}

export class ApiError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: string,
    message: string,
    readonly field?: string,
  ) {
    super(message);
    this.name = "ApiError";
  }
  body(): ApiErrorBody {
    return { error: { code: this.code, message: this.message, ...(this.field !== undefined ? { field: this.field } : {}) } };
  }
}

export function fromZod(err: z.ZodError, where: "body" | "query" | "params"): ApiError {
  const first = err.issues[0];
  const field = first ? formatPath(first.path) : "";
  const message = first
    ? first.code === "unrecognized_keys"
      ? `unknown field${first.keys.length > 1 ? "s" : ""} ${first.keys.join(", ")}`
      : first.message
    : "invalid input";
  return new ApiError(400, "invalid_input", `${where}${field ? "." + field : ""}: ${message}`, field || undefined);
}

/** Largest JSON body any route accepts; a chat message is ≤ 32 KiB, a page is larger. */
export const MAX_BODY_BYTES = 1024 * 1024;

/** Reads and validates a JSON body; throws ApiError (400/413/415) naming what is wrong. */
export async function parseJsonBody<S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>> {
  const type = c.req.header("content-type") ?? "";
  if (!type.toLowerCase().startsWith("application/json")) {
    throw new ApiError(415, "unsupported_media_type", "send the body as application/json");
  }
  const text = await c.req.text();
  if (Buffer.byteLength(text) > MAX_BODY_BYTES) throw new ApiError(413, "too_large", `body is over ${MAX_BODY_BYTES} bytes`);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new ApiError(400, "invalid_json", "body is not valid JSON");
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw fromZod(parsed.error, "body");
  return parsed.data;
}

export function parseQuery<S extends z.ZodType>(c: Context, schema: S): z.output<S> {
  const parsed = schema.safeParse(c.req.query());
  if (!parsed.success) throw fromZod(parsed.error, "query");
  return parsed.data;
}
