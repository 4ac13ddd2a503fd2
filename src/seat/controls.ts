// A person's controls over a seat (issue 16): pause / resume and stop, as fleet state in
// crewlet_controls, so they hold whichever node runs the seat and survive restarts.
//   pause.{handle}  {by, at}  — present while paused; resume deletes it. The holder keeps the
//                   seat held and attached with its inbox on the "pause" hold: mail waits.
//   stop.{handle}   {by, at, id} — a request: the node running the seat's turn marks it,
//                   and the turn ends at its next fence check. Overwritten by the next stop.
// Every node mirrors the pause set and hears stops (one watch); seats nodes act on what they hold.
import { z } from "zod";
import type { KvEntry, KvSlot, KvWatch } from "../coord/contract.ts";
import type { Logger } from "../log.ts";

/** The hold name a paused seat's inbox attachment carries (queue contract: named holds). */
export const PAUSE_HOLD = "pause";

const controlSchema = z.object({ by: z.string(), at: z.number(), id: z.string().optional() });
export type Control = z.infer<typeof controlSchema>;

const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
function dec(e: KvEntry): Control | null {
  const r = controlSchema.safeParse(JSON.parse(new TextDecoder().decode(e.value)));
  return r.success ? r.data : null;
}

export interface ControlsHooks {
  paused?: (handle: string, c: Control) => void;
  resumed?: (handle: string) => void;
  stopped?: (handle: string, c: Control) => void;
}

export class SeatControls {
  private readonly pauses = new Map<string, Control>();
  private watches: KvWatch[] = [];
  /** Stops stored before the watch began, not yet handed over by it (bounded by the seats). */
  private storedStops = new Map<string, number>();

  constructor(private readonly o: { slot: KvSlot; log: Logger }) {}

  /**
   * Mirrors the pause set (current values first) and hears every stop from now on. One
   * watch over the slot for both kinds: every watch costs every node the broker's idle
   * heartbeat each 5 s when quiet (a third of a quiet node's watch traffic; bench/scale.ts),
   * and a second one for stops bought nothing. So the watch starts with current values, and
   * a stop it hands over that was already stored before it began — the same key at the same
   * revision as the listing taken just before — is an old request and is not acted on; one
   * written after that listing, even while the watch was starting, is heard.
   */
  async start(hooks: ControlsHooks): Promise<void> {
    const stored = new Map((await this.o.slot.entries("stop.*")).map((e) => [e.key, e.revision] as const));
    this.storedStops = stored;
    this.watches.push(
      await this.o.slot.watch(
        (e) => {
          if (e.key.startsWith("pause.")) {
            const handle = e.key.slice("pause.".length);
            const c = e.operation === "put" ? dec(e) : null;
            if (c) {
              const was = this.pauses.has(handle);
              this.pauses.set(handle, c);
              if (!was) hooks.paused?.(handle, c);
            } else if (this.pauses.delete(handle)) hooks.resumed?.(handle);
            return;
          }
          if (!e.key.startsWith("stop.")) return;
          if (stored.get(e.key) === e.revision) {
            stored.delete(e.key);
            return;
          }
          const c = e.operation === "put" ? dec(e) : null;
          if (c) hooks.stopped?.(e.key.slice("stop.".length), c);
        },
        { key: ">", includeCurrent: true },
      ),
    );
  }

  stop(): void {
    for (const w of this.watches) w.stop();
    this.watches = [];
    this.storedStops.clear();
  }

  /** Paused per this node's mirror. */
  pausedLocally(handle: string): Control | null {
    return this.pauses.get(handle) ?? null;
  }

  /** Paused per the store (an attach asks this: the mirror may not have caught up yet). */
  async isPaused(handle: string): Promise<Control | null> {
    const e = await this.o.slot.get(`pause.${handle}`);
    return e && e.operation === "put" ? dec(e) : null;
  }

  async pause(handle: string, by: string, at: number): Promise<{ changed: boolean; control: Control }> {
    const current = await this.isPaused(handle);
    if (current) return { changed: false, control: current };
    const control = { by, at };
    await this.o.slot.put(`pause.${handle}`, enc(control));
    return { changed: true, control };
  }

  async resume(handle: string): Promise<{ changed: boolean }> {
    const current = await this.isPaused(handle);
    if (!current) return { changed: false };
    await this.o.slot.delete(`pause.${handle}`);
    return { changed: true };
  }

  async requestStop(handle: string, by: string, at: number, id: string): Promise<Control> {
    const control = { by, at, id };
    await this.o.slot.put(`stop.${handle}`, enc(control));
    return control;
  }
}
