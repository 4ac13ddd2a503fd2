// A copy that is wrong (not merely behind) goes out of service: its own reads are answered
// by a peer, peers asking it hear `out_of_service`, it logs estate_copy_not_served, and it
// serves again once a check finds the copy sound.
import { afterAll, beforeAll, expect, test } from "bun:test";

/** Generous: real nats-servers and child processes on a slow 2-core CI box. */
const TEST_TIMEOUT_MS = 60_000;
import { Database } from "bun:sqlite";
import { join } from "node:path";
import type { NatsConnection } from "nats";
import { digestTables } from "../../src/estate/digest.ts";
import { ESTATE_DB_FILE } from "../../src/estate/estate.ts";
import { decodeJson, encodeJson, rpcSubject, zeroFloor } from "../../src/estate/rpc.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { eventually, removeTempDirs, startTestEstate, tempDir, type TestEstate } from "./support.ts";

let nats: TestNats;
let nc: NatsConnection;
let a: TestEstate;
const started: TestEstate[] = [];

beforeAll(async () => {
  nats = await startNats(1);
  nc = await nats.connect();
  a = await startTestEstate({ nc, nodeId: "a", dataNodes: () => ["a", "w"] });
  started.push(a);
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  for (const s of started) await s.estate.stop().catch(() => {});
  await nc?.close();
  await nats?.stop();
  removeTempDirs();
}, TEST_TIMEOUT_MS);

const post = (body: string) => ({ op: "chat.post" as const, channel: "general", author: "carol", body, thread_parent: null, mentions: [], dm: null });

test("a build that cannot decode the log goes out of service, is served by a peer, and returns once repaired", async () => {
  const dir = tempDir();
  // An older build: it reads no record format this log holds.
  const w = await startTestEstate({ nc, nodeId: "w", dir, dataNodes: () => ["a", "w"], tuning: { reads_version: 0, undecodable_grace_ms: 300 } });
  started.push(w);
  await eventually(() => w.sink.events("estate_copy_not_served").length > 0, "estate_copy_not_served");
  const h = w.estate.health();
  expect(h.in_service).toBe(false);
  expect(h.domains!.chat.reason).toMatch(/undecodable/);

  // Its own calls go to the peer, exactly as a node holding no data is served.
  expect((await w.estate.router.read({ q: "chat.channels" })).map((c) => c.id)).toContain("general");
  const wrote = await w.estate.router.write("chat", post("written while out of service"));
  expect(wrote.status === "applied" && wrote.node).toBe("a");

  // A peer asking it is told, not left waiting.
  const reply = await nc.request(rpcSubject("w"), encodeJson({ kind: "read", query: { q: "chat.channels" }, floor: zeroFloor() }), { timeout: 5_000 });
  expect(decodeJson(reply.data)).toMatchObject({ status: "out_of_service" });

  // The repair for a build that cannot read its peers' records: run the current build.
  await w.estate.stop();
  started.splice(started.indexOf(w), 1);
  const fixed = await startTestEstate({ nc, nodeId: "w", dir, dataNodes: () => ["a", "w"] });
  started.push(fixed);
  await eventually(() => fixed.estate.health().domains!.chat.lag === 0 && fixed.estate.health().in_service, "the repaired copy level and in service");
  const mine = new Database(join(dir, ESTATE_DB_FILE), { readonly: true });
  const theirs = new Database(join(a.dir, ESTATE_DB_FILE), { readonly: true });
  expect(digestTables(mine)).toEqual(digestTables(theirs));
  mine.close();
  theirs.close();
}, TEST_TIMEOUT_MS);

test("an applier stopped at a record it cannot apply is out of service until a check applies it", async () => {
  const w2 = await startTestEstate({ nc, nodeId: "w2", dataNodes: () => ["a", "w2"] });
  started.push(w2);
  await eventually(() => w2.estate.health().domains!.chat.lag === 0, "w2 level");
  // Damage this copy's rows underneath it (an operator's sqlite3 shell, a bad disk).
  const side = new Database(join(w2.dir, ESTATE_DB_FILE));
  side.run("ALTER TABLE chat_messages RENAME TO chat_messages_moved");
  const out = await a.estate.router.write("chat", post("cannot land on w2"));
  expect(out.status).toBe("applied");
  await eventually(() => !w2.estate.health().domains!.chat.in_service, "w2 chat out of service");
  expect(w2.estate.health().domains!.chat.reason).toMatch(/applier stopped/);
  expect(w2.sink.events("estate_copy_not_served")[0]!.fields).toMatchObject({ domain: "chat" });
  // Other domains of the same copy are still sound and served from here.
  expect(w2.estate.health().domains!.tracker.in_service).toBe(true);
  // Reads of chat are answered by the peer meanwhile.
  const seen = await w2.estate.router.read({ q: "chat.messages", channel: "general", limit: 500 });
  expect(seen.messages.map((m) => m.body)).toContain("cannot land on w2");

  side.run("ALTER TABLE chat_messages_moved RENAME TO chat_messages");
  side.close();
  await eventually(() => w2.estate.health().domains!.chat.in_service, "w2 chat back in service");
  expect(w2.sink.events("estate_copy_served").length).toBeGreaterThan(0);
  const local = w2.estate.copy!.sqlite.query<{ n: number }, []>("SELECT count(*) AS n FROM chat_messages WHERE body = 'cannot land on w2'").get();
  expect(local?.n).toBe(1);
}, TEST_TIMEOUT_MS);

test("a copy below an asker's floor says it is behind instead of answering", async () => {
  const copy = a.estate.copy!;
  const applied = copy.applied("chat");
  const answer = await copy.read({ q: "chat.channels" }, { ...zeroFloor(), chat: applied + 1000 });
  expect(answer).toMatchObject({ status: "behind", applied, floor: applied + 1000 });
}, TEST_TIMEOUT_MS);
