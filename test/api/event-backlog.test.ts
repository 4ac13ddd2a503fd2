// GET /events (the backlog) against a real nats-server: events published before anyone
// asked come back newest first in pages whose `next` chain covers every event once;
// filters by kind, seat and time; a streaming turn's text stays out unless asked for; a
// sparse filter over more than one window still finds what it asks for; the consumers a
// page reads with are gone after it.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { NatsConnection } from "nats";
import { createApp } from "../../src/api/app.ts";
import { TokenAuth } from "../../src/api/auth.ts";
import { BACKLOG_WINDOW } from "../../src/api/event-backlog.ts";
import { eventsGroup } from "../../src/api/routes/events.ts";
import { systemClock } from "../../src/clock.ts";
import { silentLogger } from "../../src/log.ts";
import { JetStreamQueue } from "../../src/queue/jetstream.ts";
import { STREAM_EVENTS } from "../../src/queue/topics.ts";
import { startNats, type TestNats } from "../support/nats.ts";

const TOKEN = "backlog-test-token-0123456789";
const auth = { authorization: `Bearer ${TOKEN}` };
let nats: TestNats;
let nc: NatsConnection;
let queue: JetStreamQueue;
let app: ReturnType<typeof createApp>;

const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

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
  // 30 events: turns of @ceo and @cto in turn, a streamed text among them, and one that is
  // not JSON (skipped).
  for (let i = 0; i < 30; i++) {
    const seat = i % 2 === 0 ? "ceo" : "cto";
    const name = i % 3 === 0 ? "turn_started" : "turn_completed";
    await queue.publish(`crewlet.events.${name}`, enc({ event: name, at: 1_000 + i, seat, n: i }));
    if (i === 10) await queue.publish("crewlet.events.turn_text", enc({ event: "turn_text", at: 1_000, seat, text: "partial" }));
    if (i === 20) await queue.publish("crewlet.events.garbage", new TextEncoder().encode("not json"));
  }
});

afterAll(async () => {
  await nc?.close();
  await nats?.stop();
});

async function get(query: string): Promise<{ status: number; json: any }> {
  const res = await app.request(`/events${query}`, { headers: auth });
  return { status: res.status, json: await res.json() };
}

test("the backlog needs a token with state:read, and names a bad query field", async () => {
  expect((await app.request("/events")).status).toBe(401);
  const bad = await get("?limit=0");
  expect(bad.status).toBe(400);
  expect(bad.json.error.message).toContain("query.limit");
  expect((await get("?kind=a*b")).json.error.field).toBe("kind");
  expect((await get("?seat=Not%20A%20Handle")).json.error.field).toBe("seat");
});

test("pages newest first; following next covers every event once; live-only text and non-events are left out", async () => {
  const seen: number[] = [];
  let before: number | null | undefined;
  for (let page = 0; page < 10; page++) {
    const { status, json } = await get(`?limit=7${before ? `&before=${before}` : ""}`);
    expect(status).toBe(200);
    expect(json.events.length).toBeLessThanOrEqual(7);
    for (const e of json.events) {
      expect(e.name).not.toBe("turn_text");
      expect(e.body.event).toBe(e.name);
      seen.push(e.body.n);
    }
    const seqs = json.events.map((e: any) => e.seq);
    expect(seqs).toEqual([...seqs].sort((a: number, b: number) => b - a));
    before = json.next;
    if (before === null) break;
  }
  expect(before).toBeNull();
  expect(seen).toEqual(Array.from({ length: 30 }, (_, i) => 29 - i));
});

test("filters: by kind (turn_text when asked), by seat, by time", async () => {
  const started = (await get("?kind=turn_started&limit=200")).json.events;
  expect(started.map((e: any) => e.body.n)).toEqual([27, 24, 21, 18, 15, 12, 9, 6, 3, 0]);
  const text = (await get("?kind=turn_text")).json.events;
  expect(text.length).toBe(1);
  expect(text[0].body.text).toBe("partial");
  const cto = (await get("?seat=cto&limit=200")).json;
  expect(cto.events.length).toBe(15);
  expect(cto.events.every((e: any) => e.body.seat === "cto")).toBe(true);
  expect(cto.next).toBeNull();
  // Time is the stream's: everything here is recent, nothing is from the future.
  expect((await get(`?since=${Date.now() - 3_600_000}&limit=200`)).json.events.length).toBe(30);
  const future = await get(`?since=${Date.now() + 3_600_000}`);
  expect(future.json.events).toEqual([]);
  expect(future.json.next).toBeNull();
});

test("a sparse filter reaches back across windows, and no consumer is left behind", async () => {
  // More than two windows of other events after one event of @pm.
  await queue.publish("crewlet.events.turn_started", enc({ event: "turn_started", at: 5_000, seat: "pm", marker: "old" }));
  const burst = BACKLOG_WINDOW * 2 + 50;
  await Promise.all(Array.from({ length: burst }, (_, i) => queue.publish("crewlet.events.tool_called", enc({ event: "tool_called", seat: "engineer", i }))));
  const pm = (await get("?seat=pm")).json;
  expect(pm.events.length).toBe(1);
  expect(pm.events[0].body.marker).toBe("old");
  // A full page of the burst: the newest 200, then the page before them.
  const page = (await get("?kind=tool_called&limit=200")).json;
  expect(page.events.length).toBe(200);
  expect(page.events[0].body.i).toBeGreaterThanOrEqual(0);
  const older = (await get(`?kind=tool_called&limit=200&before=${page.next}`)).json;
  expect(older.events[0].seq).toBeLessThan(page.events[199].seq);
  const jsm = await nc.jetstreamManager();
  const left = await jsm.consumers.list(STREAM_EVENTS).next();
  expect(left.length).toBe(0);
}, 60_000);
