// Does a bucket listing ever come back short? A three-member R3 bucket holds a few keys
// rewritten now and then (as presence rows are, each heartbeat) beside many rewritten all
// the time (as seat leases are renewed); listings of the few and of everything run
// throughout, and each is checked against the keys known to be there (none is deleted).
// Prints how many listings were short and what they missed; exits 0 either way (a figure).
//   bun bench/kv-listing.ts [--seconds 60] [--keys 2000] [--writes 400]
import { z } from "zod";
import { benchArgs, countFlag } from "./args.ts";
import { openBucket } from "../src/coord/kv.ts";
import { systemClock } from "../src/clock.ts";
import { silentLogger } from "../src/log.ts";
import { startNats } from "../test/support/nats.ts";

const args = benchArgs(
  "kv-listing",
  "[--seconds 60] [--keys 2000] [--writes 400 (puts a second)]",
  z.object({ seconds: z.coerce.number().positive().max(3600).default(60), keys: countFlag(2000, 20_000), writes: countFlag(400, 10_000) }),
);
const QUIET = ["p.a", "p.b", "p.c", "p.l"];
/** One of the few keys is rewritten this often: each every second, as heartbeats go on a busy fleet. */
const QUIET_EVERY_MS = 250;

const nats = await startNats(3);
const nc = await nats.connect({ name: "kv-listing" });
const bucket = await openBucket({ nc, clock: systemClock, spec: { name: "listing_probe", max_age_ms: 0 }, replicas: 3, timeout_ms: 10_000, log: silentLogger });
const value = new TextEncoder().encode("x".repeat(200));
for (const k of QUIET) await bucket.put(k, value);
for (let i = 0; i < args.keys; i++) await bucket.put(`s.${i}`, value);
console.log(`kv-listing: ${args.keys} busy keys + ${QUIET.length} rewritten each second, R3 on 3 members, ${args.writes} puts/s, ${args.seconds} s`);

let stop = false;
let puts = 0;
let beats = 0;
const beat = setInterval(() => void bucket.put(QUIET[beats++ % QUIET.length]!, value).catch(() => undefined), QUIET_EVERY_MS);
const writer = (async () => {
  const every = 1000 / args.writes;
  let next = Date.now();
  while (!stop) {
    const i = Math.floor(Math.random() * args.keys);
    void bucket.put(`s.${i}`, value).then(() => puts++, () => undefined);
    next += every;
    const wait = next - Date.now();
    if (wait > 0) await Bun.sleep(wait);
  }
})();

const tally = { few: { n: 0, short: 0, empty: 0, failed: 0 }, all: { n: 0, short: 0, empty: 0, failed: 0 } };
const until = Date.now() + args.seconds * 1000;
while (Date.now() < until) {
  for (const [kind, filter, want] of [["few", "p.>", QUIET.length], ["all", ">", QUIET.length + args.keys]] as const) {
    const t = tally[kind];
    t.n++;
    try {
      const got = (await bucket.entries(filter)).length;
      if (got < want) {
        t.short++;
        if (got === 0) t.empty++;
        console.log(`  short ${kind} listing: ${got} of ${want}`);
      }
    } catch (err) {
      t.failed++;
    }
  }
}
stop = true;
clearInterval(beat);
await writer;
console.log(`puts landed: ${puts}`);
for (const [kind, t] of Object.entries(tally)) console.log(`${kind}: ${t.n} listings, ${t.short} short (${t.empty} empty), ${t.failed} failed`);
await nc.close();
await nats.stop();
