// bun bench/upgrade.ts [--from 004748c^] [--messages 3] [--signal SIGTERM|SIGKILL] [--paused-seconds 40]
//
// "Upgrades are a binary swap", tried as a user would, with compiled binaries. An older
// build's x64 binary (built from --from in a temp worktree sharing this tree's node_modules)
// runs the repository's one-box company on a scratch store; @ceo is paused and --messages
// mentions are posted, and wait in the older build's mailbox. The older node is stopped with
// --signal (SIGTERM drains it; SIGKILL is a crash, which can leave a delivery in its hands)
// and this tree's binary (dist/, built here) starts on the same store. @ceo stays paused for
// --paused-seconds with its mail waiting — past two of the deaf-seat watch's 15 s checks,
// and /ready must stay 200 throughout, for a pause is no deafness — and is then resumed.
// Each message must be answered exactly once, in its own thread. The default --from is the
// last build before the mail shards (lease protocol 4), so the swap crosses the legacy-mail
// forwarding (src/queue/legacy-mail.ts); a --from on the interest-retained shards (lease
// protocol 5 to 7) crosses it from those.
//
// Prints the times from the new binary's exec to ready, to the legacy_mail_forwarded line
// that deleted the last of the older build's mail streams, and to the last answer; exits 1 when a message is unanswered or answered twice, or /ready
// failed while paused. Needs the older ref's package.json and lockfile to match this tree's
// (it shares node_modules).
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { z } from "zod";
import { benchArgs, countFlag, wholeFlag } from "./args.ts";
import { systemClock } from "../src/clock.ts";
import { LEGACY_MAIL_STREAMS } from "../src/queue/topics.ts";
import { freePort } from "../test/support/ports.ts";

/** The parent of 004748c, the commit that sharded seat mail (lease protocol 4 → 5). */
const PRE_SHARDS_REF = "004748c^";
const args = benchArgs(
  "upgrade",
  `[--from ${PRE_SHARDS_REF}] [--messages 3] [--signal SIGTERM|SIGKILL] [--paused-seconds 40]`,
  z.object({
    from: z.string().regex(/^[\w^~./-]{1,100}$/, "a git revision (letters, digits, ^ ~ . / - _)").default(PRE_SHARDS_REF),
    messages: countFlag(3, 50),
    signal: z.enum(["SIGTERM", "SIGKILL"]).default("SIGTERM"),
    "paused-seconds": wholeFlag(0, 600).default(40),
  }),
);

const ROOT = join(import.meta.dir, "..");
/** A boot on a loaded 2-core box is ~1 s; this only ends a broken one. */
const READY_WITHIN_MS = 60_000;
/** The legacy pass runs at boot, or once a crashed older node's leases lapse (the root
 * company's TTL is 45 s); answers follow within a few turns of the scripted model. */
const ANSWERED_WITHIN_MS = 90_000;
/** After the last answer, how long to watch for a second one. */
const QUIET_MS = 5_000;
const POLL_MS = 100;
/** /ready is asked this often while the seat stays paused. */
const READY_POLL_MS = 1_000;

const git = (...a: string[]) => execFileSync("git", a, { cwd: ROOT, encoding: "utf8" }).trim();

function build(dir: string): string {
  execFileSync(join(ROOT, "node_modules", ".bin", "bun"), ["run", "build.ts", "--arch", "x64"], { cwd: dir, stdio: ["ignore", "ignore", "inherit"] });
  return join(dir, "dist", "crewlet-linux-x64");
}

/** The older ref, checked out beside this tree with its packages and sidecar cache. */
function olderTree(sha: string, dir: string): string {
  if (git("diff", "--name-only", sha, "HEAD", "--", "package.json", "package-lock.json") !== "") {
    throw new Error(`${args.from}'s packages differ from this tree's; this bench shares node_modules, so it cannot build it`);
  }
  const tree = join(dir, "older");
  git("worktree", "add", "--detach", tree, sha);
  symlinkSync(join(ROOT, "node_modules"), join(tree, "node_modules"));
  mkdirSync(join(tree, "appliance"), { recursive: true });
  cpSync(join(ROOT, "appliance", "cache"), join(tree, "appliance", "cache"), { recursive: true });
  return tree;
}

