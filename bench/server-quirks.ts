// Re-measures, per nats-server release, each server behaviour the code once worked around
// (see the table in issue 10's closing note). Prints what each server did; never fails.
//   bun bench/server-quirks.ts [--only WORD] [--servers PATH,PATH…]
// --only: just the probes whose name has WORD (e.g. --only markers). --servers: the
// nats-server binaries to measure, comma-separated; without it, the pinned release and the
// pinned `previous` one from appliance/cache (scripts/setup.sh and `appliance/fetch-sidecar.sh
// --previous x64` build them). To set 2.9.10 beside them, build it the same way and name all
// three in --servers, e.g.
//   GOBIN=/tmp/old CGO_ENABLED=0 go install -trimpath github.com/nats-io/nats-server/v2@v2.9.10
// Wall times use Date.now(): these are seconds-scale gaps on loopback, and nothing here
// schedules product work (the product clock is src/clock.ts).
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { createInbox, headers as natsHeaders, type NatsConnection } from "nats";
import { z } from "zod";
import { benchArgs } from "./args.ts";
import { hostArch } from "../src/broker/elf.ts";
import { cachedSidecarPath, sidecarManifest } from "../src/broker/manifest.ts";
import { startNats } from "../test/support/nats.ts";

const args = benchArgs(
  "server-quirks",
  "[--only WORD (default: all probes)] [--servers PATH,PATH… (default: the pinned and previous releases)]",
  z.object({
    only: z.string().min(1).optional(),
    servers: z
      .string()
      .transform((s) => s.split(","))
      .pipe(z.array(z.string().min(1, "a path, comma-separated").refine(existsSync, "no such file")))
      .optional(),
  }),
);

/** Generous bound on one consumer start; a healthy one answers in single-digit ms. */
const START_WITHIN_MS = 3_000;
/** How long the hedge probe keeps starting consumers after the kill (2.9.10 never recovered in 40 s). */
const HEDGE_PROBE_MS = 20_000;
/** Pause between probe starts, so the count measures placement, not a flood of consumers. */
const HEDGE_PAUSE_MS = 100;
/** Consumers created for the LIST probe: one past the API's 256-entry page. */
const LIST_CONSUMERS = 300;
/** How long a restarted member is watched for a full /healthz. */
const HEALTHZ_WITHIN_MS = 30_000;
/** Racing creates per key and keys for the compare-and-set probe. */
const CAS_RACERS = 6;
const CAS_KEYS = 20;

/** `--only WORD`: run the probes whose name has WORD (e.g. --only markers). */
const only = args.only ?? null;

function servers(): string[] {
  if (args.servers) return args.servers;
  const m = sidecarManifest();
  return [cachedSidecarPath(m.previous.version, hostArch()), cachedSidecarPath(m.version, hostArch())].filter((p) => existsSync(p));
}

function versionOf(bin: string): string {
  return /v?(\d+\.\d+\.\d+)/.exec(execFileSync(bin, ["--version"]).toString())?.[1] ?? bin;
}

/** Hedged consumer starts: with one member of three SIGKILLed, how many KV watch starts never answer? */
async function consumerStarts(): Promise<string> {
  const nats = await startNats(3);
  try {
    const nc = await nats.connect({ servers: nats.members[0]!.url });
    const kv = await nc.jetstream().views.kv("quirk", { replicas: 3, history: 1 });
    for (let i = 0; i < 20; i++) await kv.put(`k${i}`, "v");
    const leader = (await (await nc.jetstreamManager()).streams.info("KV_quirk")).cluster?.leader;
    const victim = nats.members.find((m) => m.name !== leader && m !== nats.members[0])!;
    await victim.kill();
    const t0 = Date.now();
    let starts = 0;
    const never: string[] = [];
    while (Date.now() - t0 < HEDGE_PROBE_MS) {
      starts += 1;
      const at = Date.now() - t0;
      const initialized = Promise.withResolvers<void>();
      const ok = await Promise.race([
        kv.watch({ key: ">", initializedFn: () => initialized.resolve() }).then(async (it) => {
          void (async () => {
            for await (const _ of it) {
              // drained so the snapshot completes
            }
          })().catch(() => undefined);
          await initialized.promise;
          it.stop();
          return true;
        }),
        Bun.sleep(START_WITHIN_MS).then(() => false),
      ]).catch(() => false);
      if (!ok) never.push((at / 1000).toFixed(1));
      await Bun.sleep(HEDGE_PAUSE_MS);
    }
    await nc.close();
    return `${never.length}/${starts} starts unanswered in ${START_WITHIN_MS / 1000} s${never.length ? ` (at ${never.slice(0, 8).join(", ")}${never.length > 8 ? ", …" : ""} s after the kill)` : ""}`;
  } finally {
    await nats.stop();
  }
}

