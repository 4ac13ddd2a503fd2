// The fleet's file store on one nats-server (R1) and three (R3): a put and a get of a file
// at each size up to the 32 MiB limit (ms and MiB/s, the median of --rounds), and what the
// object collector's listings cost with --objects objects in the bucket (the store's list
// and the unfinished-upload scan, the two reads a pass makes before it decides anything).
// Prints figures; never passes or fails on time.
//   bun bench/files.ts [--rounds 5] [--objects 1000]
import { z } from "zod";
import { benchArgs, countFlag } from "./args.ts";
import { FileStore, MAX_FILE_BYTES } from "../src/objects/store.ts";
import { startNats } from "../test/support/nats.ts";

const { rounds: ROUNDS, objects: OBJECTS } = benchArgs(
  "files",
  "[--rounds 5] [--objects 1000]",
  z.object({ rounds: countFlag(5, 100), objects: countFlag(1000, 100_000) }),
);
const SIZES = [64 * 1024, 1024 * 1024, 8 * 1024 * 1024, MAX_FILE_BYTES];

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

async function measure(members: number): Promise<void> {
  const nats = await startNats(members);
  const nc = await nats.connect();
  try {
    const files = new FileStore({ nc, bucket: "bench_files", replicas: members, creates: true });
    await files.open();
    console.log(`R${members}:`);
    for (const size of SIZES) {
      const data = new Uint8Array(size).map((_, i) => i % 251);
      const puts: number[] = [];
      const gets: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        const key = `fl-${String(size).padStart(12, "0")}${String(r).padStart(12, "0")}`;
        puts.push(await timed(() => files.put(key, data, { name: "bench.bin", content_type: "application/octet-stream" })));
        gets.push(await timed(async () => new Uint8Array(await new Response((await files.get(key))!.data).arrayBuffer())));
      }
      const mib = size / 1024 / 1024;
      console.log(`  ${String(mib.toFixed(2)).padStart(6)} MiB  put ${median(puts).toFixed(1).padStart(7)} ms (${(mib / (median(puts) / 1000)).toFixed(0)} MiB/s)  get ${median(gets).toFixed(1).padStart(7)} ms (${(mib / (median(gets) / 1000)).toFixed(0)} MiB/s)`);
    }
    const small = new Uint8Array(1024);
    for (let i = 0; i < OBJECTS; i++) await files.put(`fl-${String(i).padStart(24, "0")}`, small, { name: "s", content_type: "text/plain" });
    const listed = await timed(() => files.list());
    const scanned = await timed(() => files.unfinished());
    console.log(`  ${OBJECTS + SIZES.length * ROUNDS} objects: list ${listed.toFixed(0)} ms, unfinished-upload scan ${scanned.toFixed(0)} ms`);
  } finally {
    await nc.close();
    await nats.stop();
  }
}

await measure(1);
await measure(3);
