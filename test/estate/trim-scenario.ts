// The state-log trim scenario and snapshot repair on a real nats-server (a 3-member cluster with R3
// logs in trim.test.ts, one server with R1 logs in trim-r1.test.ts;
// real NATS KV coordination, real estate.db files): data nodes publish their applied
// positions on their presence rows, the retention duty trims each log below the floor; an
// operator hold stops it; a stopped copy holds the log at its last position until the
// unheard hold runs out; that copy, restarted after the trim passed it, restores from the
// snapshot and converges; a new data node joining the trimmed fleet does the same.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import type { NatsConnection } from "nats";
import { systemClock } from "../../src/clock.ts";
import type { Coordination } from "../../src/coord/contract.ts";
import { createCoordination } from "../../src/coord/index.ts";
import { TrimDuty } from "../../src/duty/trim.ts";
import { digestTables } from "../../src/estate/digest.ts";
import { appliedPositions, ESTATE_DB_FILE } from "../../src/estate/estate.ts";
import type { AnyBody } from "../../src/estate/records.ts";
import { conclusionSchema, holdKey, readRecord, releaseHold, takeHold, trimKey } from "../../src/estate/retention-records.ts";
import { DOMAINS, type Domain } from "../../src/estate/schema.ts";
import { SNAPSHOT_BUCKET } from "../../src/estate/snapshot.ts";
import { memoryLogger } from "../../src/log.ts";
import { presenceKey } from "../../src/seat/presence.ts";
import { startNats, type TestNats } from "../support/nats.ts";
import { eventually, removeTempDirs, startTestEstate, tempDir, type TestEstate } from "./support.ts";

