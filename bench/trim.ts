// What the trim's snapshot costs and how fast a copy below the log repairs: a data node's
// estate with N chat records; VACUUM INTO alone (the part that holds the event loop), a
// snapshot taken and uploaded to the object store, the log purged, then a NEW data node
// joining: time until it is level, and the restore's own time from its log lines.
//   bun bench/trim.ts [--records 3000] [--members 1|3]
// Prints figures; passes or fails on nothing.
import { rmSync } from "node:fs";
import { join } from "node:path";
import type { NatsConnection } from "nats";
import { z } from "zod";
import { benchArgs, countFlag, membersFlag } from "./args.ts";
import { startNats } from "../test/support/nats.ts";
import { removeTempDirs, startTestEstate } from "../test/estate/support.ts";

const { records: N, members: MEMBERS } = benchArgs(
  "trim",
  "[--records 3000] [--members 1|3]",
  z.object({ records: countFlag(3_000, 1_000_000), members: membersFlag.default(1) }),
);
const IN_FLIGHT = 32;

const nats = await startNats(MEMBERS);
const conns: NatsConnection[] = [];
const conn = async (i: number) => {
  const nc = await nats.connect({ servers: nats.members[i % MEMBERS]!.url });
  conns.push(nc);
  return nc;
};
const ids = ["a"];
const a = await startTestEstate({ nc: await conn(0), nodeId: "a", replicas: MEMBERS, dataNodes: () => ids });
let written = 0;
const t0 = performance.now();
while (written < N) {
  const batch = Math.min(IN_FLIGHT, N - written);
  await Promise.all(
    Array.from({ length: batch }, (_, i) =>
      a.estate.router.write("chat", { op: "chat.post", channel: "general", author: "carol", body: `bench message ${written + i} ${"x".repeat(200)}`, thread_parent: null, mentions: [], dm: null } as never),
    ),
  );
  written += batch;
}
const last = (await a.estate.stateLog.position("chat")).last_seq;
while (a.estate.copy!.applied("chat") < last) await Bun.sleep(20);
const writeMs = performance.now() - t0;

const copy = a.estate.copy!;
const tmp = join(a.dir, "bench-vacuum.db");
let t = performance.now();
copy.sqlite.run(`VACUUM INTO '${tmp}'`);
const vacuumMs = performance.now() - t;
const bytes = Bun.file(tmp).size;
rmSync(tmp, { force: true });
t = performance.now();
const meta = await a.estate.snapshots!.take(copy.sqlite);
const takeMs = performance.now() - t;
const purged = await a.estate.stateLog.purgeBelow("chat", meta.positions.chat! + 1);

ids.push("b");
t = performance.now();
const b = await startTestEstate({ nc: await conn(1), nodeId: "b", replicas: MEMBERS, dataNodes: () => ids });
while (!(b.estate.copy!.applied("chat") >= last && b.estate.copy!.inService("chat"))) await Bun.sleep(20);
const joinMs = performance.now() - t;
const started = b.sink.events("estate_copy_restore_started")[0]?.ts;
const restored = b.sink.events("estate_copy_restored")[0]?.ts;
const restoreMs = started && restored ? Date.parse(restored) - Date.parse(started) : NaN;

console.log(`members ${MEMBERS} (R${MEMBERS}), chat records ${N} (written in ${(writeMs / 1000).toFixed(1)} s), estate.db snapshot ${(bytes / 1024 / 1024).toFixed(2)} MiB`);
console.log(`VACUUM INTO (holds the event loop): ${vacuumMs.toFixed(0)} ms`);
console.log(`snapshot taken and uploaded: ${takeMs.toFixed(0)} ms; log purged: ${purged} records`);
console.log(`new data node: level and in service ${joinMs.toFixed(0)} ms after its start; the restore itself (started → restored): ${restoreMs} ms`);
console.log(`load average: ${(await Bun.file("/proc/loadavg").text()).split(" ").slice(0, 3).join(" ")}`);

await b.estate.stop();
await a.estate.stop();
for (const nc of conns) await nc.close();
await nats.stop();
removeTempDirs();

