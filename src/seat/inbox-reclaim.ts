// An acquire step of a seat's establishment (tenure.ts runs the prepare steps in order).
import type { Logger } from "../log.ts";
import type { JetStreamQueue } from "../queue/jetstream.ts";
import { mailbox } from "../queue/topics.ts";
import type { SeatGrant, SeatHooks } from "./host-state.ts";

/**
 * The last acquire step before the inbox attaches: mail a previous holder had delivered and
 * never settled (it was killed, frozen past its TTL, or cut off) is handed back to the seat
 * now, by resetting the inbox consumer to its ack floor (nats-server ≥ 2.14), instead of
 * waiting out the 30-minute ack wait. Safe because this node now holds the lease: the old
 * holder is fenced (its turns stop at the next round or tool call), and a trigger it had
 * completed is skipped by the completion ledger. A seat with nothing ack-pending (every
 * voluntary handover) is not touched. A failure is logged, never fails the acquire: the ack
 * wait remains the backstop.
 */
export function withInboxReclaim(hooks: SeatHooks, queue: JetStreamQueue, log: Logger): SeatHooks {
  const reclaim = async (grant: SeatGrant) => {
    const box = mailbox(grant.handle, "inbox");
    try {
      const state = await queue.inspectMailbox(box.subject, box.group);
      if (state.num_ack_pending === 0) return;
      const reset = await queue.resetMailbox(box.subject, box.group);
      log.info("seat_inbox_reclaimed", { seat: grant.handle, epoch: grant.epoch, ack_pending: state.num_ack_pending, reset });
    } catch (err) {
      log.warn("seat_inbox_reclaim_failed", { seat: grant.handle, epoch: grant.epoch, error: (err as Error).message });
    }
  };
  return { ...hooks, prepare: [...(hooks.prepare ?? []), reclaim] };
}
