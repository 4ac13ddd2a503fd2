// A boot step that creates or reads clustered JetStream assets waits for a forming
// cluster instead of failing the boot: a whole fleet restarted in any order has each node
// booting before its peers are up.
import { isClusterForming } from "../broker/forming.ts";
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";

/** A quorum step waits this long: a whole fleet restarted in any order has each node booting
 * before its peers, so quorum is waited for, not a reason to exit. Ten minutes covers boxes
 * brought back one by one; /ready names the step meanwhile. */
export const QUORUM_WAIT_MS_MAX = 10 * 60_000;
/** Between attempts: about one raft campaign, the thing being waited out. */
const CLUSTER_FORMING_RETRY_MS = 500;
/** A waiting boot step says so this often (node_boot_waiting_for_quorum), not every attempt. */
const QUORUM_PROGRESS_EVERY_MS = 5_000;

export interface QuorumWaitOptions {
  clock: Clock;
  log: Logger;
  /** The node is stopping: a failure is final. */
  stopping: () => boolean;
  /** What /ready says while the step waits. */
  waiting: (text: string) => void;
}

/** Runs a boot step that creates clustered assets, retrying what a forming cluster answers
 * ("no suitable peers", an R3 campaign outlasting a short TTL's call budget — the server
 * finishes that creation, so a later attempt adopts it). Any other failure fails the boot. */
export async function whileClusterForms<T>(step: string, fn: () => Promise<T>, o: QuorumWaitOptions): Promise<T> {
  const started = o.clock.now();
  let said = started;
  for (let attempt = 1; ; attempt++) {
    try {
      const out = await fn();
      if (attempt > 1) o.log.info("node_boot_quorum_reached", { step, attempts: attempt, waited_ms: o.clock.now() - started });
      return out;
    } catch (err) {
      const waited_ms = o.clock.now() - started;
      if (!isClusterForming(err) || waited_ms >= QUORUM_WAIT_MS_MAX || o.stopping()) throw err;
      if (attempt === 1 || o.clock.now() - said >= QUORUM_PROGRESS_EVERY_MS) {
        said = o.clock.now();
        o.waiting(`${step} (waiting for quorum ${Math.round(waited_ms / 1000)} s)`);
        o.log.warn("node_boot_waiting_for_quorum", { step, attempt, waited_ms, error: err as Error });
      }
      await o.clock.sleep(CLUSTER_FORMING_RETRY_MS);
    }
  }
}
