// The narrow estate interface the agent's tools and the turn's context reads need. It is
// the estate router's own read/write surface with the estate's own types, so the real
// EstateRouter (src/estate/router.ts) satisfies it as it stands: no adapter, and every
// tool call goes through the one router (ARCHITECTURE.md § Contracts: "Estate router").
import type { QueryName, QueryOf, Results } from "../../estate/queries.ts";
import type { BodyOf } from "../../estate/records.ts";
import type { WriteOutcome } from "../../estate/router.ts";
import type { Domain } from "../../estate/schema.ts";
import type { PublishOptions, PublishResult } from "../../queue/contract.ts";

export type { WriteOutcome };

export interface EstatePort {
  /** opts.atLeast: positions this read's answerer must have applied (a trigger's cause). */
  read<K extends QueryName>(input: QueryOf<K>, opts?: { atLeast?: { chat?: number; tracker?: number } }): Promise<Results[K]>;
  /** opts.op_id: a write derived from its cause, so a retry or a re-run is the same write. */
  write<D extends Domain>(domain: D, body: BodyOf<D>, opts?: { op_id?: string }): Promise<WriteOutcome>;
}

/** What ask_colleague and the a2a answer need of the queue (Queue satisfies it). */
export interface PublishPort {
  publish(subject: string, data: Uint8Array, opts?: PublishOptions): Promise<PublishResult>;
}
