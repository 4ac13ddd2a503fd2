// What reading a delivery's payload can come to, for every provider. Pure types and the
// one helper that turns a zod failure into the field it names.
import type { z } from "zod";
import type { NormalizedEvent } from "./event.ts";

export type Parsed =
  /** An event the routes are asked about. */
  | { status: "event"; event: NormalizedEvent }
  /** Slack's url_verification handshake: answer with the challenge, nothing else. */
  | { status: "challenge"; challenge: string }
  /** An event of a type we read, missing a field we use: 202 + integration_payload_unusable. */
  | { status: "unusable"; event: string; field: string; message: string }
  /** Something we do not act on (a type we do not route, a bot's own message, a ping). */
  | { status: "ignored"; event: string; reason: string };

/** The first issue's path as `a.b[0].c`, the way config errors name fields. */
export function zodField(err: z.ZodError): { field: string; message: string } {
  const issue = err.issues[0];
  let field = "";
  for (const p of issue?.path ?? []) field += typeof p === "number" ? `[${p}]` : field ? `.${String(p)}` : String(p);
  return { field: field || "(payload)", message: issue?.message ?? "invalid" };
}

/** JSON.parse that answers null instead of throwing. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
