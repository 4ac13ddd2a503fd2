// Types of event-sentences.js (plain JavaScript run in the browser) for its bun tests.
export type Level = "ok" | "info" | "warn" | "error";
export interface Held {
  node: string;
  released: string | null;
}
export function place(conversation: unknown): string;
export function seatTracker(): { observe(name: string, body: Record<string, unknown>): Held | null };
export function describeEvent(name: string, body: Record<string, unknown>, before?: Held | null): { text: string; level: Level };
export function plain(name: string, body: Record<string, unknown>): string;
export function details(body: Record<string, unknown>): string[];
/** Imported `with { type: "text" }` (src/api/dashboard/index.ts), the file's source. */
declare const source: string;
export default source;
