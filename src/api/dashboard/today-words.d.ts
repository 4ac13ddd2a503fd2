// Types of today-words.js (plain JavaScript run in the browser) for its bun tests.
export interface ReceiptLike {
  seat: string;
  ended_at: number;
  input_tokens: number;
  output_tokens: number;
  cost_micros: number | null;
  outcome: string;
}
export interface Tally {
  turns: number;
  input_tokens: number;
  output_tokens: number;
  cost_micros: number;
  unpriced: number;
  trouble: number;
}
export function outcomeKind(outcome: string): "done" | "passing" | "trouble";
export function outcomeWords(outcome: string): string;
export function triggerWords(t: { type: string; from: string; conversation: string; count: number }): string;
export function toolsWords(tools: { name: string; calls: number; errors: number }[]): string;
export function moneyWords(micros: number): string;
export function costWords(micros: number | null | undefined): string;
export function durationWords(ms: number): string;
export function tallies(receipts: ReceiptLike[]): Tally;
export function tallyWords(t: Tally): string;
export function bySeat<R extends ReceiptLike>(receipts: R[], order: string[]): { seat: string; receipts: R[] }[];
