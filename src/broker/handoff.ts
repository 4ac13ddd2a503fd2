// A member leaving gracefully hands the leadership of every stream it leads to a peer
// before it goes. Otherwise the fleet finds out by losing the leader: the stream's writes
// stop while the peers elect another (2.9.10: 4.0–6.6 s; 2.15.2: 5.8–6.5 s, measured by
// bench/server-quirks.ts), and the peers taking over the drained node's seats claim into
// exactly that gap (the lease bucket is a stream too), answer `unknown`, and wait a sweep.
// A stepdown costs well under a second of refused writes (2.9.10 ~270 ms, 2.15.2 0–530 ms).
import type { NatsConnection } from "nats";
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";

/** An R3 election takes a few hundred ms; 10 s covers a stalled route and keeps a drain
 * short. One window for the whole hand-off, every stream in it: per stream (as it was) a
 * fleet without quorum waited 10 s for each batch of CONCURRENCY streams, 20 s for 15. */
export const STREAM_HANDOFF_WITHIN_MS = 10_000;
/** Between INFO polls while waiting for a new leader: an election's own pace. */
const POLL_MS = 100;
/** Streams handed off at once: elections are per stream, and the meta leader serialises little. */
const CONCURRENCY = 8;
/** Per JetStream API call. */
const API_TIMEOUT_MS = 5_000;
/**
 * One stream INFO poll while waiting for a new leader: since 2.10 only the stream's leader
 * answers INFO, so a request sent during the election is never answered and must time out
 * soon to become the next poll rather than eat the hand-off window.
 */
const POLL_TIMEOUT_MS = 1_000;

export interface HandOffResult {
  handedOff: number;
  stillHere: string[];
}

export async function handOffStreamLeaders(nc: NatsConnection, serverName: string, clock: Clock, log: Logger): Promise<HandOffResult> {
  const jsm = await nc.jetstreamManager({ checkAPI: false, timeout: API_TIMEOUT_MS });
  const poller = await nc.jetstreamManager({ checkAPI: false, timeout: POLL_TIMEOUT_MS });
  const names: string[] = [];
  for await (const name of jsm.streams.names()) names.push(name);
  const leaderOf = async (stream: string): Promise<{ leader: string | null; replicated: boolean }> => {
    const info = await poller.streams.info(stream).catch(() => null);
    return { leader: info?.cluster?.leader ?? null, replicated: (info?.config.num_replicas ?? 1) > 1 };
  };
  let handedOff = 0;
  const stillHere: string[] = [];
  const deadline = clock.now() + STREAM_HANDOFF_WITHIN_MS;
  const handOff = async (stream: string): Promise<void> => {
    if (clock.now() >= deadline) {
      stillHere.push(stream);
      return;
    }
    const now = await leaderOf(stream);
    if (now.leader !== serverName || !now.replicated) return;
    try {
      await nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${stream}`, "", { timeout: API_TIMEOUT_MS });
    } catch (err) {
      log.warn("broker_stream_stepdown_failed", { stream, error: String(err) });
    }
    // The stepdown answers before a peer is elected: wait until one is.
    while (clock.now() < deadline) {
      const after = await leaderOf(stream);
      if (after.leader && after.leader !== serverName) {
        handedOff += 1;
        return;
      }
      await clock.sleep(POLL_MS);
    }
    stillHere.push(stream);
  };
  for (let i = 0; i < names.length; i += CONCURRENCY) await Promise.all(names.slice(i, i + CONCURRENCY).map(handOff));
  if (stillHere.length > 0) log.warn("broker_streams_not_handed_off", { streams: stillHere, within_ms: STREAM_HANDOFF_WITHIN_MS });
  return { handedOff, stillHere };
}
