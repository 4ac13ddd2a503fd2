// A listing of a bucket whose keys are being rewritten is whole: every key written before
// the listing is in it. The ordered consumer's end of replay alone is not enough (a key
// rewritten during the replay lost its replayed message and came only after), which a
// busy lease bucket showed as seats and data nodes missing from a sweep's view.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { NatsConnection } from "nats";
import { openBucket, type JetStreamBucket } from "../../src/coord/kv.ts";
import { systemClock } from "../../src/clock.ts";
import { silentLogger } from "../../src/log.ts";
import { startNats, type TestNats } from "../support/nats.ts";

const KEYS = 1_000;
const LISTINGS = 60;

let nats: TestNats;
let nc: NatsConnection;
let bucket: JetStreamBucket;
const value = new TextEncoder().encode("x".repeat(200));
beforeAll(async () => {
  nats = await startNats(1);
  nc = await nats.connect();
  bucket = await openBucket({ nc, clock: systemClock, spec: { name: "listing_test", max_age_ms: 0 }, replicas: 1, timeout_ms: 10_000, log: silentLogger });
  await Promise.all(Array.from({ length: KEYS }, (_, i) => bucket.put(`s.${i}`, value)));
});
afterAll(async () => {
  await nc?.close();
  await nats?.stop();
});

test("a listing made while its keys are rewritten has every key, at a revision no older than before it began", async () => {
  let stop = false;
  // Rewrites as fast as the broker takes them, a few at a time, as renewals arrive.
  const writers = Array.from({ length: 4 }, async () => {
    while (!stop) await bucket.put(`s.${Math.floor(Math.random() * KEYS)}`, value).catch(() => undefined);
  });
  const short: number[] = [];
  try {
    for (let i = 0; i < LISTINGS; i++) {
      const before = await bucket.lastRevision();
      const got = await bucket.entries(">");
      if (got.length < KEYS) short.push(got.length);
      // Whatever the listing shows of a key is no older than the key was when it began.
      expect(Math.max(...got.map((e) => e.revision))).toBeGreaterThanOrEqual(before);
    }
  } finally {
    stop = true;
    await Promise.all(writers);
  }
  expect(short).toEqual([]);
});

test("a listing of a filter nothing matches is empty, at once", async () => {
  expect(await bucket.entries("nothing.>")).toEqual([]);
});
