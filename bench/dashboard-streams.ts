// bun bench/dashboard-streams.ts [--posts 200] [--events 20000]
//
// Prints, on a real nats-server and a real estate copy (one box, loopback):
//   - live chat: a POST to a channel → its `messages` frame on GET /chat/channels/{id}/stream
//     (p50 / p95 / max over N posts, one at a time): what replaced the dashboard's 3 s poll;
//   - the events backlog: GET /events?limit=50 over a stream of N events, newest page, a page
//     filtered by kind, and a page filtered by a seat that has one event in every 500 (the
//     sparse case that walks back over many windows; bounded by BACKLOG_SCAN_MAX).
// Figures only: nothing here passes or fails on time.
import { z } from "zod";
import { benchArgs, countFlag } from "./args.ts";
import { createApp } from "../src/api/app.ts";
import { TokenAuth } from "../src/api/auth.ts";
import { chatStreamGroup } from "../src/api/routes/chat-stream.ts";
import { eventsGroup } from "../src/api/routes/events.ts";
import { systemClock } from "../src/clock.ts";
import { GRANTS } from "../src/config/tier-a.ts";
import { silentLogger } from "../src/log.ts";
import { JetStreamQueue } from "../src/queue/jetstream.ts";
import { removeTempDirs, startTestEstate } from "../test/estate/support.ts";
import { startNats } from "../test/support/nats.ts";

const { posts: POSTS, events: EVENTS } = benchArgs(
  "dashboard-streams",
  "[--posts 200] [--events 20000]",
  z.object({ posts: countFlag(200, 100_000), events: countFlag(20_000, 1_000_000) }),
);
/** One seat's events are this sparse in the backlog's sparse case. */
const SPARSE_EVERY = 500;
const TOKEN = "bench-dashboard-token-0123456789";
const auth = { authorization: `Bearer ${TOKEN}` };

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}
const ms = (v: number) => `${v.toFixed(1)} ms`;

const nats = await startNats(1);
const nc = await nats.connect();
const queue = new JetStreamQueue({ nc, replicas: 1, clock: systemClock, log: silentLogger });
await queue.ensureStreams();
const node = await startTestEstate({ nc, nodeId: "a", dataNodes: () => ["a"] });
const app = createApp({
  auth: new TokenAuth([{ id: "ops", token: TOKEN, grants: GRANTS }]),
  log: silentLogger,
  health: { health: () => ({}), notReadyReason: () => null },
  groups: [...node.estate.routeGroups, chatStreamGroup({ nc, router: node.estate.router, clock: systemClock, log: silentLogger }), eventsGroup({ nc, clock: systemClock, log: silentLogger })],
});

try {
  // ---- live chat
  const res = await app.request("/chat/channels/general/stream", { headers: auth });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  const seen = new Map<string, number>();
  let waiting = null as ((id: string) => void) | null;
  void (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const raw = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (!raw.startsWith("event: messages")) continue;
        const data = JSON.parse(/^data: (.*)$/m.exec(raw)![1]!) as { messages: { body: string }[] };
        for (const m of data.messages) {
          seen.set(m.body, performance.now());
          waiting?.(m.body);
        }
      }
    }
  })();
  const lat: number[] = [];
  for (let i = 0; i < POSTS; i++) {
    const body = `bench ${i}`;
    const arrived = new Promise<void>((resolve) => {
      waiting = (b) => b === body && resolve();
    });
    const t0 = performance.now();
    const r = await app.request("/chat/channels/general/messages", { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ body, author: "alice" }) });
    if (r.status !== 200 && r.status !== 202) throw new Error(`post answered ${r.status}`);
    await arrived;
    lat.push(seen.get(body)! - t0);
  }
  await reader.cancel();
  lat.sort((a, b) => a - b);
  console.log(`chat: POST → messages frame over ${POSTS} posts: p50 ${ms(quantile(lat, 0.5))}, p95 ${ms(quantile(lat, 0.95))}, max ${ms(lat[lat.length - 1]!)}`);

  // ---- events backlog
  const enc = new TextEncoder();
  for (let i = 0; i < EVENTS; i += 500) {
    await Promise.all(
      Array.from({ length: Math.min(500, EVENTS - i) }, (_, k) => {
        const n = i + k;
        const seat = n % SPARSE_EVERY === 0 ? "rare" : `seat-${n % 20}`;
        const name = n % 4 === 0 ? "turn_completed" : "tool_called";
        return queue.publish(`crewlet.events.${name}`, enc.encode(JSON.stringify({ event: name, at: Date.now(), seat, n })));
      }),
    );
  }
  async function page(query: string): Promise<{ ms: number; events: number; next: unknown }> {
    const t0 = performance.now();
    const r = await app.request(`/events?${query}`, { headers: auth });
    const json = (await r.json()) as { events: unknown[]; next: unknown };
    return { ms: performance.now() - t0, events: json.events.length, next: json.next };
  }
  for (const [what, q] of [
    ["newest 50", "limit=50"],
    ["newest 50 turn_completed", "limit=50&kind=turn_completed"],
    [`seat with 1 in ${SPARSE_EVERY}`, "limit=50&seat=rare"],
  ] as const) {
    const runs = [];
    for (let i = 0; i < 5; i++) runs.push(await page(q));
    const t = runs.map((r) => r.ms).sort((a, b) => a - b);
    console.log(`events backlog over ${EVENTS} events, ${what}: median ${ms(quantile(t, 0.5))}, max ${ms(t[t.length - 1]!)} (${runs[0]!.events} events, next ${runs[0]!.next === null ? "none" : "given"})`);
  }
} finally {
  await node.estate.stop();
  await nc.close();
  await nats.stop();
  removeTempDirs();
}
