// GET /deadletters (state:read), POST /deadletters/{id}/replay and DELETE /deadletters/{id}
// (fleet:operate) over the memory queue (the conformance suite holds it to the broker's
// behaviour): a poisoned message spends its 25 deliveries, is listed with its reason, is
// replayed (once, even when the replay is retried with its Idempotency-Key) or deleted.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createApp } from "../../src/api/app.ts";
import { TokenAuth } from "../../src/api/auth.ts";
import { deadLettersGroup } from "../../src/api/routes/deadletters.ts";
import { systemClock } from "../../src/clock.ts";
import { MemoryCoordination } from "../../src/coord/index.ts";
import { MAX_DELIVERIES, ack, nak } from "../../src/queue/contract.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { mailbox, streamForSubject } from "../../src/queue/topics.ts";
import { silentLogger } from "../../src/log.ts";

const OPS = "ops-token-0123456789abcdefghij";
const READER = "reader-token-0123456789abcdefg";
const queue = new MemoryQueue({ clock: systemClock, log: silentLogger });
const coord = new MemoryCoordination({ clock: systemClock, log: silentLogger });
const app = createApp({
  auth: new TokenAuth([
    { id: "ops", token: OPS, grants: ["state:read", "fleet:operate"] },
    { id: "reader", token: READER, grants: ["state:read"] },
  ]),
  log: silentLogger,
  health: { health: () => ({}), notReadyReason: () => null },
  groups: [deadLettersGroup(queue)],
  idempotencySlot: coord.node({}).slot("claims"),
});
beforeAll(() => queue.ensureStreams());
afterAll(() => queue.close());

const call = (method: string, path: string, token = OPS, key?: string) =>
  app.request(path, { method, headers: { authorization: `Bearer ${token}`, ...(key ? { "idempotency-key": key } : {}) } });

async function poison(text: string, box: { subject: string; group: string }): Promise<number> {
  await queue.publish(box.subject, new TextEncoder().encode(text), { headers: { "Nats-Expected-Stream": streamForSubject(box.subject)! } });
  for (let i = 0; i < 2_000; i++) {
    const list = (await (await call("GET", "/deadletters")).json()) as { dead_letters: { id: number; data: string }[] };
    const dl = list.dead_letters.find((d) => d.data === text);
    if (dl) return dl.id;
    await Bun.sleep(5);
  }
  throw new Error("never dead-lettered");
}

test("list, replay (idempotently) and delete dead letters, with grants", async () => {
  const box = mailbox("dl-seat", "inbox");
  let healed = false;
  const seen: string[] = [];
  await queue.attach(box.subject, box.group, async (d) => {
    seen.push(new TextDecoder().decode(d.data));
    return healed ? ack() : nak();
  });
  const id = await poison("sick", box);
  const one = await call("GET", `/deadletters/${id}`, READER);
  expect(one.status).toBe(200);
  expect(await one.json()).toMatchObject({ id, original_subject: box.subject, group: box.group, deliveries: MAX_DELIVERIES, reason: "nak", data: "sick", data_encoding: "utf8" });
  expect((await call("POST", `/deadletters/${id}/replay`, READER)).status).toBe(403);
  expect((await call("DELETE", `/deadletters/${id}`, READER)).status).toBe(403);

  healed = true;
  const key = crypto.randomUUID();
  const replay = await call("POST", `/deadletters/${id}/replay`, OPS, key);
  expect(replay.status).toBe(200);
  const first = await replay.json();
  // Retried with its key (its answer was lost): the first answer, not a 404 or a second copy.
  const again = await call("POST", `/deadletters/${id}/replay`, OPS, key);
  expect(again.status).toBe(200);
  expect(await again.json()).toEqual(first);
  for (let i = 0; i < 2_000 && seen.filter((s) => s === "sick").length < MAX_DELIVERIES + 1; i++) await Bun.sleep(5);
  await Bun.sleep(50);
  expect(seen.filter((s) => s === "sick").length).toBe(MAX_DELIVERIES + 1);
  expect((await call("GET", `/deadletters/${id}`)).status).toBe(404);
  // Without a key, a second replay of a replayed dead letter is honest: there is none.
  expect((await call("POST", `/deadletters/${id}/replay`)).status).toBe(404);

  healed = false;
  const id2 = await poison("doomed", box);
  expect((await call("DELETE", `/deadletters/${id2}`)).status).toBe(200);
  expect((await call("DELETE", `/deadletters/${id2}`)).status).toBe(404);
  expect((await call("GET", "/deadletters/zero")).status).toBe(400);
});
