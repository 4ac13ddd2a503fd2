// GET /events/stream against a real nats-server: events published to CREWLET_EVENTS after
// a client connects arrive as SSE frames; a client that stops reading is told how many it
// missed instead of growing a buffer; a client that goes frees its slot.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { NatsConnection } from "nats";
import { createApp } from "../../src/api/app.ts";
import { TokenAuth } from "../../src/api/auth.ts";
import { EVENT_BUFFER_MAX, EVENT_STREAMS_MAX, eventsGroup } from "../../src/api/routes/events.ts";
import { publishEventSink } from "../../src/agent/events.ts";
import { systemClock } from "../../src/clock.ts";
import { silentLogger } from "../../src/log.ts";
import { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { STREAM_EVENTS } from "../../src/queue/topics.ts";
import { startNats, type TestNats } from "../support/nats.ts";

const TOKEN = "events-test-token-0123456789";
const auth = { authorization: `Bearer ${TOKEN}` };
let nats: TestNats;
let nc: NatsConnection;
let queue: JetStreamQueue;
let app: ReturnType<typeof createApp>;

beforeAll(async () => {
  nats = await startNats();
  nc = await nats.connect();
  queue = new JetStreamQueue({ nc, replicas: 1, clock: systemClock, log: silentLogger });
  await queue.ensureStreams();
  app = createApp({
    auth: new TokenAuth([{ id: "ops", token: TOKEN, grants: ["state:read"] }]),
    log: silentLogger,
    health: { health: () => ({}), notReadyReason: () => null },
    groups: [eventsGroup({ nc, clock: systemClock, log: silentLogger })],
  });
});

afterAll(async () => {
  await nc?.close();
  await nats?.stop();
});

interface Frame {
  event: string;
  data: string;
  id: string | null;
}

/** Reads SSE frames off a response body, skipping comment lines. */
function frames(res: Response) {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  return {
    async next(): Promise<Frame> {
      for (;;) {
        const end = buffer.indexOf("\n\n");
        if (end >= 0) {
          const raw = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (raw.startsWith(":")) continue;
          const event = /^event: (.*)$/m.exec(raw)?.[1] ?? "message";
          const data = /^data: (.*)$/m.exec(raw)?.[1] ?? "";
          return { event, data, id: /^id: (.*)$/m.exec(raw)?.[1] ?? null };
        }
        const { value, done } = await reader.read();
        if (done) throw new Error("the stream ended");
        buffer += value;
      }
    },
    cancel: () => reader.cancel(),
  };
}

async function open() {
  const res = await app.request("/events/stream", { headers: auth });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
  const f = frames(res);
  expect((await f.next()).event).toBe("ready");
  return f;
}

/** Waits until some consumer (the open client's: earlier clients' consumers linger until
 * the server's inactivity threshold, stopped short) has been handed every message. */
async function deliveredAll(): Promise<void> {
  const jsm = await nc.jetstreamManager({ checkAPI: false, timeout: 5_000 });
  const deadline = Date.now() + 20_000;
  for (;;) {
    const last = (await jsm.streams.info(STREAM_EVENTS)).state.last_seq;
    const consumers = await jsm.consumers.list(STREAM_EVENTS).next();
    if (consumers.some((ci) => ci.delivered.stream_seq >= last)) return;
    if (Date.now() > deadline) throw new Error("the events consumer never caught up with the stream");
    await Bun.sleep(20);
  }
}

test("the stream needs a token with state:read", async () => {
  expect((await app.request("/events/stream")).status).toBe(401);
});

test("events published after a client connects arrive in order; what is not an event is skipped", async () => {
  const f = await open();
  const sink = publishEventSink(queue, silentLogger, () => 1_700_000_000_000);
  sink.emit("turn_started", { seat: "ceo", turn_id: "t1" });
  nc.publish("crewlet.events.garbage", new TextEncoder().encode("not json"));
  sink.emit("turn_completed", { seat: "ceo", turn_id: "t1", rounds: 2 });
  const first = await f.next();
  expect(first.event).toBe("turn_started");
  expect(JSON.parse(first.data)).toEqual({ event: "turn_started", at: 1_700_000_000_000, seat: "ceo", turn_id: "t1" });
  const second = await f.next();
  expect(second.event).toBe("turn_completed");
  expect(JSON.parse(second.data).rounds).toBe(2);
  // Each event's id is its stream sequence (what GET /events calls seq); the garbage between took one.
  expect(Number(second.id)).toBe(Number(first.id) + 2);
  await f.cancel();
});

test("a client that stops reading is told how many events it missed, and nothing more is held", async () => {
  const f = await open();
  const sink = publishEventSink(queue, silentLogger, () => Date.now());
  const burst = EVENT_BUFFER_MAX + 40;
  await Promise.all(Array.from({ length: burst }, (_, i) => queue.publish(`crewlet.events.tool_called`, new TextEncoder().encode(JSON.stringify({ event: "tool_called", n: i })))));
  await deliveredAll();
  // Read what was kept; the pipe between the queue and this reader holds a chunk or two
  // more than the queue's bound, so the count kept is the bound and a little over.
  const seen: number[] = [];
  let next = await f.next();
  // One read frees a slot, so the event after the burst is sent, preceded by the count.
  sink.emit("turn_completed", { seat: "pm" });
  for (let i = 0; i <= burst && next.event === "tool_called"; i++) {
    seen.push(JSON.parse(next.data).n);
    next = await f.next();
  }
  expect(next.event).toBe("dropped");
  expect(seen.length).toBeGreaterThanOrEqual(EVENT_BUFFER_MAX);
  expect(seen.length).toBeLessThan(burst);
  expect(seen.length + Number(next.data)).toBe(burst);
  // The oldest were kept, in order; the newest were the ones dropped.
  expect(seen).toEqual(Array.from({ length: seen.length }, (_, i) => i));
  expect((await f.next()).event).toBe("turn_completed");
  await f.cancel();
}, 30_000);

test("streams are bounded, and a client that goes frees its slot", async () => {
  const clients = [];
  for (let i = 0; i < EVENT_STREAMS_MAX; i++) clients.push(await open());
  const refused = await app.request("/events/stream", { headers: auth });
  expect(refused.status).toBe(503);
  expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("too_many_streams");
  for (const c of clients) await c.cancel();
  const again = await open();
  await again.cancel();
}, 30_000);
