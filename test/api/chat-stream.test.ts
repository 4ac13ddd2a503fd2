// GET /chat/channels/{id}/stream against a real nats-server and a real estate copy: posts
// to the channel arrive as `messages` frames (others' channels do not); a reconnect with
// the last position misses nothing posted while away; a seat's turn on a thread of the
// channel shows as working, then done or failed; a failure notice names the message; a
// turn that started before the page opened still shows; streams are bounded.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { NatsConnection } from "nats";
import { publishEventSink } from "../../src/agent/events.ts";
import { createApp } from "../../src/api/app.ts";
import { CHAT_STREAMS_MAX, chatStreamGroup } from "../../src/api/routes/chat-stream.ts";
import { systemClock } from "../../src/clock.ts";
import { silentLogger } from "../../src/log.ts";
import { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { OPS_TOKEN, estateApp, removeTempDirs, startTestEstate, type TestEstate } from "../estate/support.ts";

const TEST_TIMEOUT_MS = 60_000;
const TOKEN = OPS_TOKEN;
const auth = { authorization: `Bearer ${TOKEN}` };
let nats: TestNats;
let nc: NatsConnection;
let node: TestEstate;
let queue: JetStreamQueue;
let app: ReturnType<typeof createApp>;

beforeAll(async () => {
  nats = await startNats(1);
  nc = await nats.connect();
  queue = new JetStreamQueue({ nc, replicas: 1, clock: systemClock, log: silentLogger });
  await queue.ensureStreams();
  node = await startTestEstate({ nc, nodeId: "a", dataNodes: () => ["a"] });
  app = estateApp(node, [chatStreamGroup({ nc, router: node.estate.router, clock: systemClock, log: silentLogger })]);
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  await node?.estate.stop();
  await nc?.close();
  await nats?.stop();
  removeTempDirs();
}, TEST_TIMEOUT_MS);

interface Frame {
  event: string;
  data: any;
}

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
          const data = /^data: (.*)$/m.exec(raw)?.[1] ?? "null";
          return { event, data: JSON.parse(data) };
        }
        const { value, done } = await reader.read();
        if (done) throw new Error("the stream ended");
        buffer += value;
      }
    },
    /** The next frame named `event`, skipping others. */
    async nextOf(event: string): Promise<Frame> {
      for (let i = 0; i < 100; i++) {
        const f = await this.next();
        if (f.event === event) return f;
      }
      throw new Error(`no ${event} frame in 100`);
    },
    cancel: () => reader.cancel(),
  };
}

async function open(channel: string, after?: number) {
  const res = await app.request(`/chat/channels/${channel}/stream${after !== undefined ? `?after=${after}` : ""}`, { headers: auth });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
  const f = frames(res);
  const ready = await f.next();
  expect(ready.event).toBe("ready");
  return { f, after: ready.data.after as number };
}

async function post(channel: string, body: string, thread_parent: string | null = null): Promise<{ message_id: string; position: number }> {
  const res = await app.request(`/chat/channels/${channel}/messages`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ body, author: "founder", thread_parent }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as { message_id: string; position: number };
}

test("needs a token; an unknown channel is 404, a bad id 400, a bad position 400", async () => {
  expect((await app.request("/chat/channels/general/stream")).status).toBe(401);
  expect((await app.request("/chat/channels/nope/stream", { headers: auth })).status).toBe(404);
  expect((await app.request("/chat/channels/Bad%20Id/stream", { headers: auth })).status).toBe(400);
  const bad = await app.request("/chat/channels/general/stream?after=-1", { headers: auth });
  expect(bad.status).toBe(400);
  expect(((await bad.json()) as any).error.field).toBe("after");
}, TEST_TIMEOUT_MS);