interface Node {
  proc: ReturnType<typeof Bun.spawn>;
  lines: () => Record<string, unknown>[];
}

function start(bin: string, configFile: string, dir: string): Node {
  // The node logs to stderr.
  const proc = Bun.spawn([bin, "run", configFile], { cwd: dir, stdin: "ignore", stdout: "inherit", stderr: "pipe" });
  const lines: Record<string, unknown>[] = [];
  void (async () => {
    let rest = "";
    for await (const chunk of proc.stderr as ReadableStream<Uint8Array>) {
      const parts = (rest + new TextDecoder().decode(chunk)).split("\n");
      rest = parts.pop()!;
      for (const l of parts) {
        // The log lines are JSON; anything else (a failure's message) is for the person.
        if (l.startsWith("{")) lines.push(JSON.parse(l) as Record<string, unknown>);
        else console.error(l);
      }
    }
  })();
  return { proc, lines: () => lines };
}

/** Log lines shown when a wait runs out (the sweep's line every 5 s left out). */
const TAIL_LINES = 15;

async function until<T>(what: string, within_ms: number, probe: () => Promise<T | null>, node?: Node): Promise<T> {
  const deadline = performance.now() + within_ms;
  for (;;) {
    const v = await probe().catch(() => null);
    if (v !== null) return v;
    if (performance.now() > deadline) {
      const tail = node ? `\nthe node's last log lines:\n${node.lines().filter((l) => l.event !== "seat_sweep").slice(-TAIL_LINES).map((l) => JSON.stringify(l)).join("\n")}` : "";
      throw new Error(`${what}: not within ${within_ms} ms${tail}`);
    }
    await systemClock.sleep(POLL_MS);
  }
}

/** What the older build's sidecar monitor says of its streams (only what is read here). */
const jszSchema = z.object({
  account_details: z.array(z.object({ stream_detail: z.array(z.object({ name: z.string(), state: z.object({ messages: z.number() }) })).default([]) })).default([]),
});

/** The older build's mail streams there (the one stream, or the interest-retained shards), and what they hold. */
async function legacyMail(monitorPort: number): Promise<{ streams: string[]; messages: number }> {
  const jsz = jszSchema.parse(await (await fetch(`http://127.0.0.1:${monitorPort}/jsz?accounts=true&streams=true`)).json());
  const legacy = jsz.account_details.flatMap((a) => a.stream_detail).filter((st) => LEGACY_MAIL_STREAMS.includes(st.name));
  return { streams: legacy.map((st) => st.name), messages: legacy.reduce((n, st) => n + st.state.messages, 0) };
}

async function stop(n: Node, signal: "SIGTERM" | "SIGKILL" = "SIGTERM"): Promise<number> {
  n.proc.kill(signal);
  return await n.proc.exited;
}

