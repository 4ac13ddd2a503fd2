// `crewlet run` as a real process: boots its sidecar, answers /health and /ready, refuses
// routes without a token, drains on SIGTERM, and leaves no orphan after kill -9.
import { afterAll, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { makeFleet, type Fleet } from "../support/fleet.ts";

const fleets: Fleet[] = [];
afterAll(async () => {
  for (const f of fleets) await f.stop();
});

function sidecarPid(storeDir: string): number | null {
  const file = join(storeDir, "broker", "nats-server.pid");
  if (!existsSync(file)) return null;
  const parsed = JSON.parse(readFileSync(file, "utf8")) as { pid: number };
  return parsed.pid;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !/\) Z /.test(stat);
  } catch {
    return false;
  }
}

async function waitGone(pid: number, timeout_ms = 10_000): Promise<boolean> {
  const deadline = Date.now() + timeout_ms;
  while (Date.now() < deadline) {
    if (!alive(pid)) return true;
    await Bun.sleep(50);
  }
  return !alive(pid);
}

test("a one-box node boots, serves /health and /ready, and drains on SIGTERM", async () => {
  const fleet = await makeFleet({ nodes: [{ id: "solo", kind: "member" }] });
  fleets.push(fleet);
  const node = fleet.node("solo");
  await node.start();
  await node.waitReady();
  const health = (await (await fetch(`${node.apiUrl}/health`)).json()) as Record<string, unknown>;
  expect(health.node).toBe("solo");
  expect(health.broker).toBe("member");
  expect(health.roles).toEqual(["data", "ingress", "seats", "workers"]);
  // Any route but the probes needs a token.
  const anon = await fetch(`${node.apiUrl}/fleet`);
  expect([401, 404]).toContain(anon.status);
  const pid = sidecarPid(join(node.dir, "store"));
  expect(pid).not.toBeNull();
  expect(await node.stop()).toBe(0);
  expect(await waitGone(pid!)).toBe(true);
  expect(node.events("node_stopped").length).toBe(1);
});

test("kill -9 of the node leaves no sidecar behind, and a restart comes up on the same store", async () => {
  const fleet = await makeFleet({ nodes: [{ id: "victim", kind: "member" }] });
  fleets.push(fleet);
  const node = fleet.node("victim");
  await node.start();
  await node.waitReady();
  const pid = sidecarPid(join(node.dir, "store"))!;
  node.kill("SIGKILL");
  await node.exited();
  expect(await waitGone(pid)).toBe(true);
  await node.start();
  await node.waitReady();
  const pid2 = sidecarPid(join(node.dir, "store"))!;
  expect(pid2).not.toBe(pid);
  expect(await node.stop()).toBe(0);
});

test("a bad config exits 2 naming the field", async () => {
  const proc = Bun.spawnSync([process.execPath, join(import.meta.dir, "../../src/main.ts"), "run", "/dev/stdin"], {
    stdin: new TextEncoder().encode("node: {roles: [workers]}\n"),
    stderr: "pipe",
  });
  expect(proc.exitCode).toBe(2);
  expect(proc.stderr.toString()).toContain("node.roles");
});
