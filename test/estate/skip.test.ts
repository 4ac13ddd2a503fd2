// Issue 12, item 2: a documented way back for a log that holds a record no copy can apply.
// A record planted directly on the stream (bypassing the record gate) takes the chat
// domain out of service on both data nodes; `crewlet estate skip chat <position> --reason …`
// appends a skip marker; both copies pass over the record identically (digests agree) and
// return to service.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { NatsConnection } from "nats";
import { createApp } from "../../src/api/app.ts";
import { TokenAuth } from "../../src/api/auth.ts";
import { GRANTS } from "../../src/config/tier-a.ts";
import { skippedOpId } from "../../src/estate/applier.ts";
import { digestTables } from "../../src/estate/digest.ts";
import { RECORD_VERSION } from "../../src/estate/records.ts";
import { StateLog } from "../../src/estate/statelog.ts";
import { silentLogger } from "../../src/log.ts";
import { stateLogSubject } from "../../src/queue/topics.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { eventually, removeTempDirs, startTestEstate, type TestEstate } from "./support.ts";

/** Generous: real nats-servers and a CLI child process on a slow 2-core CI box. */
const TEST_TIMEOUT_MS = 90_000;
const OPS = "ops-token-0123456789abcdefghij";
const READER = "reader-token-0123456789abcdefg";

let nats: TestNats;
const conns: NatsConnection[] = [];
const nodes: TestEstate[] = [];
let server: ReturnType<typeof Bun.serve>;

beforeAll(async () => {
  nats = await startNats(1);
  for (const id of ["a", "b"]) {
    const nc = await nats.connect();
    conns.push(nc);
    nodes.push(await startTestEstate({ nc, nodeId: id, dataNodes: () => ["a", "b"], tuning: { undecodable_grace_ms: 300, check_interval_ms: 200 } }));
  }
  const app = createApp({
    auth: new TokenAuth([
      { id: "ops", token: OPS, grants: GRANTS },
      { id: "reader", token: READER, grants: ["state:read"] },
    ]),
    log: silentLogger,
    health: { health: () => ({}), notReadyReason: () => null },
    groups: nodes[0]!.estate.routeGroups,
  });
  server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => app.fetch(req) });
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  server?.stop(true);
  for (const n of nodes) await n.estate.stop();
  for (const nc of conns) await nc.close();
  await nats?.stop();
  removeTempDirs();
}, TEST_TIMEOUT_MS);

const post = (body: string) => ({ op: "chat.post" as const, channel: "general", author: "carol", body, thread_parent: null, mentions: [], dm: null });

/** The real CLI in a child process (async: this process serves the API it talks to). */
async function skipCli(domain: string, position: number, reason: string | null, token = OPS) {
  const args = ["estate", "skip", domain, String(position), ...(reason !== null ? ["--reason", reason] : []), "--url", `http://127.0.0.1:${server.port}`, "--token", token, "--json"];
  const p = Bun.spawn([process.execPath, "src/main.ts", ...args], { stdout: "pipe", stderr: "pipe" });
  const [code, out, err] = await Promise.all([p.exited, new Response(p.stdout).text(), new Response(p.stderr).text()]);
  return { code, out, err };
}

test("a planted record stops chat on both nodes; a skip marker brings both back, identically", async () => {
  const [a, b] = nodes as [TestEstate, TestEstate];
  expect((await a.estate.router.write("chat", post("before"))).status).toBe("applied");
  // Planted past the gate: a DM to 17 members, which no copy of this build can decode.
  const log = new StateLog(conns[0]!, silentLogger);
  const members = Array.from({ length: 17 }, (_, i) => `m${i}`);
  const bad = { v: RECORD_VERSION, domain: "chat", op_id: "planted-record-1", at: Date.now(), origin: "x", body: { ...post("poison"), channel: "dm." + members.join("."), dm: { members } } };
  const planted = await log.appendRaw("chat", stateLogSubject("chat", "chat_post"), new TextEncoder().encode(JSON.stringify(bad)), bad.op_id);
  if (!planted.ok) throw new Error(planted.error);
  const position = planted.seq;
  for (const n of nodes) await eventually(() => !n.estate.copy!.inService("chat"), `${n.nodeId} chat out of service`);
  // What an operator reads first: where the copy is stuck.
  const status = await fetch(`http://127.0.0.1:${server.port}/estate`, { headers: { authorization: `Bearer ${READER}` } });
  expect(((await status.json()) as { domains: { chat: { in_service: boolean; stuck_at: number } } }).domains.chat).toMatchObject({ in_service: false, stuck_at: position });
  // Tracker and pages are untouched.
  expect(a.estate.copy!.inService("tracker") && b.estate.copy!.inService("pages")).toBe(true);

  // Refused: not the record the copy is stuck on; a reader's token; no reason.
  const wrong = await skipCli("chat", position + 5, "not this one");
  expect(wrong.code).toBe(1);
  expect(wrong.err).toContain("not stuck at");
  expect((await skipCli("chat", position, "x", READER)).err).toContain("fleet:operate");
  expect((await skipCli("chat", position, null)).code).toBe(2);

  const done = await skipCli("chat", position, "planted by the integrity test: a DM to 17 members");
  expect({ code: done.code, err: done.err }).toEqual({ code: 0, err: "" });
  expect(JSON.parse(done.out)).toMatchObject({ status: "skipped", domain: "chat", position });

  for (const n of nodes) await eventually(async () => (await n.estate.copy!.check(), n.estate.copy!.inService("chat")), `${n.nodeId} chat back in service`);
  // Writes and reads work again, through either node.
  expect((await b.estate.router.write("chat", post("after"))).status).toBe("applied");
  const ends = (await log.position("chat")).last_seq;
  for (const n of nodes) await eventually(() => n.estate.copy!.applied("chat") === ends, `${n.nodeId} level`);
  const digests = nodes.map((n) => digestTables(n.estate.copy!.sqlite));
  expect(digests[0]).toEqual(digests[1]!);
  // The skip is on record, the same on both: the position, the reason, who.
  for (const n of nodes) {
    const row = n.estate.copy!.sqlite.query<{ position: number; outcome: string }, [string]>("SELECT position, outcome FROM estate_ops WHERE op_id = ?").get(skippedOpId("chat", position));
    expect(row!.position).toBe(position);
    expect(JSON.parse(row!.outcome)).toMatchObject({ ok: false, code: "skipped", message: "planted by the integrity test: a DM to 17 members", skipped_by: "token:ops" });
  }
  const bodies = (await a.estate.router.read({ q: "chat.messages", channel: "general", limit: 100 })).messages.map((m) => m.body);
  expect(bodies).toContain("before");
  expect(bodies).toContain("after");
  expect(bodies).not.toContain("poison");
  // Skipping again once passed: refused, nothing appended.
  expect((await skipCli("chat", position, "again")).err).toContain("not stuck at");
  expect((await log.position("chat")).last_seq).toBe(ends);
}, TEST_TIMEOUT_MS);
