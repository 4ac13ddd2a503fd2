// What a run's supervisor tells the seat, on the seat's control subject
// (crewlet.seats.{shard}.{handle}.control; spec: "Sandbox control is owner-routed"): a question
// the run is parked on, and its result. Whichever node holds the seat then is attached to
// that subject and handles it, so routing is who subscribes. ONE schema, decoded on both ends.
import { z } from "zod";
import { decodeWith, encodeWith, type Decoded } from "./wire.ts";
import { QA_MAX_BYTES, runIdSchema, runResultSchema } from "./runs.ts";

const seat = z.string().regex(/^[a-z0-9][a-z0-9_\-]{0,47}$/);

export const controlEventSchema = z.discriminatedUnion("kind", [
  z.strictObject({
    kind: z.literal("question"),
    run_id: runIdSchema,
    seat,
    seq: z.number().int().min(1),
    text: z.string().refine((s) => Buffer.byteLength(s, "utf8") <= QA_MAX_BYTES, `is over ${QA_MAX_BYTES} bytes`),
  }),
  z.strictObject({ kind: z.literal("finished"), run_id: runIdSchema, seat, result: runResultSchema }),
]);
export type ControlEvent = z.output<typeof controlEventSchema>;

/** The broker's de-duplication id: one per question and one per result, so the
 * supervisor's retries of one publish are one message. */
export function controlMsgId(e: Pick<ControlEvent, "run_id" | "kind"> & { seq?: number }): string {
  return e.kind === "question" ? `run-${e.run_id}-q${e.seq}` : `run-${e.run_id}-done`;
}

export function encodeControl(e: ControlEvent): Uint8Array {
  return encodeWith(controlEventSchema, e);
}

export function decodeControl(data: Uint8Array): Decoded<ControlEvent> {
  return decodeWith(controlEventSchema, data, "event");
}
