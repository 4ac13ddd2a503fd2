// `crewlet estate hold|release` (the real CLI in a child process) against a data node's API
// on a real nats-server: a hold is stored in crewlet_estate with who, when and why, GET /estate
// shows it, a second hold keeps the first, release removes it; refusals name what is wrong.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { NatsConnection } from "nats";
import { systemClock } from "../../src/clock.ts";
import { createCoordination, type CoordinationHandle } from "../../src/coord/index.ts";
import { silentLogger } from "../../src/log.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { OPS_TOKEN, READER_TOKEN, estateApp, removeTempDirs, startTestEstate, type TestEstate } from "./support.ts";

const TEST_TIMEOUT_MS = 90_000;
const OPS = OPS_TOKEN;
const READER = READER_TOKEN;

let nats: TestNats;
let nc: NatsConnection;
let coord: CoordinationHandle;
let node: TestEstate;
let server: ReturnType<typeof Bun.serve>;

beforeAll(async () => {
  nats = await startNats(1);
  nc = await nats.connect();
  coord = await createCoordination({ type: "embedded-kv", nc, replicas: 1, lease_ttl_ms: 45_000, clock: systemClock, log: silentLogger });
  node = await startTestEstate({ nc, nodeId: "a", dataNodes: () => ["a"], retention: coord.slot("estate") });
  const app = estateApp(node);
  server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => app.fetch(req) });
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  server?.stop(true);
  await node?.estate.stop();
  await coord?.close();
  await nc?.close();
  await nats?.stop();
  removeTempDirs();
}, TEST_TIMEOUT_MS);

async function cli(...args: string[]) {
  const p = Bun.spawn([process.execPath, "src/main.ts", "estate", ...args, "--url", `http://127.0.0.1:${server.port}`], { stdout: "pipe", stderr: "pipe" });
  const [code, out, err] = await Promise.all([p.exited, new Response(p.stdout).text(), new Response(p.stderr).text()]);
  return { code, out, err };
}

async function retention(): Promise<Record<string, { hold: { position: number; by: string; at: number; reason: string | null } | null }>> {
  const res = await fetch(`http://127.0.0.1:${server.port}/estate`, { headers: { authorization: `Bearer ${READER}` } });
  expect(res.status).toBe(200);
  return ((await res.json()) as { retention: Record<string, { hold: { position: number; by: string; at: number; reason: string | null } | null }> }).retention;
}

test("hold, show, hold again, release — and the refusals", async () => {
  const first = (await node.estate.stateLog.position("chat")).first_seq;
  const held = await cli("hold", "chat", "--reason", "nightly backup", "--token", OPS, "--json");
  expect({ code: held.code, err: held.err }).toEqual({ code: 0, err: "" });
  expect(JSON.parse(held.out)).toMatchObject({ status: "held", already: false, hold: { position: first - 1, by: "token:ops", reason: "nightly backup" } });
  const r = await retention();
  expect(r.chat!.hold).toMatchObject({ position: first - 1, by: "token:ops", reason: "nightly backup" });
  expect(r.tracker!.hold).toBeNull();

  const again = await cli("hold", "chat", "--token", OPS);
  expect(again.code).toBe(0);
  expect(again.out).toContain("already held");
  expect((await retention()).chat!.hold!.reason).toBe("nightly backup");

  // Refused: a reader's token, an unknown domain, a reason on release, a stray field.
  expect((await cli("hold", "tracker", "--token", READER)).err).toContain("fleet:operate");
  expect((await retention()).tracker!.hold).toBeNull();
  const bad = await cli("hold", "wiki", "--token", OPS);
  expect(bad.code).toBe(2);
  expect(bad.err).toContain("domain: one of tracker, pages, chat");
  expect((await cli("release", "chat", "--reason", "x", "--token", OPS)).code).toBe(2);
  const stray = await fetch(`http://127.0.0.1:${server.port}/estate/chat/hold`, { method: "POST", headers: { authorization: `Bearer ${OPS}`, "content-type": "application/json" }, body: JSON.stringify({ reason: "x", position: 3 }) });
  expect(stray.status).toBe(400);

  const released = await cli("release", "chat", "--token", OPS);
  expect({ code: released.code, err: released.err }).toEqual({ code: 0, err: "" });
  expect(released.out).toContain("released the hold on chat (taken by token:ops)");
  expect((await retention()).chat!.hold).toBeNull();
  expect((await cli("release", "chat", "--token", OPS)).out).toContain("no hold on chat");
}, TEST_TIMEOUT_MS);