/** /healthz after a member restarts: js-server-only, and the full check (every replica current). */
async function healthzAfterRestart(): Promise<string> {
  const nats = await startNats(3);
  try {
    const nc = await nats.connect({ servers: nats.members[0]!.url });
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: "S", subjects: ["s.>"], num_replicas: 3, retention: "interest" as never });
    for (let i = 0; i < 12; i++) await jsm.consumers.add("S", { durable_name: `c${i}`, ack_policy: "explicit" as never, filter_subject: `s.${i}` });
    const victim = nats.members[2]!;
    const status = async (q: string) => (await fetch(`http://127.0.0.1:${victim.monitor}/healthz${q}`).catch(() => null))?.status ?? 0;
    await victim.kill();
    await Bun.sleep(1_000);
    const t0 = Date.now();
    victim.restart().catch(() => undefined); // polled here, not by the harness
    let jsOnly = -1;
    let full = -1;
    while (Date.now() - t0 < HEALTHZ_WITHIN_MS && (jsOnly < 0 || full < 0)) {
      if (jsOnly < 0 && (await status("?js-server-only=true")) === 200) jsOnly = Date.now() - t0;
      if (full < 0 && (await status("")) === 200) full = Date.now() - t0;
      await Bun.sleep(100);
    }
    await nc.close();
    const t = (ms: number) => (ms < 0 ? `never in ${HEALTHZ_WITHIN_MS / 1000} s` : `${(ms / 1000).toFixed(1)} s`);
    return `js-server-only ${t(jsOnly)}, full ${t(full)}`;
  } finally {
    await nats.stop();
  }
}

/** Consumer LIST on a cluster: does it page past 256? */
async function consumerList(): Promise<string> {
  const nats = await startNats(3);
  try {
    const nc = await nats.connect();
    const jsm = await nc.jetstreamManager({ timeout: 20_000 });
    await jsm.streams.add({ name: "L", subjects: ["l.>"], num_replicas: 3 });
    for (let i = 0; i < LIST_CONSUMERS; i += 25) {
      await Promise.all(Array.from({ length: Math.min(25, LIST_CONSUMERS - i) }, (_, k) => jsm.consumers.add("L", { durable_name: `c${i + k}`, ack_policy: "explicit" as never, filter_subject: `l.${i + k}`, num_replicas: 1 })));
    }
    let listed = 0;
    for await (const _ of jsm.consumers.list("L")) listed += 1;
    await nc.close();
    return `LIST gives ${listed} of ${LIST_CONSUMERS}`;
  } finally {
    await nats.stop();
  }
}

/** Racing KV creates on R3: which API error codes do the losers get? */
async function casCodes(): Promise<string> {
  const nats = await startNats(3);
  try {
    const ncs: NatsConnection[] = [await nats.connect(), await nats.connect()];
    const kvs = await Promise.all(ncs.map((nc) => nc.jetstream().views.kv("cas", { replicas: 3, history: 1 })));
    const codes = new Map<string, number>();
    for (let k = 0; k < CAS_KEYS; k++) {
      const rs = await Promise.allSettled(Array.from({ length: CAS_RACERS }, (_, i) => kvs[i % 2]!.create(`k${k}`, "x")));
      for (const r of rs) {
        if (r.status !== "rejected") continue;
        const code = String((r.reason as { api_error?: { err_code?: number } }).api_error?.err_code ?? "none");
        codes.set(code, (codes.get(code) ?? 0) + 1);
      }
    }
    for (const nc of ncs) await nc.close();
    return [...codes].map(([c, n]) => `${n}× ${c}`).join(", ");
  } finally {
    await nats.stop();
  }
}