async function main(): Promise<boolean> {
  const sha = git("rev-parse", "--verify", `${args.from}^{commit}`);
  const dir = mkdtempSync(join(tmpdir(), "crewlet-bench-upgrade-"));
  const store = join(dir, "store");
  let node: Node | null = null;
  try {
    console.log(`building ${args.from} (${sha.slice(0, 7)}) and this tree (${git("rev-parse", "--short", "HEAD")}) for x64`);
    const olderBin = build(olderTree(sha, dir));
    const newerBin = build(ROOT);
    const api = await freePort();
    const config = parse(readFileSync(join(ROOT, "crewlet.yaml"), "utf8")) as Record<string, Record<string, unknown>>;
    config.store = { ...config.store, dir: store };
    config.api = { ...config.api, host: "127.0.0.1", port: api };
    const monitor = await freePort();
    config.stream = { ...config.stream, client_port: await freePort(), monitor_port: monitor };
    config.logging = { ...config.logging, level: "info", format: "json" };
    const configFile = join(dir, "crewlet.yaml");
    writeFileSync(configFile, stringify(config));
    const url = (p: string) => `http://127.0.0.1:${api}${p}`;
    const ready = () => until("/ready", READY_WITHIN_MS, async () => ((await fetch(url("/ready"))).ok ? true : null), node ?? undefined);

    node = start(olderBin, configFile, dir);
    await ready();
    const token = readFileSync(join(store, "api-token"), "utf8").trim();
    const call = async (path: string, body?: unknown) => {
      const res = await fetch(url(path), { method: body === undefined ? "GET" : "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
      if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
      return (await res.json()) as Record<string, unknown>;
    };
    await call("/agents/ceo/pause", {});
    const asked: string[] = [];
    for (let i = 1; i <= args.messages; i++) asked.push((await call("/chat/channels/general/messages", { body: `@ceo status check ${i}`, author: "founder" })).message_id as string);
    // Their wakes reach the older build's mailbox a moment after the posts are applied: wait,
    // so the swap moves them rather than this build's wake feed publishing them afresh.
    const o = node;
    const legacy = await until(`${asked.length} wakes in the older build's mail streams`, READY_WITHIN_MS, async () => {
      const there = await legacyMail(monitor);
      return there.messages >= asked.length ? there.streams : null;
    }, o);
    console.log(`older build: @ceo paused, ${asked.length} mentions posted and in its mailbox; stopping it with ${args.signal}: exit ${await stop(node, args.signal)}`);

    const t0 = performance.now();
    node = start(newerBin, configFile, dir);
    await ready();
    const ready_ms = performance.now() - t0;
    const n = node;
    // A line a stream: the move is done when each of the older build's streams is deleted.
    const movedLines = () => n.lines().filter((l) => l.event === "legacy_mail_forwarded");
    await until("legacy_mail_forwarded with every legacy stream deleted", ANSWERED_WITHIN_MS, async () => (legacy.every((s) => movedLines().some((l) => l.stream === s && l.stream_deleted === true)) ? true : null), n);
    const total = (field: string) => movedLines().reduce((sum, l) => sum + (l[field] as number), 0);
    const moved = { forwarded: total("forwarded"), mailboxes_deleted: total("mailboxes_deleted") };
    const forwarded_ms = performance.now() - t0;
    // Paused with its mail waiting: the node must still say it is ready.
    const notReady: string[] = [];
    for (const end = performance.now() + args["paused-seconds"] * 1000; performance.now() < end; await systemClock.sleep(READY_POLL_MS)) {
      const res = await fetch(url("/ready"));
      if (!res.ok) notReady.push(await res.text());
    }
    await call("/agents/ceo/resume", {});
    const answers = async () => {
      const page = await call("/chat/channels/general/messages?limit=500");
      const replies = (page.messages as { author: string; thread_parent: string | null }[]).filter((m) => m.author === "ceo");
      return asked.map((id) => replies.filter((r) => r.thread_parent === id).length);
    };
    await until("an answer to each message", ANSWERED_WITHIN_MS, async () => ((await answers()).every((k) => k >= 1) ? true : null), n);
    const answered_ms = performance.now() - t0;
    await systemClock.sleep(QUIET_MS);
    const counts = await answers();
    console.log(`this build: ready ${ready_ms.toFixed(0)} ms after exec; legacy mail forwarded (${moved.forwarded} messages, ${moved.mailboxes_deleted} mailboxes, ${legacy.length} streams deleted) at ${forwarded_ms.toFixed(0)} ms; every message answered at ${answered_ms.toFixed(0)} ms (resumed ${args["paused-seconds"]} s after the forward)`);
    console.log(`answers per message, ${QUIET_MS} ms after the last: ${counts.join(", ")}`);
    console.log(`/ready while @ceo stayed paused ${args["paused-seconds"]} s after the swap: ${notReady.length === 0 ? "200 throughout" : `not ready ${notReady.length} times, first ${notReady[0]}`}`);
    return counts.every((k) => k === 1) && notReady.length === 0;
  } finally {
    if (node && node.proc.exitCode === null) await stop(node);
    if (existsSync(join(dir, "older"))) git("worktree", "remove", "--force", join(dir, "older"));
    rmSync(dir, { recursive: true, force: true });
  }
}

const ok = await main();
console.log(ok ? "upgrade: each message answered once, ready throughout the pause" : "upgrade: FAILED — a message unanswered or answered twice, or not ready while paused");
process.exit(ok ? 0 : 1);
