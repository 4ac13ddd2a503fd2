// The seat inbox handler: what the seat host calls with each drain (or each delivery) of
// a seat it holds. Screening first — config posture shed/stuck, the fence —
// then one turn per conversation with its constituent event ids, at most max_concurrent
// turns on this node at once. A delivery the handler cannot parse is acked and logged:
// redelivering it could only fail the same way 25 times.
import type { Logger } from "../log.ts";
import { decodeTrigger, type Trigger } from "../org/trigger.ts";
import { ack, defer, nak, reject, type Delivery, type Outcome } from "../queue/contract.ts";
import { partitionByConversation } from "./partition.ts";
import type { TurnEngine, TurnReport } from "./turn.ts";

/** The node's config posture (spec: a node on a stale document sheds or is stuck). */
export type Posture = "current" | "shed" | "stuck";

/** What the seat host hands a turn with its delivery (src/seat/host.ts TurnContext). */
export interface SeatTurnGrant {
  handle: string;
  epoch: number;
  fence(): boolean;
  /** Admission for a turn under this grant (renew fresh, same epoch); checked before each
   * turn of a drain, since the host admitted only its start. Absent: the fence alone. */
  admit?(): boolean;
  /** Aborted when the host stops waiting for the seat's turns (a drain past its budget):
   * the running turn is cancelled at its next await and its deliveries handed back. */
  signal?: AbortSignal;
}

/** A counting semaphore: FIFO waiters, bounded by the callers (one per seat's handler). */
export class Semaphore {
  private used = 0;
  private readonly waiters: (() => void)[] = [];
  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new Error(`max_concurrent must be an integer ≥ 1, got ${limit}`);
  }
  get inUse(): number {
    return this.used;
  }
  async acquire(): Promise<() => void> {
    if (this.used < this.limit) this.used += 1;
    else await new Promise<void>((resolve) => this.waiters.push(resolve));
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiters.shift();
      // The slot passes straight to the next waiter: `used` stays counted for it.
      if (next) next();
      else this.used -= 1;
    };
  }
}

export interface InboxOptions {
  engine: Pick<TurnEngine, "run">;
  log: Logger;
  /** Turns this node runs at once, across every seat (node.max_concurrent). */
  max_concurrent: number;
  posture?: () => Posture;
}

interface Item {
  index: number;
  delivery: Delivery;
  trigger: Trigger;
}

export class SeatInbox {
  private readonly slots: Semaphore;

  constructor(private readonly o: InboxOptions) {
    this.slots = new Semaphore(o.max_concurrent);
  }

  /** The seat host's InboxHandler: one delivery is a batch of one. */
  readonly handler = async (delivery: Delivery, grant: SeatTurnGrant): Promise<Outcome> => {
    const [out] = await this.handleBatch([delivery], grant);
    return out!;
  };

  /** The seat host's BatchInboxHandler: a drain of the seat's inbox, what the node wires. */
  readonly batchHandler = (deliveries: Delivery[], grant: SeatTurnGrant): Promise<Outcome[]> => this.handleBatch(deliveries, grant);

  /** Turns running on this node right now. */
  get running(): number {
    return this.slots.inUse;
  }

  /**
   * Settles a drained batch of one seat's deliveries: one Outcome per delivery, in order.
   * Partitions run one after another (a seat is one agent, serial within its node).
   */
  async handleBatch(deliveries: readonly Delivery[], grant: SeatTurnGrant): Promise<Outcome[]> {
    const outcomes: Outcome[] = deliveries.map(() => ack());
    const items: Item[] = [];
    deliveries.forEach((delivery, index) => {
      const decoded = decodeTrigger(delivery.data);
      if (!decoded.ok) {
        this.o.log.error("inbox_trigger_invalid", { seat: grant.handle, subject: delivery.subject, seq: delivery.streamSeq, error: decoded.error });
        return;
      }
      if (decoded.trigger.seat !== grant.handle) {
        this.o.log.error("inbox_trigger_misrouted", { seat: grant.handle, trigger_seat: decoded.trigger.seat, event_id: decoded.trigger.event_id });
        return;
      }
      items.push({ index, delivery, trigger: decoded.trigger });
    });
    if (items.length === 0) return outcomes;

    const deferAll = (from: Item[], reason: string) => {
      for (const it of from) outcomes[it.index] = defer(reason);
    };
    const posture = this.o.posture?.() ?? "current";
    if (posture !== "current") {
      deferAll(items, `config posture is ${posture}`);
      return outcomes;
    }
    const partitions = partitionByConversation(items, (it) => it.trigger);
    for (let p = 0; p < partitions.length; p++) {
      const part = partitions[p]!;
      const rest = partitions.slice(p).flatMap((x) => x.items);
      if (!grant.fence()) {
        deferAll(rest, `seat "${grant.handle}" moved (fence)`);
        break;
      }
      if (grant.signal?.aborted) {
        // Handed back unrun: the successor takes them at once.
        for (const it of rest) outcomes[it.index] = nak();
        break;
      }
      const release = await this.slots.acquire();
      let report: TurnReport;
      try {
        // The wait for a slot, and the drain's earlier turns, may have outlasted the grant
        // or the renew that admitted the drain.
        if (!grant.fence()) {
          deferAll(rest, `seat "${grant.handle}" moved (fence)`);
          break;
        }
        if (grant.admit && !grant.admit()) {
          deferAll(rest, `seat "${grant.handle}" is not admitting turns (renew not fresh)`);
          break;
        }
        const delivery_count = Math.max(...part.items.map((it) => it.delivery.deliveryCount));
        report = await this.o.engine.run({ seat: grant.handle, epoch: grant.epoch, fence: grant.fence, triggers: part.triggers, signal: grant.signal, delivery_count });
      } finally {
        release();
      }
      const out = outcomeOf(report, grant.handle);
      for (const it of part.items) outcomes[it.index] = out;
      if (report.settle === "defer") {
        // The attachment quiesces on a defer; nothing after it may run here.
        deferAll(partitions.slice(p + 1).flatMap((x) => x.items), `seat "${grant.handle}" moved (fence)`);
        break;
      }
    }
    return outcomes;
  }
}

/** A turn's settlement as the queue's outcome. */
export function outcomeOf(report: Pick<TurnReport, "settle" | "delay_ms" | "reason">, handle: string): Outcome {
  switch (report.settle) {
    case "ack":
      return ack();
    case "nak":
      return nak(report.delay_ms);
    case "reject":
      return reject(report.reason ?? "turn failed for good");
    case "defer":
      return defer(`seat "${handle}" moved mid-turn (fence)`);
  }
}
