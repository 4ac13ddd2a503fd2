// One Server-Sent Events response: a bounded queue between what the node sends and what
// the client reads, a keepalive comment, and one close that runs the owner's cleanup
// whichever way the stream ends (the client goes, the node stops, the owner closes it).
// A client that reads slower than frames arrive is told how many it missed rather than
// holding memory for them. Used by GET /events/stream and GET /chat/channels/{id}/stream.
import type { Clock, Timer } from "../clock.ts";

const encoder = new TextEncoder();

/** One SSE frame; `name` has no newlines, data is one line of JSON. */
export function sseFrame(name: string, data: unknown): Uint8Array {
  return encoder.encode(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
}

export interface SseOptions {
  clock: Clock;
  /** The request's signal: the client going closes the stream. */
  signal: AbortSignal;
  /** Frames held for a slow client; past it frames are dropped and counted. */
  buffer_max: number;
  /** A comment line this often keeps idle proxies from cutting the stream. */
  keepalive_ms: number;
  /** Runs once, however the stream ends; `dropped` is what was dropped and never told. */
  onClose(dropped: number): void;
}

export interface SseStream {
  /** Queues one frame (dropped and counted when the client is behind). */
  send(frame: Uint8Array): void;
  close(): void;
  readonly closed: boolean;
  /** The response to return: 200, text/event-stream, not cached nor buffered by proxies. */
  response(): Response;
}

export function openSse(o: SseOptions): SseStream {
  let closed = false;
  let dropped = 0;
  let keepalive: Timer | null = null;
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const body = new ReadableStream<Uint8Array>(
    {
      start: (ctl) => {
        controller = ctl;
      },
      cancel: () => close(),
    },
    new CountQueuingStrategy({ highWaterMark: o.buffer_max }),
  );
  function close(): void {
    if (closed) return;
    closed = true;
    keepalive?.cancel();
    try {
      controller.close();
    } catch {
      // already closed or errored by the client going
    }
    o.onClose(dropped);
  }
  function send(frame: Uint8Array): void {
    if (closed) return;
    // desiredSize counts free slots in the bounded queue; at zero the client is behind.
    if ((controller.desiredSize ?? 0) <= 0) {
      dropped++;
      return;
    }
    if (dropped > 0) {
      controller.enqueue(sseFrame("dropped", dropped));
      dropped = 0;
    }
    controller.enqueue(frame);
  }
  o.signal.addEventListener("abort", close, { once: true });
  if (o.signal.aborted) close();
  keepalive = o.clock.setInterval(() => {
    // A client that is behind has data coming; it needs no keepalive.
    if (!closed && (controller.desiredSize ?? 0) > 0) controller.enqueue(encoder.encode(": keepalive\n\n"));
  }, o.keepalive_ms);
  if (closed) keepalive.cancel();
  return {
    send,
    close,
    get closed() {
      return closed;
    },
    response: () =>
      new Response(body, {
        status: 200,
        headers: {
          "content-type": "text/event-stream; charset=utf-8",
          "cache-control": "no-cache, no-transform",
          "x-accel-buffering": "no",
        },
      }),
  };
}
