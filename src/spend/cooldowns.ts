// The fleet's shared key cooldowns (Scaling Out § "What the fleet shares": `cooldowns`): a
// 429 on one node writes {provider}.{key id} → {until, reason, node} to crewlet_cooldowns;
// every node mirrors the bucket (one watch) and its providers pass over a cooling key
// (providers/http.ts keyFor), or, when every key is cooling, do not call at all. The key id
// is a hash prefix: a secret never reaches the store.
//
// Who says a key is ready again: whichever node removes the ended record. Every node that
// mirrors a record arms a timer for its `until`; at it, each tries to delete that record
// at its revision, and the one delete that lands emits `provider_key_ready` — once for the
// fleet (the events go to the fleet's stream), from any node still up, so the end is told
// even when the node that cooled the key has stopped. A record cooled again meanwhile has a
// new revision: the old timers' deletes conflict and say nothing, the new record's end is
// told instead. The node that cooled the key alone would miss every end past its own exit,
// and every mirroring node emitting would tell one end N times.
import { createHash } from "node:crypto";
import { z } from "zod";
import type { EventSink } from "../agent/events.ts";
import type { KeyCooldowns } from "../agent/providers/contract.ts";
import type { Clock, Timer } from "../clock.ts";
import { CasConflict, type KvSlot, type KvWatch } from "../coord/contract.ts";
import type { Logger } from "../log.ts";

/** Hex characters of sha256(key) that name a key: 64 bits tell a company's keys apart and
 *  say nothing about the key. */
const KEY_ID_CHARS = 16;

export function keyId(key: string): string {
  return createHash("sha256").update(key).digest("hex").slice(0, KEY_ID_CHARS);
}

const recordSchema = z.object({ until: z.number(), reason: z.string(), node: z.string() });

/** `{provider}.{key id}` → its parts, for the ready event of a record only the slot named. */
function slotParts(slotKey: string): { provider: string; key_id: string } {
  const dot = slotKey.lastIndexOf(".");
  return { provider: slotKey.slice(0, dot), key_id: slotKey.slice(dot + 1) };
}

export class SharedCooldowns implements KeyCooldowns {
  private readonly until = new Map<string, number>();
  /** One end timer per slot key (its latest revision's): bounded by the company's keys. */
  private readonly ends = new Map<string, Timer>();
  private watch: KvWatch | null = null;

  constructor(private readonly o: { slot: KvSlot; clock: Clock; log: Logger; events: EventSink; node_id: string }) {}

  async start(): Promise<void> {
    this.watch = await this.o.slot.watch(
      (e) => {
        if (e.operation !== "put") {
          // Only an ended record is ever removed; a local cooling written since stays.
          if ((this.until.get(e.key) ?? 0) <= this.o.clock.now()) this.until.delete(e.key);
          return;
        }
        const r = recordSchema.safeParse(JSON.parse(new TextDecoder().decode(e.value)));
        if (!r.success) return;
        this.until.set(e.key, Math.max(this.until.get(e.key) ?? 0, r.data.until));
        this.armEnd(e.key, r.data.until, e.revision);
      },
      { includeCurrent: true },
    );
  }

  stop(): void {
    this.watch?.stop();
    for (const t of this.ends.values()) t.cancel();
    this.ends.clear();
  }

  untilOf(provider: string, key: string): number {
    return this.until.get(`${provider}.${keyId(key)}`) ?? 0;
  }

  cooling(provider: string, key: string): boolean {
    return this.untilOf(provider, key) > this.o.clock.now();
  }

  cool(provider: string, key: string, for_ms: number, reason: string): void {
    const id = keyId(key);
    const slotKey = `${provider}.${id}`;
    const until = this.o.clock.now() + for_ms;
    this.until.set(slotKey, Math.max(this.until.get(slotKey) ?? 0, until));
    this.o.events.emit("provider_key_cooling", { node: this.o.node_id, provider, key_id: id, until: new Date(until).toISOString(), reason });
    void this.o.slot.put(slotKey, new TextEncoder().encode(JSON.stringify({ until, reason, node: this.o.node_id }))).catch((err) => {
      this.o.log.warn("provider_key_cooling_unshared", { provider, key_id: id, error: (err as Error).message });
      // Cooling here alone: this node alone can tell its end.
      this.armEnd(slotKey, until, null);
    });
  }

  /** At `until`, the record at `revision` is removed and its end told (null: local only). */
  private armEnd(slotKey: string, until: number, revision: number | null): void {
    this.ends.get(slotKey)?.cancel();
    const timer = this.o.clock.setTimeout(() => {
      if (this.ends.get(slotKey) === timer) this.ends.delete(slotKey);
      void this.end(slotKey, revision);
    }, Math.max(0, until - this.o.clock.now()) + 1);
    this.ends.set(slotKey, timer);
  }

  private async end(slotKey: string, revision: number | null): Promise<void> {
    if ((this.until.get(slotKey) ?? 0) > this.o.clock.now()) return; // cooled again since
    if (revision !== null) {
      try {
        await this.o.slot.delete(slotKey, revision);
      } catch (err) {
        // Another node removed it (and told), or it was cooled again: nothing to say.
        if (err instanceof CasConflict) return;
        this.o.log.warn("provider_key_ready_unshared", { ...slotParts(slotKey), error: (err as Error).message });
        return;
      }
    }
    this.o.events.emit("provider_key_ready", { node: this.o.node_id, ...slotParts(slotKey) });
  }
}
