// Two live processes with one node.id (different store dirs) must not take each other's
// presence and seats. The store-dir lock is what proves a predecessor dead: a process
// restarted on its own store takes its seats back at once, and any other process with
// that id refuses to start (exit 2, node_id_in_use naming the live holder). Real
// processes: one member and a leaf.
import { afterAll, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parse, stringify } from "yaml";
import { makeFleet, type Fleet } from "../support/fleet.ts";
import { freePort } from "../support/ports.ts";
import { api, until } from "../e2e/support.ts";

const MAIN = resolve(import.meta.dir, "../../src/main.ts");
let fleet: Fleet | null = null;
const extra: ReturnType<typeof Bun.spawn>[] = [];
afterAll(async () => {
  for (const p of extra) if (p.exitCode === null) p.kill("SIGKILL");
  await fleet?.stop();
});

const company = { name: "Acme", roles: [{ name: "Scout", handle: "scout", placement: { node: "l1" } }, { name: "CEO", handle: "ceo", placement: { node: "hub" } }] };

test("a second live process with a node's id refuses to start; the holder keeps its seats; its own restart takes them back", async () => {
  fleet = await makeFleet({ nodes: [{ id: "hub", kind: "member" }, { id: "l1", kind: "leaf" }], company });
  const hub = fleet.node("hub");
  const leaf = fleet.node("l1");
  await hub.start();
  await hub.waitReady(60_000);
  await leaf.start();
  await leaf.waitReady(60_000);
  const held = await until("scout held by l1", async () => {
    const { json } = await api(hub.apiUrl, "/agents/scout");
    return json?.holder?.node === "l1" ? json.holder : null;
  }, 40_000);

  // The impostor: l1's config with its own store dir and ports.
  const cfg = parse(readFileSync(leaf.configFile, "utf8"));
  cfg.store.dir = join(fleet.root, "impostor-store");
  cfg.api.port = await freePort();
  cfg.stream.client_port = await freePort();
  cfg.stream.monitor_port = await freePort();
  const file = join(fleet.root, "impostor.yaml");
  writeFileSync(file, stringify(cfg));
  const impostor = () => {
    const p = Bun.spawn([process.execPath, MAIN, "run", file], { stdout: "ignore", stderr: "pipe" });
    extra.push(p);
    return p;
  };

  const second = impostor();
  expect(await second.exited).toBe(2);
  const said = await new Response(second.stderr as ReadableStream).text();
  expect(said).toContain("node_id_in_use");
  const storeId = readFileSync(join(leaf.dir, "store", "store-id"), "utf8").trim();
  expect(said).toContain(`l1:${storeId}.`);
  // The holder kept its presence and its seat, at the same epoch.
  expect((await fetch(`${leaf.apiUrl}/ready`)).ok).toBe(true);
  expect((await api(hub.apiUrl, "/agents/scout")).json.holder).toMatchObject({ node: "l1", epoch: held.epoch });
  expect(leaf.events("presence_lost")).toEqual([]);

  // kill -9: the holder is dead, but nothing the impostor holds proves it — its presence
  // is live for a TTL yet, so the impostor still refuses.
  leaf.kill("SIGKILL");
  await leaf.exited();
  const third = impostor();
  expect(await third.exited).toBe(2);

  // The same process restarted on its own store holds the lock its predecessor ran under:
  // it takes its seat back at once, with a new epoch.
  await leaf.start();
  await leaf.waitReady(60_000);
  const back = await until("scout back on l1 at a new epoch", async () => {
    const { json } = await api(hub.apiUrl, "/agents/scout");
    return json?.holder?.node === "l1" && json.holder.epoch > held.epoch ? json.holder : null;
  }, 30_000);
  expect(back.epoch).toBeGreaterThan(held.epoch);
  expect(leaf.events("node_id_in_use")).toEqual([]);
}, 180_000);
