// Questions a run asks mid-way and waits on. QuestionBoard is the bookkeeping both providers
// share (each seq told to each listener once, in order; one answer per seq, the rest ignored).
// The local box's engine asks through `crewlet-ask`, a POSIX sh script written into the
// box's control dir: it takes the next seq race-free (mkdir is atomic), writes
// questions/<seq>.q (temp + rename, so the box never reads half a question), and polls for
// questions/<seq>.a. The box polls for the next .q and writes .a the same atomic way.
import { closeSync, constants, existsSync, fstatSync, openSync, readSync, renameSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import type { Question } from "./contract.ts";

/** Each question is a post in the seat's thread that a person must answer: a run looping on
 *  crewlet-ask must not flood it. The script refuses past this. */
export const QUESTIONS_MAX = 100;

/** A question is read up to this many bytes: it is a chat message, not a document. */
export const QUESTION_BYTES_MAX = 8 * 1024;

/** An answer is a chat reply handed to the engine on stdout; anything longer is cut here. */
export const ANSWER_BYTES_MAX = 64 * 1024;

/** How often the box looks for a new question. A person answers in seconds at best, so a
 *  fifth of a second adds nothing they could notice; one stat per poll costs nothing. */
export const QUESTION_POLL_MS = 200;

/** Questions taken per poll: a burst is taken over a few polls rather than in one long turn. */
const QUESTIONS_PER_POLL_MAX = 10;

export const ASK_SCRIPT = `#!/bin/sh
# crewlet-ask QUESTION... : asks the seat's thread QUESTION, waits for the answer, prints it.
# Written by the Crewlet box (src/sandbox/box-questions.ts). Exit 0 with the answer on
# stdout; exit 2 when the run may ask no more (${QUESTIONS_MAX} questions) or the box is gone.
set -u
dir="\${CREWLET_CONTROL:?crewlet-ask: CREWLET_CONTROL is not set}/questions"
[ -d "$dir" ] || { echo "crewlet-ask: this box takes no questions" >&2; exit 2; }
n=1
# mkdir is atomic: two asks at once never take one seq.
while ! mkdir "$dir/$n.seq" 2>/dev/null; do
  n=$((n + 1))
  if [ "$n" -gt ${QUESTIONS_MAX} ]; then
    echo "crewlet-ask: this run has asked ${QUESTIONS_MAX} questions, the most it may" >&2
    exit 2
  fi
done
printf '%s' "$*" > "$dir/$n.q.tmp" && mv -f "$dir/$n.q.tmp" "$dir/$n.q" || exit 2
while [ ! -f "$dir/$n.a" ]; do
  [ -d "$dir" ] || exit 2
  # GNU and busybox sleep take fractions; a strictly POSIX one falls back to a second.
  sleep 0.2 2>/dev/null || sleep 1
done
cat "$dir/$n.a"
`;

export class QuestionBoard {
  private readonly listeners: Array<(q: Question) => void> = [];
  private readonly asked = new Map<number, Question>();
  private readonly answered = new Set<number>();

  /** A listener added late is told, in order, the questions still waiting for an answer. */
  listen(cb: (q: Question) => void): void {
    this.listeners.push(cb);
    const waiting = [...this.asked.values()].filter((q) => !this.answered.has(q.seq)).sort((a, b) => a.seq - b.seq);
    for (const q of waiting) queueMicrotask(() => tell(cb, q));
  }

  /** Records a question and tells every listener; false when that seq was asked before. */
  ask(q: Question): boolean {
    if (this.asked.has(q.seq)) return false;
    this.asked.set(q.seq, q);
    for (const cb of this.listeners) tell(cb, q);
    return true;
  }

  /** True for the first answer to a seq that was asked; every other answer is ignored. */
  take(seq: number): boolean {
    if (!this.asked.has(seq)) return false;
    if (this.answered.has(seq)) return false;
    this.answered.add(seq);
    return true;
  }
}

function tell(cb: (q: Question) => void, q: Question): void {
  try {
    cb(q);
  } catch {
    // A listener's failure is its own: the box and the other listeners carry on.
  }
}

/** Cuts text to at most `max` UTF-8 bytes without splitting a character. */
export function cutUtf8(text: string, max: number): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= max) return text;
  let end = max;
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end).toString("utf8");
}

/** The local box's side of the files: finds new questions in order, writes answers. */
export class QuestionFiles {
  private next = 1;

  constructor(private readonly dir: string) {}

  /** Questions that appeared since the last call, in seq order (a later seq waits for an
   *  earlier one that is still being written). */
  poll(): Question[] {
    const found: Question[] = [];
    while (found.length < QUESTIONS_PER_POLL_MAX && this.next <= QUESTIONS_MAX) {
      const file = join(this.dir, `${this.next}.q`);
      if (!existsSync(file)) break;
      found.push({ seq: this.next, text: readHead(file, QUESTION_BYTES_MAX) });
      this.next += 1;
    }
    return found;
  }

  answer(seq: number, text: string): void {
    const tmp = join(this.dir, `${seq}.a.tmp`);
    const body = cutUtf8(text, ANSWER_BYTES_MAX);
    // The engine can write this directory: whatever it left at the temp name goes (a link
    // is removed, not followed), and the file is created new, never opened through a link.
    rmSync(tmp, { force: true, recursive: true });
    const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
    try {
      writeSync(fd, body.endsWith("\n") ? body : `${body}\n`);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, join(this.dir, `${seq}.a`));
  }
}

/** The first bytes of a plain file the engine wrote. Not through a link (it could name any
 *  host file) and not a FIFO (it would block the box): those read as "". */
function readHead(file: string, max: number): string {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return "";
  }
  try {
    if (!fstatSync(fd).isFile()) return "";
    const buf = Buffer.alloc(max);
    const n = readSync(fd, buf, 0, max, 0);
    return cutUtf8(buf.subarray(0, n).toString("utf8"), max);
  } finally {
    closeSync(fd);
  }
}
