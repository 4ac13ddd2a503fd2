// A person's controls over a seat (issue 16): pause / resume and stop, as fleet state in
// crewlet_controls, so they hold whichever node runs the seat and survive restarts.
//   pause.{handle}  {by, at}  — present while paused; resume deletes it. The holder keeps the
//                   seat held and attached with its inbox on the "pause" hold: mail waits.
//   stop.{handle}   {by, at, id} — a request: the node running the seat's turn marks it,
//                   and the turn ends at its next fence check. Overwritten by the next stop.
// Every node mirrors the pause set (one watch); seats nodes act on what they hold.
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

  constructor(private readonly o: { slot: KvSlot; log: Logger }) {}

  /** Mirrors the pause set (current values first) and hears every stop from now on. */
  async start(hooks: ControlsHooks): Promise<void> {
    this.watches.push(
      await this.o.slot.watch(
        (e) => {
          const handle = e.key.slice("pause.".length);
          const c = e.operation === "put" ? dec(e) : null;
          if (c) {
            const was = this.pauses.has(handle);
            this.pauses.set(handle, c);
            if (!was) hooks.paused?.(handle, c);
          } else if (this.pauses.delete(handle)) hooks.resumed?.(handle);
        },
        { key: "pause.*", includeCurrent: true },
      ),
    );
    this.watches.push(
      await this.o.slot.watch(
        (e) => {
          const c = e.operation === "put" ? dec(e) : null;
          if (c) hooks.stopped?.(e.key.slice("stop.".length), c);
        },
        { key: "stop.*", includeCurrent: false },
      ),
    );
  }

  stop(): void {
    for (const w of this.watches) w.stop();
    this.watches = [];
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