/** Writes to an R3 stream after its leader is SIGKILLed, and after a graceful stepdown. */
async function electionGap(mode: "kill" | "stepdown"): Promise<number> {
  const nats = await startNats(3);
  try {
    const nc = await nats.connect({ servers: nats.members[0]!.url });
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: "E", subjects: ["e.>"], num_replicas: 3 });
    let leader = (await jsm.streams.info("E")).cluster?.leader;
    if (leader === nats.members[0]!.name) {
      // Keep the client's own member alive through a kill.
      await nc.request("$JS.API.STREAM.LEADER.STEPDOWN.E", "", { timeout: 5_000 });
      for (let i = 0; i < 50 && (leader === nats.members[0]!.name || !leader); i++) {
        await Bun.sleep(100);
        leader = (await jsm.streams.info("E").catch(() => null))?.cluster?.leader;
      }
    }
    const js = nc.jetstream({ timeout: 500 });
    await js.publish("e.x", "warm");
    const t0 = Date.now();
    if (mode === "kill") await nats.members.find((m) => m.name === leader)!.kill();
    else nc.request("$JS.API.STREAM.LEADER.STEPDOWN.E", "", { timeout: 5_000 }).catch(() => undefined);
    let failedAt = -1;
    let okAfter = 0;
    while (Date.now() - t0 < 30_000) {
      try {
        await js.publish("e.x", "w");
        okAfter = Date.now() - t0;
        if (failedAt >= 0 || okAfter > 1_000) break;
      } catch {
        if (failedAt < 0) failedAt = Date.now() - t0;
      }
      await Bun.sleep(20);
    }
    await nc.close();
    return failedAt < 0 ? 0 : okAfter;
  } finally {
    await nats.stop();
  }
}

/** A frozen follower's rejoin: how long writes fail after it resumes. Frozen past several
 * election timeouts (4–9 s), it wakes behind the leader with its timer fired and campaigns at
 * a higher term, which deposes a leader that did nothing wrong (nats-server raft has no
 * pre-vote). A network cut that heals does the same, with a term raised once per timeout. */
const REJOIN_FROZEN_MS = 20_000;
const REJOIN_TRIALS = 6;

async function rejoinGaps(): Promise<string> {
  const gaps: number[] = [];
  for (let i = 0; i < REJOIN_TRIALS; i++) gaps.push(await rejoinGap());
  const sorted = [...gaps].sort((a, b) => a - b);
  return `${gaps.join(", ")} ms (max ${sorted[sorted.length - 1]} ms over ${REJOIN_TRIALS} trials)`;
}

async function rejoinGap(): Promise<number> {
  const nats = await startNats(3);
  try {
    const nc = await nats.connect({ servers: nats.members[0]!.url });
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: "E", subjects: ["e.>"], num_replicas: 3 });
    const leader = (await jsm.streams.info("E")).cluster?.leader;
    const follower = nats.members.find((m) => m.name !== leader && m !== nats.members[0])!;
    const js = nc.jetstream({ timeout: 500 });
    // Writes go on while it is frozen, so it wakes behind and cannot win the election it starts.
    let writing = true;
    let lastOk = Date.now();
    let longest = 0;
    let resumed = Number.POSITIVE_INFINITY;
    const writer = (async () => {
      while (writing) {
        try {
          await js.publish("e.x", "w");
          const now = Date.now();
          if (now > resumed) longest = Math.max(longest, now - lastOk);
          lastOk = now;
        } catch {
          // counted by the gap to the next success
        }
        await Bun.sleep(20);
      }
    })();
    follower.proc.kill("SIGSTOP");
    await Bun.sleep(REJOIN_FROZEN_MS);
    resumed = Date.now();
    follower.proc.kill("SIGCONT");
    await Bun.sleep(25_000);
    writing = false;
    await writer;
    await nc.close();
    return longest;
  } finally {
    await nats.stop();
  }
}

