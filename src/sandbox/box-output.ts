// What a box keeps of its engine's output: a fixed-size ring of the last bytes written
// (stdout and stderr interleaved as they arrive) and a count of every byte. A coding CLI
// can print gigabytes; the seat only ever needs the tail, so memory never grows with output.

/** The ring is allocated at open; a configured output_bytes past this is kept at this. The
 *  tail travels in one broker message beside the diff (NATS's default max_payload is 1 MiB)
 *  and is read by a person in a thread: more than 1 MiB helps neither. */
export const OUTPUT_TAIL_BYTES_MAX = 1024 * 1024;

/** A summary is one line a person reads in the thread; a CLI that prints a megabyte with no
 *  newline must not make it a megabyte. */
export const SUMMARY_CHARS_MAX = 1000;

export class OutputTail {
  private readonly ring: Uint8Array;
  /** Where the next byte goes. */
  private head = 0;
  /** Bytes held (≤ capacity). */
  private held = 0;
  /** Every byte pushed, kept or not. */
  total = 0;

  constructor(capacity_bytes: number) {
    const capacity = Math.max(0, Math.min(OUTPUT_TAIL_BYTES_MAX, Math.floor(capacity_bytes)));
    this.ring = new Uint8Array(capacity);
  }

  get capacity(): number {
    return this.ring.length;
  }

  push(chunk: Uint8Array): void {
    this.total += chunk.length;
    const cap = this.ring.length;
    if (cap === 0 || chunk.length === 0) return;
    // Only the chunk's last `cap` bytes can survive it.
    const src = chunk.length > cap ? chunk.subarray(chunk.length - cap) : chunk;
    const first = Math.min(src.length, cap - this.head);
    this.ring.set(src.subarray(0, first), this.head);
    this.ring.set(src.subarray(first), 0);
    this.head = (this.head + src.length) % cap;
    this.held = Math.min(cap, this.held + src.length);
  }

  /** The kept bytes in the order written. */
  bytes(): Uint8Array {
    const cap = this.ring.length;
    const out = new Uint8Array(this.held);
    const start = (this.head - this.held + cap) % (cap || 1);
    const first = Math.min(this.held, cap - start);
    out.set(this.ring.subarray(start, start + first), 0);
    out.set(this.ring.subarray(0, this.held - first), first);
    return out;
  }

  /** The kept bytes as text. A cut through a multi-byte character at the front is dropped
   *  rather than shown as a replacement character. */
  text(): string {
    let b = this.bytes();
    let skip = 0;
    // UTF-8 continuation bytes are 10xxxxxx; a character is at most 4 bytes.
    while (skip < 3 && skip < b.length && ((b[skip] ?? 0) & 0xc0) === 0x80) skip++;
    if (this.held < this.total) b = b.subarray(skip);
    return new TextDecoder("utf-8", { fatal: false }).decode(b);
  }
}

/** The last line with anything but whitespace on it, trimmed and bounded; "" when none. */
export function lastLine(text: string): string {
  const lines = text.split(/\r?\n|\r/);
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = (lines[i] ?? "").trim();
    if (line !== "") return line.length > SUMMARY_CHARS_MAX ? `${line.slice(0, SUMMARY_CHARS_MAX)}…` : line;
  }
  return "";
}
