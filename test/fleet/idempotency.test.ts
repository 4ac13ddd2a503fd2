// Issue 12, items 4 and 5 on real `crewlet run` processes: while a node boots, its routes
// answer 503 "starting" with Retry-After (never 404); a chat post retried with its
// Idempotency-Key on the other node (a member holding data, a leaf holding none) answers
// the first outcome and writes one message.
import { afterAll, expect, test } from "bun:test";
import { makeFleet, TEST_TOKEN, type Fleet } from "../support/fleet.ts";

let fleet: Fleet;
afterAll(async () => {
  await fleet?.stop();
});

const company = { name: "Acme", roles: [{ name: "Pat", handle: "pat", kind: "human" }] };

function post(url: string, path: string, body: unknown, key: string) {
  return fetch(`${url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${TEST_TOKEN}`, "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(70_000),
  });
}

test("booting answers 503 starting; a keyed retry on another node is the first outcome, one message", async () => {
  fleet = await makeFleet({ nodes: [{ id: "hub", kind: "member" }, { id: "l1", kind: "leaf" }], company });
  const hub = fleet.node("hub");
  const leaf = fleet.node("l1");
  await hub.start();
  // Every answer before ready is 503 "starting" with Retry-After, never a 404.
  const during: number[] = [];
  const deadline = Date.now() + 60_000;
  for (;;) {
    const res = await fetch(`${hub.apiUrl}/chat/channels`, { headers: { authorization: `Bearer ${TEST_TOKEN}` } }).catch(() => null);
    if (res) {
      if (res.status === 200) break;
      during.push(res.status);
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).not.toBeNull();
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("starting");
    }
    if (Date.now() > deadline) throw new Error("hub never served");
    await Bun.sleep(20);
  }
  await hub.waitReady(60_000);
  await leaf.start();
  await leaf.waitReady(60_000);

  const key = crypto.randomUUID();
  const first = await post(hub.apiUrl, "/chat/channels/general/messages", { body: "exactly once", author: "pat" }, key);
  expect(first.status).toBe(200);
  const a = (await first.json()) as { message_id: string };
  const again = await post(leaf.apiUrl, "/chat/channels/general/messages", { body: "exactly once", author: "pat" }, key);
  expect(again.status).toBe(200);
  expect(((await again.json()) as { message_id: string }).message_id).toBe(a.message_id);
  const res = await hub.get("/chat/channels/general/messages?limit=500");
  const { messages } = (await res.json()) as { messages: { body: string }[] };
  expect(messages.filter((m) => m.body === "exactly once").length).toBe(1);
  console.log(`boot: ${during.length} answers before ready, all 503 starting`);
}, 180_000);