/** A pull left waiting by a client that then went away: does the next message strand on it? */
async function abandonedPull(): Promise<string> {
  const nats = await startNats(3);
  try {
    const admin = await nats.connect({ servers: nats.members[0]!.url });
    const jsm = await admin.jetstreamManager();
    await jsm.streams.add({ name: "P", subjects: ["p.>"], num_replicas: 3, retention: "interest" as never });
    await jsm.consumers.add("P", { durable_name: "d", ack_policy: "explicit" as never, filter_subject: "p.x", ack_wait: 60e9, num_replicas: 3 });
    const leader = (await jsm.consumers.info("P", "d")).cluster?.leader;
    const away = nats.members.find((m) => m.name !== leader)!;
    const gone = await nats.connect({ servers: away.url });
    gone.publish("$JS.API.CONSUMER.MSG.NEXT.P.d", JSON.stringify({ batch: 1, expires: 20e9 }), { reply: createInbox() });
    await gone.flush();
    await Bun.sleep(300);
    await gone.close();
    await Bun.sleep(300);
    await admin.jetstream().publish("p.x", "m");
    const next = await nats.connect({ servers: away.url });
    const inbox = createInbox();
    const sub = next.subscribe(inbox, { max: 1 });
    next.publish("$JS.API.CONSUMER.MSG.NEXT.P.d", JSON.stringify({ batch: 1, expires: 3e9 }), { reply: inbox });
    let verdict = "the next pull got nothing";
    for await (const m of sub) verdict = m.data.length > 0 ? "the next pull got it" : `the next pull ended ${m.headers?.code}`;
    await next.close();
    await admin.close();
    return verdict;
  } finally {
    await nats.stop();
  }
}

/** Keys the marker probe writes, a second apart, and the TTL each lapses at. */
const MARKER_KEYS = 8;
const MARKER_TTL_MS = 3_000;
/** The shortest a delete marker may live (the server refuses less than a second). */
const MARKER_LIFE_S = 1;

/**
 * KV expiry with subject delete markers (2.11+: `allow_msg_ttl`, `subject_delete_marker_ttl`):
 * keys written to a KV stream whose markers are on, one lapsing by the bucket's age
 * (max_age = TTL, how the lease bucket ages) and one by a per-message `Nats-TTL` on a
 * bucket with no age. How long after its TTL does a KV watcher hear of the lapse, and what
 * does nats.js 2.29.3 hand it — and what does a KV get answer while the marker stands?
 */
