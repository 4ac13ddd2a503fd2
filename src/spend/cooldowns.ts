// The fleet's shared key cooldowns (Scaling Out § "What the fleet shares": `cooldowns`): a
// 429 on one node writes {provider}.{key id} → {until, reason, node} to crewlet_cooldowns;
// every node mirrors the bucket (one watch) and its providers pass over a cooling key
// (providers/http.ts keyFor). The key id is a hash prefix: a secret never reaches the store.
import { createHash } from "node:crypto";
import { z } from "zod";
import type { EventSink } from "../agent/events.ts";
import type { KeyCooldowns } from "../agent/providers/contract.ts";
import type { Clock } from "../clock.ts";
import type { KvSlot, KvWatch } from "../coord/contract.ts";
import type { Logger } from "../log.ts";

/** Hex characters of sha256(key) that name a key: 64 bits tell a company's keys apart and
 *  say nothing about the key. */
const KEY_ID_CHARS = 16;

export function keyId(key: string): string {
  return createHash("sha256").update(key).digest("hex").slice(0, KEY_ID_CHARS);
}

const recordSchema = z.object({ until: z.number(), reason: z.string(), node: z.string() });

export class SharedCooldowns implements KeyCooldowns {
  private readonly until = new Map<string, number>();
  private watch: KvWatch | null = null;

  constructor(private readonly o: { slot: KvSlot; clock: Clock; log: Logger; events: EventSink; node_id: string }) {}

  async start(): Promise<void> {
    this.watch = await this.o.slot.watch(
      (e) => {
        if (e.operation !== "put") return void this.until.delete(e.key);
        const r = recordSchema.safeParse(JSON.parse(new TextDecoder().decode(e.value)));
        if (r.success) this.until.set(e.key, Math.max(this.until.get(e.key) ?? 0, r.data.until));
      },
      { includeCurrent: true },
    );
  }

  stop(): void {
    this.watch?.stop();
  }

  cooling(provider: string, key: string): boolean {
    return (this.until.get(`${provider}.${keyId(key)}`) ?? 0) > this.o.clock.now();
  }

  cool(provider: string, key: string, for_ms: number, reason: string): void {
    const id = keyId(key);
    const slotKey = `${provider}.${id}`;
    const until = this.o.clock.now() + for_ms;
    this.until.set(slotKey, Math.max(this.until.get(slotKey) ?? 0, until));
    this.o.events.emit("provider_key_cooling", { node: this.o.node_id, provider, key_id: id, until: new Date(until).toISOString(), reason });
    this.o.clock.setTimeout(() => {
      if (!this.cooling(provider, key)) this.o.events.emit("provider_key_ready", { node: this.o.node_id, provider, key_id: id });
    }, for_ms + 1);
    void this.o.slot
      .put(slotKey, new TextEncoder().encode(JSON.stringify({ until, reason, node: this.o.node_id })))
      .catch((err) => this.o.log.warn("provider_key_cooling_unshared", { provider, key_id: id, error: (err as Error).message }));
  }
}