export function trimScenario(SIZE: number): void {
  /** Generous: real nats-servers on a slow 2-core CI box. */
  const TEST_TIMEOUT_MS = 240_000;
  /** A short lease for the test's presence rows; the duty reads only live ones. */
  const PRESENCE_TTL_MS = 120_000;
  const MARGIN = 3;
  const UNHEARD_HOLD_MS = 3_000;

  let nats: TestNats;
  const conns: NatsConnection[] = [];
  const nodes = new Map<string, TestEstate>();
  const dirs = new Map<string, string>();
  let coord: Coordination;
  const epochs = new Map<string, number>();
  const { log, sink } = memoryLogger("debug");

  async function conn(member: number): Promise<NatsConnection> {
    const nc = await nats.connect({ servers: nats.members[member % SIZE]!.url });
    conns.push(nc);
    return nc;
  }

  const dataNodes = () => [...nodes.keys()];

  async function startNode(id: string, member: number): Promise<TestEstate> {
    const dir = dirs.get(id) ?? tempDir();
    dirs.set(id, dir);
    const n = await startTestEstate({ nc: await conn(member), nodeId: id, dir, replicas: SIZE, dataNodes });
    nodes.set(id, n);
    return n;
  }

  async function stopNode(id: string): Promise<void> {
    const n = nodes.get(id)!;
    nodes.delete(id);
    await n.estate.stop();
    const epoch = epochs.get(id);
    if (epoch !== undefined) await coord.leases.release(presenceKey(id), `${id}:test`, epoch);
    epochs.delete(id);
  }

  /** What a data node's seat host publishes each heartbeat: roles and its applied positions. */
  async function publishPresence(): Promise<void> {
    for (const [id, n] of nodes) {
      const meta = { roles: ["data", "workers"], labels: {}, broker: "member", started_at: 0, draining: false, withdrawn: false, seats_held: 0, seats_by_group: {}, estate_applied: appliedPositions(n.estate.health())! };
      const epoch = epochs.get(id);
      if (epoch !== undefined) {
        const r = await coord.leases.renew(presenceKey(id), `${id}:test`, epoch, meta);
        if (r.status === "renewed") continue;
      }
      const r = await coord.leases.acquire(presenceKey(id), { owner: `${id}:test`, preferred: id, ttl_ms: PRESENCE_TTL_MS, meta, gate: false });
      if (!r.ok) throw new Error(`presence for ${id}: ${r.rule}`);
      epochs.set(id, r.lease.epoch);
    }
  }

  let n = 0;
  function bodyFor(domain: Domain): AnyBody {
    n += 1;
    if (domain === "tracker") return { op: "work.create", project: "ENG", type: "task", title: `item ${n}`, body: "", status: "todo", priority: "none", assignee: null, reporter: "carol", parent: null, labels: [], due: null };
    if (domain === "pages") return { op: "page.put", container: "eng-docs", title: `Page ${n % 4}`, body: `text ${n}`, labels: [], author: "carol", base_revision: null };
    return { op: "chat.post", channel: "general", author: "carol", body: `says ${n}`, thread_parent: null, mentions: [], dm: null };
  }

  async function writeMany(count: number): Promise<void> {
    const router = nodes.get("a")!.estate.router;
    for (let i = 0; i < count; i++) {
      const domain = DOMAINS[i % 3]!;
      const out = await router.write(domain, bodyFor(domain) as never);
      expect(out.status).not.toBe("unknown");
    }
  }

  async function logExtent(): Promise<Record<Domain, { first_seq: number; last_seq: number }>> {
    const sl = nodes.get("a")!.estate.stateLog;
    const out = {} as Record<Domain, { first_seq: number; last_seq: number }>;
    for (const d of DOMAINS) out[d] = await sl.position(d);
    return out;
  }

  function fileFacts(id: string) {
    const db = new Database(join(dirs.get(id)!, ESTATE_DB_FILE), { readonly: true });
    try {
      const applied = Object.fromEntries(db.query<{ domain: string; applied_seq: number }, []>("SELECT domain, applied_seq FROM estate_checkpoints").all().map((r) => [r.domain, r.applied_seq]));
      return { applied, digest: digestTables(db) };
    } finally {
      db.close();
    }
  }

  async function allLevel(): Promise<void> {
    try {
      await levelEventually();
    } catch (err) {
      for (const [id, nd] of nodes) {
        const lines = nd.sink.lines.filter((l) => /restore|not_served|served|apply_failed|applier/.test(l.event)).slice(-12);
        console.error(id, JSON.stringify(nd.estate.health().domains), JSON.stringify(lines.map((l) => ({ e: l.event, ...l.fields }))));
      }
      throw err;
    }
  }

  async function levelEventually(): Promise<void> {
    await eventually(async () => {
      const ext = await logExtent();
      return [...nodes.keys()].every((id) => {
        const h = nodes.get(id)!.estate.health();
        return DOMAINS.every((d) => h.domains![d].applied === ext[d].last_seq && h.domains![d].in_service);
      });
    }, "every copy level with the logs and in service", 60_000);
  }

  let duty: TrimDuty;
  const tick = () => duty.tick({ epoch: 1, signal: new AbortController().signal, beat: () => undefined });
  const conclusion = async (d: Domain) => (await readRecord(coord.slot("estate"), trimKey(d), conclusionSchema))!.value;

  beforeAll(async () => {
    nats = await startNats(SIZE);
    coord = await createCoordination({ type: "embedded-kv", nc: await conn(0), replicas: SIZE, lease_ttl_ms: PRESENCE_TTL_MS, clock: systemClock, log });
    await startNode("a", 0);
    await startNode("b", 1);
    await startNode("c", 2);
    const a = nodes.get("a")!;
    duty = new TrimDuty({
      node_id: "a",
      slot: coord.slot("estate"),
      leases: coord.leases,
      stateLog: a.estate.stateLog,
      snapshots: a.estate.snapshots!,
      copy: () => a.estate.copy,
      clock: systemClock,
      log,
      margin: MARGIN,
      unheard_hold_ms: UNHEARD_HOLD_MS,
      snapshot_max_age_ms: 0,
    });
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    for (const nd of nodes.values()) await nd.estate.stop().catch(() => {});
    await coord?.close().catch(() => {});
    for (const nc of conns) await nc.close().catch(() => {});
    await nats?.stop();
    removeTempDirs();
  }, TEST_TIMEOUT_MS);

  describe(`on ${SIZE === 1 ? "one server, R1" : `${SIZE} members, R${SIZE}`}`, () => test(
    "trim below the floor; a hold stops it; an unheard copy holds the log until its hold runs out; that copy and a new data node restore from the snapshot and converge",
    async () => {
      await writeMany(45);
      await allLevel();
      await publishPresence();

      // A hold on chat: chat keeps everything, the other logs are trimmed to floor − margin.
      const before = await logExtent();
      await takeHold(coord.slot("estate"), "chat", { position: before.chat.first_seq - 1, by: "tok-ops", at: Date.now(), reason: "backup" });
      await tick();
      let ext = await logExtent();
      expect(ext.chat.first_seq).toBe(before.chat.first_seq);
      expect((await conclusion("chat")).holding).toBe("hold");
      expect((await conclusion("chat")).outcome).toBe("nothing");
      for (const d of ["tracker", "pages"] as const) {
        expect(ext[d].first_seq).toBe(before[d].last_seq - MARGIN + 1);
        expect((await conclusion(d)).outcome).toBe("trimmed");
      }
      expect(sink.events("estate_trimmed").length).toBe(2);
      expect(nodes.get("a")!.sink.events("estate_snapshot_uploaded").length).toBe(1);

      await releaseHold(coord.slot("estate"), "chat");
      expect(await coord.slot("estate").get(holdKey("chat"))).toBeNull();
      await tick();
      ext = await logExtent();
      expect(ext.chat.first_seq).toBe(before.chat.last_seq - MARGIN + 1);

      // c stops briefly: its position holds the logs, and back within the hold it replays the
      // tail (no snapshot); then the trim moves past where it was.
      const cBrief = appliedPositions(nodes.get("c")!.estate.health())!;
      await stopNode("c");
      await writeMany(15);
      await allLevel();
      await publishPresence();
      await tick();
      ext = await logExtent();
      for (const d of DOMAINS) expect(ext[d].first_seq).toBeLessThanOrEqual(cBrief[d]! + 1);
      await startNode("c", 2);
      await allLevel();
      expect(nodes.get("c")!.sink.events("estate_copy_restored").length).toBe(0);
      await publishPresence();
      await tick();
      ext = await logExtent();
      for (const d of DOMAINS) expect(ext[d].first_seq).toBeGreaterThan(cBrief[d]! + 1);

      // c stops; the fleet writes on. c's last position holds every log while it is unheard from.
      const cAt = appliedPositions(nodes.get("c")!.estate.health())!;
      await stopNode("c");
      await writeMany(30);
      await allLevel();
      await publishPresence();
      await tick();
      ext = await logExtent();
      for (const d of DOMAINS) {
        expect(ext[d].first_seq).toBeLessThanOrEqual(cAt[d]! + 1);
        const c = await conclusion(d);
        expect(c.holding).toBe("copy:c");
        expect(c.terms.find((t) => t.key === "copy:c")?.kind).toBe("unheard_copy");
      }

      // Past the unheard hold c is let go: the logs are trimmed past it.
      await Bun.sleep(UNHEARD_HOLD_MS + 200);
      await tick();
      ext = await logExtent();
      for (const d of DOMAINS) expect(ext[d].first_seq).toBeGreaterThan(cAt[d]! + 1);
      expect(sink.events("estate_copy_released").length).toBeGreaterThanOrEqual(1);

      // c comes back below the log: it restores from the snapshot and replays the tail.
      const c = await startNode("c", 2);
      await writeMany(6);
      await allLevel();
      expect(c.sink.events("estate_copy_restored").length).toBe(3);
      const ref = fileFacts("a");
      expect(fileFacts("c").digest).toEqual(ref.digest);
      expect(fileFacts("b").digest).toEqual(ref.digest);

      // A new data node joins the trimmed fleet: it restores and converges too.
      const d = await startNode("d", 1);
      await writeMany(3);
      await allLevel();
      expect(d.sink.events("estate_copy_restored").length).toBe(3);
      for (const id of ["c", "d"]) for (const l of nodes.get(id)!.sink.events("estate_copy_restore_failed")) console.error(id, JSON.stringify(l.fields));
      expect(d.sink.events("estate_copy_restore_failed").length).toBe(0);
      const ref2 = fileFacts("a");
      for (const id of ["b", "c", "d"]) expect(fileFacts(id).digest).toEqual(ref2.digest);
      // The search indexes follow the restored rows (FTS5's own consistency check, and a search).
      for (const id of ["c", "d"]) {
        const sqlite = nodes.get(id)!.estate.copy!.sqlite;
        for (const fts of ["kb_fts", "work_fts", "chat_fts"]) sqlite.run(`INSERT INTO ${fts}(${fts}, rank) VALUES('integrity-check', 1)`);
        for (const [fts, word] of [["kb_fts", "text"], ["work_fts", "item"], ["chat_fts", "says"]] as const) {
          const hits = (q: Database) => q.query<{ n: number }, []>(`SELECT count(*) AS n FROM ${fts} WHERE ${fts} MATCH '${word}'`).get()!.n;
          expect({ fts, hits: hits(sqlite) }).toEqual({ fts, hits: hits(nodes.get("a")!.estate.copy!.sqlite) });
          expect(hits(sqlite)).toBeGreaterThan(0);
        }
      }

      // With the shipped snapshot age, a stored snapshot covering part of the purge is reused
      // (no upload) and the purge stops at it.
      const a = nodes.get("a")!;
      const stored = (await a.estate.snapshots!.info())!;
      const uploads = a.sink.events("estate_snapshot_uploaded").length;
      await writeMany(12);
      await allLevel();
      await publishPresence();
      const reuse = new TrimDuty({ node_id: "a", slot: coord.slot("estate"), leases: coord.leases, stateLog: a.estate.stateLog, snapshots: a.estate.snapshots!, copy: () => a.estate.copy, clock: systemClock, log, margin: MARGIN });
      await reuse.tick({ epoch: 1, signal: new AbortController().signal, beat: () => undefined });
      ext = await logExtent();
      for (const dm of DOMAINS) expect(ext[dm].first_seq).toBe(stored.positions[dm]! + 1);
      expect(a.sink.events("estate_snapshot_uploaded").length).toBe(uploads);

      // The snapshot bucket deleted under the fleet: the tick cannot store a snapshot, so it
      // purges nothing and says so; the next tick creates the bucket again and trims.
      const jsm = await conns[0]!.jetstreamManager();
      await jsm.streams.delete(`OBJ_${SNAPSHOT_BUCKET}`);
      const beforeLoss = await logExtent();
      await writeMany(12);
      await allLevel();
      await publishPresence();
      // The first domain's upload meets the missing bucket; the next one's opens it again.
      await expect(tick()).rejects.toThrow(/not purged/);
      ext = await logExtent();
      const restored = (await a.estate.snapshots!.info())!;
      let failedDomains = 0;
      for (const dm of DOMAINS) {
        const c = await conclusion(dm);
        if (c.outcome === "failed") {
          failedDomains++;
          expect(ext[dm].first_seq).toBe(beforeLoss[dm].first_seq);
        } else expect(restored.positions[dm]! + 1).toBeGreaterThanOrEqual(ext[dm].first_seq);
      }
      expect(failedDomains).toBeGreaterThanOrEqual(1);
      await tick();
      ext = await logExtent();
      for (const dm of DOMAINS) expect(ext[dm].first_seq).toBeGreaterThan(beforeLoss[dm].first_seq);

      // A live data node whose row does not say where its copy is: the trim does nothing.
      await publishPresence();
      await coord.leases.renew(presenceKey("d"), "d:test", epochs.get("d")!, { roles: ["data"], labels: {}, broker: "member", started_at: 0, draining: false, withdrawn: false, seats_held: 0, seats_by_group: {} });
      const frozen = await logExtent();
      await writeMany(12);
      await tick();
      ext = await logExtent();
      for (const dm of DOMAINS) {
        expect(ext[dm].first_seq).toBe(frozen[dm].first_seq);
        expect((await conclusion(dm)).outcome).toBe("skipped");
      }
    },
    TEST_TIMEOUT_MS,
  ));

}
