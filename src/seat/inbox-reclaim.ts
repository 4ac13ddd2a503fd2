// An acquire step of a seat's establishment (tenure.ts runs the prepare steps in order).
import type { Logger } from "../log.ts";
import type { JetStreamQueue } from "../queue/jetstream.ts";
import { mailbox } from "../queue/topics.ts";
import type { SeatGrant, SeatHooks } from "./host-state.ts";

/**
 * Before the inbox attaches, mail a previous holder took and never settled is handed back by
 * resetting the consumer to its ack floor, instead of waiting out the 30-minute ack wait. Safe:
 * this node holds the lease, the old holder is fenced, and the ledger skips what it finished.
 * An inbox whose member died with the old holder is made again first (it then owes all the
 * unsettled mail as new deliveries, so there is nothing to reset), rather than each read
 * below waiting out its silence. A failure is logged, never fails the acquire: the ack wait
 * is the backstop.
 */
export function withInboxReclaim(hooks: SeatHooks, queue: JetStreamQueue, log: Logger): SeatHooks {
  const reclaim = async (grant: SeatGrant) => {
    const box = mailbox(grant.handle, "inbox");
    try {
      if ((await queue.reviveIfUnanswered(box.subject, box.group)) === "revived") {
        log.info("seat_inbox_reclaimed", { seat: grant.handle, epoch: grant.epoch, revived: true });
        return;
      }
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