async function expiryMarkers(members: number): Promise<string> {
  const nats = await startNats(members);
  try {
    const nc = await nats.connect();
    const jsm = await nc.jetstreamManager();
    const js = nc.jetstream();
    const bucket = async (name: string, max_age_ms: number) => {
      await jsm.streams.add({
        name: `KV_${name}`,
        subjects: [`$KV.${name}.>`],
        num_replicas: members,
        max_msgs_per_subject: 1,
        max_age: max_age_ms * 1e6,
        discard: "new" as never,
        allow_rollup_hdrs: true,
        deny_delete: true,
        allow_direct: false,
        // The 2.11 settings nats.js 2.29.3 has no names for.
        ...({ allow_msg_ttl: true, subject_delete_marker_ttl: MARKER_LIFE_S * 1e9 } as object),
      });
      return js.views.kv(name, { bindOnly: true, allow_direct: false });
    };
    const aged = await bucket("mk_age", MARKER_TTL_MS);
    const perMsg = await bucket("mk_ttl", 0);
    const late = new Map<string, number[]>([["age", []], ["ttl", []]]);
    const seenAs = new Set<string>();
    const written = new Map<string, number>();
    const watchers = [
      ["age", aged],
      ["ttl", perMsg],
    ] as const;
    for (const [kind, kv] of watchers) {
      const it = await kv.watch({ key: ">", include: "updates" as never });
      void (async () => {
        for await (const e of it) {
          const at = written.get(`${kind}/${e.key}`);
          const hdr = (e as unknown as { sm?: { header?: { get(k: string): string } } }).sm?.header;
          const reason = hdr?.get("Nats-Marker-Reason") ?? "";
          if (at === undefined || e.value.length > 0) continue; // the write itself
          seenAs.add(`${e.operation} with ${e.value.length} bytes${reason ? `, Nats-Marker-Reason ${reason}` : ""}`);
          late.get(kind)!.push(Date.now() - (at + MARKER_TTL_MS));
        }
      })().catch(() => undefined);
    }
    let getDuring = "";
    for (let i = 0; i < MARKER_KEYS; i++) {
      const k = `k${i}`;
      await aged.put(k, "lease");
      written.set(`age/${k}`, (await aged.get(k))!.created.getTime());
      const h = natsHeaders();
      h.set("Nats-TTL", `${MARKER_TTL_MS / 1000}s`);
      const ack = await js.publish(`$KV.mk_ttl.${k}`, "lease", { headers: h });
      written.set(`ttl/${k}`, (await perMsg.get(k, { revision: ack.seq }))!.created.getTime());
      await Bun.sleep(1_000 / 2);
    }
    const deadline = Date.now() + MARKER_TTL_MS + 15_000;
    while (Date.now() < deadline && [...late.values()].some((l) => l.length < MARKER_KEYS)) {
      if (!getDuring && late.get("age")!.length > 0) {
        const e = await aged.get("k0").catch((err) => err as Error);
        getDuring = e instanceof Error ? `error ${e.message}` : e === null ? "null" : `${e.operation}, ${e.value.length} bytes`;
      }
      await Bun.sleep(20);
    }
    await nc.close();
    const fig = (kind: string) => {
      const l = late.get(kind)!.sort((a, b) => a - b);
      if (l.length === 0) return "never heard";
      return `${l.length}/${MARKER_KEYS} heard, after TTL +${l[0]}..+${l[l.length - 1]} ms (median +${l[Math.floor(l.length / 2)]})`;
    };
    return `age: ${fig("age")}; Nats-TTL: ${fig("ttl")}; the watcher sees ${[...seenAs].join(" / ") || "nothing"}; get during the marker: ${getDuring || "not asked"}`;
  } finally {
    await nats.stop();
  }
}

const bins = servers();
if (bins.length === 0) throw new Error("no nats-server to measure: run scripts/setup.sh, or pass --servers");
const versions = bins.map(versionOf);
const probes: [string, () => Promise<string>][] = [
  [`KV watch starts, 1 of 3 members SIGKILLed, ${HEDGE_PROBE_MS / 1000} s`, consumerStarts],
  ["/healthz on a restarted member (12 idle R3 consumers)", healthzAfterRestart],
  [`consumer LIST on a cluster, ${LIST_CONSUMERS} consumers`, consumerList],
  [`${CAS_RACERS} racing KV creates ×${CAS_KEYS} on R3: losers' API error codes`, casCodes],
  ["R3 stream leader SIGKILLed: writes fail for", async () => `${await electionGap("kill")} ms`],
  ["R3 stream leader stepped down: writes fail for", async () => `${await electionGap("stepdown")} ms`],
  [`R3 stream follower frozen ${REJOIN_FROZEN_MS / 1000} s, then resumed: writes fail for`, rejoinGaps],
  ["pull left by a client that disconnected (R3)", abandonedPull],
  [`KV expiry with delete markers, TTL ${MARKER_TTL_MS / 1000} s, R1`, () => expiryMarkers(1)],
  [`KV expiry with delete markers, TTL ${MARKER_TTL_MS / 1000} s, R3`, () => expiryMarkers(3)],
];
console.log(`server quirks — loopback, 3-member clusters; servers: ${versions.join(", ")} (a shared, loaded 2-core box: seconds-scale gaps are indicative)`);
for (const [name, probe] of probes) {
  if (only !== null && !name.includes(only)) continue;
  const cells: string[] = [];
  for (const bin of bins) {
    process.env.CREWLET_NATS_SERVER = bin;
    cells.push(await probe().catch((err) => `error: ${(err as Error).message}`));
  }
  console.log(`\n${name}`);
  for (let i = 0; i < bins.length; i++) console.log(`  ${versions[i]!.padEnd(8)} ${cells[i]}`);
}
