// Removal markers (spec: Singleton duties, `maintenance`): a delete in a bucket with no age
// leaves a marker for ever, so the maintenance sweep purges each one once it is three hours
// old, each through its own revision, so a key written again since is untouched. Buckets
// with an age need nothing: the age drops their markers too.
import type { Clock } from "../clock.ts";
import type { KvSlot, SlotName } from "../coord/contract.ts";
import { SLOT_BUCKETS } from "../coord/buckets.ts";
import type { Logger } from "../log.ts";

/**
 * Spec: three hours. A marker is what tells a watcher (and a node catching up on a
 * bucket) that a key went away; three hours is far past any watcher's catch-up after a
 * reconnect, and short enough that deleted keys do not pile up in a bucket read by listing.
 */
export const MARKER_MAX_AGE_MS = 3 * 60 * 60 * 1000;
/** Markers purged per bucket per tick: bounds one tick's work; the rest wait for the next. */
export const MARKERS_PER_TICK_MAX = 10_000;

/** The shared-state slots with no age. */
export function agelessSlots(): SlotName[] {
  return (Object.keys(SLOT_BUCKETS) as SlotName[]).filter((n) => SLOT_BUCKETS[n].max_age_ms === 0);
}

export async function purgeOldMarkers(
  slot: (n: SlotName) => KvSlot,
  clock: Clock,
  log: Logger,
  /** Each call stamped and bounded, as every duty call (bound.ts). */
  call: <T>(what: string, fn: () => Promise<T>) => Promise<T> = (_w, fn) => fn(),
): Promise<number> {
  let total = 0;
  for (const name of agelessSlots()) {
    try {
      const markers = await call("marker listing", () => slot(name).removals());
      const now = clock.now();
      let purged = 0;
      for (const m of markers) {
        if (purged >= MARKERS_PER_TICK_MAX) break;
        if (now - m.created < MARKER_MAX_AGE_MS) continue;
        if (await call("marker purge", () => slot(name).purgeRemoval(m.key, m.revision))) purged++;
      }
      if (purged > 0) log.info("removal_markers_purged", { bucket: SLOT_BUCKETS[name].name, purged });
      total += purged;
    } catch (err) {
      log.warn("removal_markers_purge_failed", { bucket: SLOT_BUCKETS[name].name, error: err as Error });
    }
  }
  return total;
}
