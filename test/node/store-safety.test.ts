// A scratch (leaf) node never deletes another node's store, and a store is its owner's
// alone (dir 0700, files 0600) when run from source too. Real processes in one working
// directory, the way the README's snippets would be run on one box: a member with the
// default store dir, then a leaf.
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { stringify } from "yaml";
import { freePort } from "../support/ports.ts";
import { TEST_TOKEN } from "../support/fleet.ts";
import { notScratch, wipeScratchStore } from "../../src/node/scratch.ts";
import { lockStoreDir } from "../../src/node/store-lock.ts";

const MAIN = resolve(import.meta.dir, "../../src/main.ts");
const root = mkdtempSync(join(tmpdir(), "crewlet-store-safety-"));
const procs: ReturnType<typeof Bun.spawn>[] = [];
afterAll(async () => {
  for (const p of procs) if (p.exitCode === null) p.kill("SIGKILL");
  await Promise.all(procs.map((p) => p.exited));
  rmSync(root, { recursive: true, force: true });
});

function spawnRun(cwd: string, file: string) {
  const p = Bun.spawn([process.execPath, MAIN, "run", file], { cwd, stdout: "pipe", stderr: "pipe", env: process.env });
  procs.push(p);
  return p;
}

async function waitReady(url: string, p: ReturnType<typeof Bun.spawn>, timeout_ms = 60_000) {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    if (p.exitCode !== null) throw new Error(`exited ${p.exitCode} before ready: ${await new Response(p.stderr as ReadableStream).text()}`);
    try {
      if ((await fetch(`${url}/ready`)).ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`not ready within ${timeout_ms} ms`);
    await Bun.sleep(100);
  }
}

/** Every file and dir under `dir` (the extracted sidecar binary aside) carrying group/other bits. */
function sharedEntries(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    if ((statSync(d).mode & 0o077) !== 0) out.push(`${d} ${(statSync(d).mode & 0o777).toString(8)}`);
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      const st = statSync(p);
      if (st.isDirectory()) walk(p);
      else if ((st.mode & 0o077) !== 0) out.push(`${p} ${(st.mode & 0o777).toString(8)}`);
    }
  };
  walk(dir);
  return out;
}

test("a leaf started beside a member never deletes its store; the leaf's own scratch store is wiped; stores are 0700/0600", async () => {
  const cwd = join(root, "box");
  mkdirSync(cwd);
  const [api, client, monitor, leafPort, leafApi, leafClient, leafMonitor] = await Promise.all(Array.from({ length: 7 }, () => freePort()));
  // The member: the default store dir (.crewlet in the working directory).
  writeFileSync(
    join(cwd, "member.yaml"),
    stringify({
      node: { id: "hub" },
      coordination: { type: "embedded-kv" },
      stream: { client_port: client, monitor_port: monitor, leaf: { port: leafPort } },
      api: { port: api, tokens: [{ id: "t", token: TEST_TOKEN }] },
      company: { name: "Acme", roles: [{ name: "CEO", handle: "ceo" }] },
    }),
  );
  // The README's leaf snippet as it was: scratch, and no store.dir of its own.
  const leafConfig = (store: Record<string, unknown>) =>
    stringify({
      node: { id: "leaf", roles: ["seats"] },
      store,
      coordination: { type: "embedded-kv" },
      stream: { client_port: leafClient, monitor_port: leafMonitor, leaf: { urls: [`nats://127.0.0.1:${leafPort}`] } },
      api: { port: leafApi, tokens: [{ id: "t", token: TEST_TOKEN }] },
    });
  writeFileSync(join(cwd, "leaf-shared.yaml"), leafConfig({ scratch: true }));
  writeFileSync(join(cwd, "leaf-own.yaml"), leafConfig({ dir: ".crewlet-leaf", scratch: true }));

  const member = spawnRun(cwd, "member.yaml");
  await waitReady(`http://127.0.0.1:${api}`, member);
  const store = join(cwd, ".crewlet");
  const estate = join(store, "estate.db");
  const stream = join(store, "stream");
  expect(existsSync(estate)).toBe(true);
  expect(existsSync(stream)).toBe(true);

  // Dir 0700, files 0600, from source: nothing under the store is readable by anyone else.
  expect(statSync(store).mode & 0o777).toBe(0o700);
  expect(sharedEntries(store).filter((e) => !e.includes(`${store}/bin`))).toEqual([]);

  // While the member runs, the leaf finds the store locked: exit 2, nothing deleted.
  const whileUp = spawnRun(cwd, "leaf-shared.yaml");
  expect(await whileUp.exited).toBe(2);
  expect(await new Response(whileUp.stderr as ReadableStream).text()).toContain(store);
  expect(existsSync(estate)).toBe(true);
  expect(existsSync(stream)).toBe(true);
  expect((await fetch(`http://127.0.0.1:${api}/ready`)).ok).toBe(true);

  // The member stopped: the lock is free, and the store is still not a scratch store.
  member.kill("SIGTERM");
  expect(await member.exited).toBe(0);
  const whileDown = spawnRun(cwd, "leaf-shared.yaml");
  expect(await whileDown.exited).toBe(2);
  expect(await new Response(whileDown.stderr as ReadableStream).text()).toContain(estate);
  expect(existsSync(estate)).toBe(true);
  expect(existsSync(stream)).toBe(true);

  // The README's leaf (its own store dir) beside a running member: its store is wiped at
  // boot (a stale file goes), the member's is untouched.
  const member2 = spawnRun(cwd, "member.yaml");
  await waitReady(`http://127.0.0.1:${api}`, member2);
  mkdirSync(join(cwd, ".crewlet-leaf"), { recursive: true });
  writeFileSync(join(cwd, ".crewlet-leaf", "stale"), "from a past boot");
  const leaf = spawnRun(cwd, "leaf-own.yaml");
  await waitReady(`http://127.0.0.1:${leafApi}`, leaf);
  expect(existsSync(join(cwd, ".crewlet-leaf", "stale"))).toBe(false);
  expect(existsSync(join(cwd, ".crewlet-leaf", "node.lock"))).toBe(true);
  expect(existsSync(estate)).toBe(true);
  expect(statSync(join(cwd, ".crewlet-leaf")).mode & 0o777).toBe(0o700);
  leaf.kill("SIGTERM");
  member2.kill("SIGTERM");
  expect(await leaf.exited).toBe(0);
  expect(await member2.exited).toBe(0);
}, 180_000);

test("a wipe keeps the lock it runs under and the store id, and refuses an estate or a stream store", () => {
  const dir = join(root, "unit");
  const lock = lockStoreDir(dir);
  writeFileSync(join(dir, "api-token"), "x");
  writeFileSync(join(dir, "store-id"), "00aa11bb22cc33dd\n");
  mkdirSync(join(dir, "broker"));
  expect(wipeScratchStore(dir).sort()).toEqual(["api-token", "broker"]);
  expect(readdirSync(dir).sort()).toEqual(["node.lock", "store-id"]);
  mkdirSync(join(dir, "stream"));
  expect(notScratch(dir)?.path).toBe(join(dir, "stream"));
  expect(() => wipeScratchStore(dir)).toThrow(/stream/);
  writeFileSync(join(dir, "estate.db"), "");
  expect(notScratch(dir)?.path).toBe(join(dir, "estate.db"));
  lock.release();
});