test("posts to the channel arrive as they are written; another channel's do not; a reconnect from the last position misses nothing", async () => {
  const { f } = await open("general");
  await post("eng", "elsewhere");
  const first = await post("general", "hello @ceo");
  const got = await f.nextOf("messages");
  expect(got.data.messages.map((m: any) => m.body)).toEqual(["hello @ceo"]);
  expect(got.data.messages[0].id).toBe(first.message_id);
  const last = got.data.messages[0].position as number;
  await f.cancel();
  // While away: two posts. Back with the last position: both, in order, nothing twice.
  await post("general", "while away 1");
  await post("general", "while away 2");
  const back = await open("general", last);
  const seen: string[] = [];
  while (seen.length < 2) for (const m of (await back.f.nextOf("messages")).data.messages) seen.push(m.body);
  expect(seen).toEqual(["while away 1", "while away 2"]);
  await back.f.cancel();
}, TEST_TIMEOUT_MS);

test("a turn on a thread of the channel: working, then done; a failed turn and its notice; other channels' turns are not shown", async () => {
  const asked = await post("general", "@cto status?");
  // A turn that started before the page opened still shows as working.
  const sink = publishEventSink(queue, silentLogger, () => Date.now());
  sink.emit("turn_started", { seat: "cto", turn_id: "t-early", conversation: `chat:general:${asked.message_id}` });
  const { f } = await open("general");
  const early = await f.nextOf("turn");
  expect(early.data).toMatchObject({ turn_id: "t-early", seat: "cto", thread: asked.message_id, state: "working" });
  sink.emit("turn_started", { seat: "pm", turn_id: "t-other", conversation: "chat:random:x" });
  sink.emit("turn_completed", { seat: "pm", turn_id: "t-other", outcome: "completed" });
  sink.emit("turn_completed", { seat: "cto", turn_id: "t-early", outcome: "completed", error: null });
  const done = await f.nextOf("turn");
  expect(done.data).toMatchObject({ turn_id: "t-early", seat: "cto", state: "done", outcome: "completed" });

  sink.emit("turn_started", { seat: "cto", turn_id: "t-fail", conversation: `chat:general:${asked.message_id}` });
  expect((await f.nextOf("turn")).data).toMatchObject({ turn_id: "t-fail", state: "working" });
  sink.emit("turn_completed", { seat: "cto", turn_id: "t-fail", outcome: "failed", error: "the model endpoint refused the API key (401)" });
  sink.emit("turn_failure_told", { seat: "cto", turn_id: "t-fail", channel: "random", message_id: "m-x", text: "not this one" });
  sink.emit("turn_failure_told", { seat: "cto", turn_id: "t-fail", channel: "general", message_id: asked.message_id, text: "⚠ I could not answer: the model endpoint refused the API key (401)" });
  const failed = await f.nextOf("turn");
  expect(failed.data).toMatchObject({ turn_id: "t-fail", state: "failed", outcome: "failed", error: "the model endpoint refused the API key (401)" });
  const told = await f.nextOf("failed");
  expect(told.data).toMatchObject({ seat: "cto", message_id: asked.message_id });
  expect(told.data.text).toContain("refused the API key");
  await f.cancel();
}, TEST_TIMEOUT_MS);

test("streams are bounded, and a client that goes frees its slot", async () => {
  const clients = [];
  for (let i = 0; i < CHAT_STREAMS_MAX; i++) clients.push((await open("general")).f);
  const refused = await app.request("/chat/channels/general/stream", { headers: auth });
  expect(refused.status).toBe(503);
  expect(((await refused.json()) as any).error.code).toBe("too_many_streams");
  for (const c of clients) await c.cancel();
  const again = await open("general");
  await again.f.cancel();
}, TEST_TIMEOUT_MS);

test("the router's read floor: at a position the copy has applied it answers; past anything written it says the copy is behind", async () => {
  const posted = await post("general", "floor check");
  const got = await node.estate.router.read({ q: "chat.messages", channel: "general", order: "newest", limit: 1 }, { atLeast: { chat: posted.position } });
  expect(got.messages[0]!.body).toBe("floor check");
  // The copy waits FLOOR_WAIT_MS (2 s) for its applier, then says how far it got.
  await expect(node.estate.router.read({ q: "chat.channels" }, { atLeast: { chat: posted.position + 1_000_000 } })).rejects.toThrow(/behind/);
}, TEST_TIMEOUT_MS);
