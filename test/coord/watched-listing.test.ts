// The watched listing (src/coord/watched-listing.ts) on the in-memory bucket: a watch that
// hears is the answer; one that stopped hearing is rebuilt from a listing once it has been
// quiet past the caller's bound, and never trusted past it.
import { expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import type { Bucket } from "../../src/coord/bucket.ts";
import type { KvEntry } from "../../src/coord/contract.ts";
import { MemoryBucket } from "../../src/coord/local.ts";
import { WatchedListing } from "../../src/coord/watched-listing.ts";

const enc = (s: string) => new TextEncoder().encode(s);
const keys = (es: KvEntry[]) => es.map((e) => e.key).join(",");
const FRESH_MS = 1_000;

/** The bucket with a switch that makes every watch started on it deaf from then on, as a
 * watch whose server left goes quiet; listings still answer. */
function deafening(inner: Bucket): { bucket: Bucket; deaf: () => void; listings: () => number } {
  let deaf = false;
  let listings = 0;
  const bucket = Object.create(inner) as Bucket;
  bucket.watch = (onEntry, opts) => inner.watch((e) => (deaf ? undefined : onEntry(e)), opts);
  bucket.entries = (filter) => ((listings += 1), inner.entries(filter));
  return { bucket, deaf: () => void (deaf = true), listings: () => listings };
}

/** Lets the in-memory watch deliver (it delivers asynchronously, in write order). */
const settle = () => new Promise((r) => setTimeout(r, 5));

test("a hearing watch answers without a listing; a deaf one is rebuilt once quiet past the bound", async () => {
  const clock = new FakeClock();
  const inner = new MemoryBucket("t", 0, clock);
  const { bucket, deaf, listings } = deafening(inner);
  const view = new WatchedListing(bucket, "node.>", clock);
  await inner.put("node.a", enc("1"));
  expect(keys(await view.entries(FRESH_MS))).toBe("node.a");
  expect(listings()).toBe(1);

  // Heard: writes arrive through the watch, with no listing.
  await inner.put("node.b", enc("1"));
  await inner.put("other", enc("1"));
  await settle();
  await clock.advance(FRESH_MS / 2);
  expect(keys(await view.entries(FRESH_MS))).toBe("node.a,node.b");
  await inner.delete("node.a");
  await settle();
  expect(keys(await view.entries(FRESH_MS))).toBe("node.b");
  expect(listings()).toBe(1);

  // Deaf: within the bound the view is what it last heard; past it, a listing.
  deaf();
  await inner.put("node.c", enc("1"));
  await settle();
  expect(keys(await view.entries(FRESH_MS))).toBe("node.b");
  await clock.advance(FRESH_MS + 1);
  expect(keys(await view.entries(FRESH_MS))).toBe("node.b,node.c");
  expect(listings()).toBe(2);
  view.stop();
  expect(view.entries(FRESH_MS)).rejects.toThrow(/stopped/);
});

test("a write between the rebuild's watch and its listing is kept, and a removal is not undone by an older listing", async () => {
  const clock = new FakeClock();
  const inner = new MemoryBucket("t", 0, clock);
  await inner.put("node.a", enc("1"));
  await inner.put("node.b", enc("1"));
  const bucket = Object.create(inner) as Bucket;
  // The listing is taken, then (before it is answered) a's removal and c's claim land and
  // the watch delivers them: the stale listing must not bring a back.
  bucket.entries = async (filter) => {
    const snapshot = await inner.entries(filter);
    await inner.delete("node.a");
    await inner.put("node.c", enc("1"));
    await settle();
    return snapshot;
  };
  const view = new WatchedListing(bucket, "node.>", clock);
  expect(keys(await view.entries(FRESH_MS))).toBe("node.b,node.c");
});
