// The wire between a router and a data node: one request/reply subject per data node,
// `crewlet.estate.rpc.{node_id}`, so the asker chooses the order it asks in. Both sides
// parse what they receive with these schemas.
import { z } from "zod";
import { querySchema } from "./queries.ts";

export function rpcSubject(nodeId: string): string {
  if (!/^[A-Za-z0-9_\-]+$/.test(nodeId)) throw new Error(`invalid node id ${JSON.stringify(nodeId)} for an estate subject`);
  return `crewlet.estate.rpc.${nodeId}`;
}

/** The caller's last write per domain: whoever answers must have applied it. */
export const floorSchema = z.strictObject({
  tracker: z.number().int().min(0),
  pages: z.number().int().min(0),
  chat: z.number().int().min(0),
});
export type Floor = z.output<typeof floorSchema>;
export const zeroFloor = (): Floor => ({ tracker: 0, pages: 0, chat: 0 });

export const rpcRequestSchema = z.discriminatedUnion("kind", [
  z.strictObject({ kind: z.literal("read"), query: querySchema, floor: floorSchema }),
  // The record is decoded by the executor with the same decoder its applier uses.
  z.strictObject({ kind: z.literal("write"), record: z.unknown(), floor: floorSchema }),
]);
export type RpcRequest = z.input<typeof rpcRequestSchema>;

const outcomeSchema = z.union([
  z.looseObject({ ok: z.literal(true) }),
  z.strictObject({ ok: z.literal(false), code: z.string(), message: z.string(), field: z.string().optional() }),
]);

export const answerSchema = z.discriminatedUnion("status", [
  z.strictObject({ status: z.literal("ok"), result: z.unknown() }),
  z.strictObject({ status: z.literal("out_of_service"), reason: z.string() }),
  z.strictObject({ status: z.literal("behind"), applied: z.number().int(), floor: z.number().int() }),
  z.strictObject({ status: z.literal("applied"), position: z.number().int(), outcome: outcomeSchema }),
  z.strictObject({ status: z.literal("pending"), position: z.number().int() }),
  z.strictObject({ status: z.literal("unknown"), error: z.string() }),
  z.strictObject({
    status: z.literal("invalid"),
    message: z.string(),
    /** The field at fault, when one is; `too_large` when the record is over the log's message size. */
    field: z.string().optional(),
    code: z.enum(["invalid_record", "too_large"]).optional(),
  }),
]);
export type Answer = z.output<typeof answerSchema>;
export type ReadAnswer = Extract<Answer, { status: "ok" | "out_of_service" | "behind" | "invalid" }>;
export type WriteAnswer = Extract<Answer, { status: "applied" | "pending" | "unknown" | "out_of_service" | "invalid" }>;

export const encodeJson = (v: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(v));
export function decodeJson(data: Uint8Array): unknown {
  return JSON.parse(new TextDecoder().decode(data));
}

