// A data node answering routers over `crewlet.estate.rpc.{node_id}`: reads from its copy,
// writes appended and applied here. A copy out of service answers `out_of_service` rather
// than staying silent, so the asker moves on at once instead of waiting out its budget.
import type { Msg, NatsConnection, Subscription } from "nats";
import type { Logger } from "../log.ts";
import type { EstateCopy } from "./copy.ts";
import { decodeJson, encodeJson, rpcRequestSchema, rpcSubject, type Answer } from "./rpc.ts";

/**
 * Requests answered at once. Writes spend most of their time waiting on the log, so
 * several overlap usefully; past this, requests wait in the subscription's buffer (itself
 * bounded by the client's pending limits) rather than in unbounded promises.
 */
const MAX_IN_FLIGHT = 64;
/** Pending limit on the subscription: past it the client drops requests and the asker times out. */
const MAX_PENDING_MSGS = 10_000;

export class EstateServer {
  private sub: Subscription | null = null;
  private done: Promise<void> | null = null;

  constructor(
    private readonly nc: NatsConnection,
    private readonly nodeId: string,
    private readonly copy: EstateCopy,
    private readonly log: Logger,
  ) {}

  start(): void {
    const sub = this.nc.subscribe(rpcSubject(this.nodeId), { max: undefined, timeout: undefined, queue: undefined });
    // The client's own default is a 65k-message buffer; ours is smaller and said here.
    (sub as unknown as { setPendingLimits?: (msgs: number, bytes: number) => void }).setPendingLimits?.(MAX_PENDING_MSGS, -1);
    this.sub = sub;
    this.done = this.loop(sub);
  }

  async stop(): Promise<void> {
    this.sub?.unsubscribe();
    await this.done;
  }

  private async loop(sub: Subscription): Promise<void> {
    const inFlight = new Set<Promise<void>>();
    for await (const msg of sub) {
      const p = this.answer(msg).finally(() => inFlight.delete(p));
      inFlight.add(p);
      if (inFlight.size >= MAX_IN_FLIGHT) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
  }

  private async answer(msg: Msg): Promise<void> {
    let answer: Answer;
    let kind: "read" | "write" | null = null;
    try {
      const parsed = rpcRequestSchema.safeParse(decodeJson(msg.data));
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        answer = { status: "invalid", message: `${issue?.path.join(".") || "request"}: ${issue?.message ?? "invalid"}` };
      } else {
        const req = parsed.data;
        kind = req.kind;
        answer = req.kind === "read" ? await this.copy.read(req.query, req.floor) : await this.copy.write(req.record);
      }
    } catch (err) {
      this.log.error("estate_rpc_failed", { error: err });
      const error = (err as Error).message;
      // A failure here is this node's, not the asker's: a read moves on to the next node; a
      // write may have reached the log, so it is unknown and retried only under its op id.
      if (kind === null) answer = { status: "invalid", message: `request is not JSON: ${error}` };
      else if (kind === "read") answer = { status: "out_of_service", reason: `could not answer here: ${error}` };
      else answer = { status: "unknown", error };
    }
    if (msg.reply) msg.respond(encodeJson(answer));
  }
}
