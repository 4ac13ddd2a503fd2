// One company for the whole fleet: revisions behind a CAS activation pointer whose KV
// revision is the epoch, followed by every node in epoch order.
import { expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { gzipSync } from "node:zlib";
import { FakeClock, systemClock } from "../../src/clock.ts";
import { decodeRevisionBody, MAX_INFLATED_REVISION_BYTES } from "../../src/config/revision-body.ts";
import { companySchema } from "../../src/config/company.ts";
import { createCoordination, MemoryCoordination } from "../../src/coord/index.ts";
import { memoryLogger, silentLogger } from "../../src/log.ts";
import { startNats } from "../support/nats.ts";
import { APPLY_POLL_MS, CompanyRevisions, companyDigest, MAX_REVISION_BYTES, RevisionFollower, RevisionNotFound, RevisionTooLarge, RevisionUnreadable, type ActiveRevision } from "../../src/config/company-revisions.ts";
import { decideSeed, SeedMemory } from "../../src/node/company-seed.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const acme = companySchema.parse({ name: "Acme", roles: [{ name: "CEO", handle: "ceo" }] });
const acme2 = companySchema.parse({ name: "Acme", roles: [{ name: "CEO", handle: "ceo" }, { name: "CTO", handle: "cto" }] });

function setup() {
  const clock = new FakeClock(0);
  const { log, sink } = memoryLogger("debug", clock);
  const coord = new MemoryCoordination({ clock, log });
  const node = (id: string) => {
    const c = coord.node();
    return new CompanyRevisions(c.slot("config"), c.slot("status"), id, clock, log);
  };
  return { clock, sink, node };
}

test("activating the active company writes nothing; a different one moves the epoch forward", async () => {
  const { node } = setup();
  const a = node("a");
  const b = node("b");
  expect(await a.active()).toBeNull();
  const first = await a.activate(acme);
  expect(first.changed).toBe(true);
  const same = await b.activate(acme);
  expect(same.changed).toBe(false);
  expect(same.active.epoch).toBe(first.active.epoch);
  const next = await b.activate(acme2);
  expect(next.changed).toBe(true);
  expect(next.active.epoch).toBeGreaterThan(first.active.epoch);
  const seen = await a.active();
  expect(seen?.digest).toBe(companyDigest(acme2));
  expect(seen?.company.roles.map((r) => r.handle)).toEqual(["ceo", "cto"]);
});

test("one company has one digest whatever the key order", () => {
  const reordered = companySchema.parse({ roles: [{ handle: "ceo", name: "CEO" }], name: "Acme" });
  expect(companyDigest(reordered)).toBe(companyDigest(acme));
});

test("racing activations: exactly one pointer wins each epoch and both callers see the winner", async () => {
  const { node } = setup();
  const [x, y] = await Promise.all([node("a").activate(acme), node("b").activate(acme2)]);
  const active = await node("c").active();
  expect([x.active.digest, y.active.digest]).toContain(active!.digest);
  expect(active!.epoch).toBe(Math.max(x.active.epoch, y.active.epoch));
});

test("a follower applies each newer revision once, in order, on the poll and on a nudge, and records it", async () => {
  const { clock, node } = setup();
  const writer = node("a");
  const reader = node("b");
  const applied: ActiveRevision[] = [];
  const follower = new RevisionFollower(reader, async (a) => void applied.push(a), clock, memoryLogger().log, () => 0.5);
  await writer.activate(acme);
  follower.start();
  await clock.advance(APPLY_POLL_MS * 1.3);
  expect(applied.map((a) => a.digest)).toEqual([companyDigest(acme)]);
  // Nothing new: the poll applies nothing.
  await clock.advance(APPLY_POLL_MS * 1.3);
  expect(applied.length).toBe(1);
  // A nudge applies at once, without waiting for the poll.
  await writer.activate(acme2);
  await follower.check();
  expect(applied.map((a) => a.digest)).toEqual([companyDigest(acme), companyDigest(acme2)]);
  await reader.recordApplied(applied[1]!, 2);
  expect(await reader.appliedBy("b")).toMatchObject({ digest: companyDigest(acme2), epoch: applied[1]!.epoch, seats: 2 });
  follower.stop();
});

test("a poll with nothing newer reads the pointer alone, not the revision's body", async () => {
  const clock = new FakeClock(0);
  const { log } = memoryLogger("debug", clock);
  const coord = new MemoryCoordination({ clock, log });
  const c = coord.node();
  const inner = c.slot("config");
  const reads: string[] = [];
  const counted = { ...inner, get: (key: string) => (reads.push(key), inner.get(key)) };
  const writer = new CompanyRevisions(inner, c.slot("status"), "a", clock, log);
  const reader = new CompanyRevisions(counted, c.slot("status"), "b", clock, log);
  const applied: string[] = [];
  const follower = new RevisionFollower(reader, async (a) => void applied.push(a.digest), clock, log, () => 0.5);
  await writer.activate(acme);
  await follower.check();
  expect(applied).toEqual([companyDigest(acme)]);
  reads.length = 0;
  await follower.check();
  await follower.check();
  expect(reads).toEqual(["active", "active"]);
  // A newer epoch still gets its body read and applied.
  await writer.activate(acme2);
  await follower.check();
  expect(applied).toEqual([companyDigest(acme), companyDigest(acme2)]);
  expect(reads.filter((k) => k.startsWith("revision."))).toEqual([`revision.${companyDigest(acme2)}`]);
});

test("an apply that fails is retried on the next check", async () => {
  const { clock, node } = setup();
  const writer = node("a");
  let fail = true;
  const applied: string[] = [];
  const follower = new RevisionFollower(node("b"), async (a) => {
    if (fail) throw new Error("estate not ready");
    applied.push(a.digest);
  }, clock, memoryLogger().log);
  await writer.activate(acme);
  await follower.check();
  expect(applied).toEqual([]);
  fail = false;
  await follower.check();
  expect(applied).toEqual([companyDigest(acme)]);
});

test("the file is a seed: activated only when the fleet has none or the operator edited it", () => {
  const table: [string, Parameters<typeof decideSeed>[0], ReturnType<typeof decideSeed>][] = [
    ["first boot of the fleet", { file: "A", lastSeeded: null, active: null }, { apply: true, reason: "fleet_has_none" }],
    ["the fleet lost its pointer", { file: "A", lastSeeded: "A", active: null }, { apply: true, reason: "fleet_has_none" }],
    ["the file is the active company", { file: "A", lastSeeded: "A", active: "A" }, { apply: false, reason: "already_active" }],
    ["restart with the file seeded last time, fleet moved on", { file: "A", lastSeeded: "A", active: "B" }, { apply: false, reason: "file_unchanged" }],
    ["restart after the operator edited the file", { file: "C", lastSeeded: "A", active: "B" }, { apply: true, reason: "file_changed" }],
    ["a new (or scratch) store joining a fleet", { file: "C", lastSeeded: null, active: "B" }, { apply: false, reason: "not_seeded_here" }],
  ];
  for (const [, input, want] of table) expect(decideSeed(input)).toEqual(want);
});

test("the seed memory lives in node.db across opens", () => {
  const dir = mkdtempSync(join(tmpdir(), "crewlet-seed-"));
  try {
    const m = new SeedMemory(dir);
    expect(m.last()).toBeNull();
    m.remember("abc", 1);
    m.remember("def", 2);
    m.close();
    const again = new SeedMemory(dir);
    expect(again.last()).toBe("def");
    again.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("revisions are listed newest first, read by digest, re-activated (rollback), and first-boot seeding never overwrites", async () => {
  const { clock, node } = setup();
  const a = node("a");
  expect(await a.activateIfNone(acme)).toMatchObject({ changed: true });
  // Later than a's (the losing peer below stores its revision as it loses): the order is
  // by time, not by which digest happens to sort first.
  await clock.advance(1_000);
  // A peer's first boot that lost the race changes nothing.
  expect(await node("b").activateIfNone(acme2)).toBeNull();
  expect((await a.active())!.digest).toBe(companyDigest(acme));
  const second = await node("b").activate(acme2);
  const list = await a.list();
  expect(list.map((r) => [r.digest, r.active, r.seats, r.stored_by])).toEqual([
    [companyDigest(acme2), true, 2, "b"],
    [companyDigest(acme), false, 1, "a"],
  ]);
  expect((await a.read(companyDigest(acme)))!.company.roles.map((r) => r.handle)).toEqual(["ceo"]);
  expect(await a.read("0".repeat(64))).toBeNull();
  const back = await a.activateDigest(companyDigest(acme));
  expect(back.changed).toBe(true);
  expect(back.active.epoch).toBeGreaterThan(second.active.epoch);
  expect((await a.active())!.digest).toBe(companyDigest(acme));
  await expect(a.activateDigest("f".repeat(64))).rejects.toBeInstanceOf(RevisionNotFound);
  // A stored revision is immutable: storing it again keeps its first stored_at.
  const storedAt = (await a.list()).find((r) => r.digest === companyDigest(acme))!.stored_at;
  await clock.advance(1_000);
  await a.activate(acme);
  expect((await a.list()).find((r) => r.digest === companyDigest(acme))!.stored_at).toBe(storedAt);
});

test("a company too large for one stored revision, even gzipped, is refused with its size, storing nothing and moving nothing", async () => {
  const { node } = setup();
  const a = node("a");
  await a.activate(acme);
  // Random text gzip cannot shrink below the limit (the fuzzer's find, before gzip: the broker
  // refused the KV write and the route answered 500).
  const big = companySchema.parse({ name: "Big", mission: randomBytes(1_100_000).toString("base64") });
  const refused = await a.activate(big).catch((err: unknown) => err);
  expect(refused).toBeInstanceOf(RevisionTooLarge);
  expect((refused as RevisionTooLarge).bytes).toBeGreaterThan(MAX_REVISION_BYTES);
  expect((await a.list()).map((r) => r.digest)).toEqual([companyDigest(acme)]);
  expect((await a.active())!.digest).toBe(companyDigest(acme));
  // Just under the limit as JSON: accepted, and stored as plain JSON.
  const fits = companySchema.parse({ name: "Big", mission: "m".repeat(MAX_REVISION_BYTES - 1_000) });
  expect((await a.activate(fits)).changed).toBe(true);
});

test("a company past one revision as JSON is stored gzipped on the broker and read back whole; one that fits stays plain JSON", async () => {
  const nats = await startNats(1);
  const nc = await nats.connect();
  const coord = await createCoordination({ type: "embedded-kv", nc, replicas: 1, clock: systemClock, log: silentLogger });
  try {
    const config = coord.slot("config");
    const revisions = new CompanyRevisions(config, coord.slot("status"), "m1", systemClock, silentLogger);
    // 10,000 generated seats are ~1.5 MB as stored, which no broker message holds.
    const roles = Array.from({ length: 10_000 }, (_, i) => ({ name: `Agent a${i}`, handle: `a${i}`, placement: { labels: { pool: "main" } } }));
    const large = companySchema.parse({ name: "Scale", roles });
    expect(JSON.stringify(large).length).toBeGreaterThan(MAX_REVISION_BYTES);
    expect((await revisions.activate(large)).changed).toBe(true);
    const raw = (await config.get(`revision.${companyDigest(large)}`))!.value;
    expect([raw[0], raw[1]]).toEqual([0x1f, 0x8b]);
    expect(raw.byteLength).toBeLessThan(MAX_REVISION_BYTES / 4);
    const back = await new CompanyRevisions(config, coord.slot("status"), "m2", systemClock, silentLogger).active();
    expect(back!.company).toEqual(large);
    expect(back!.digest).toBe(companyDigest(large));
    expect((await revisions.list()).find((r) => r.active)!.seats).toBe(10_000);
    // What fits stays readable by a build that knows only JSON.
    await revisions.activate(acme);
    expect(new TextDecoder().decode((await config.get(`revision.${companyDigest(acme)}`))!.value)).toStartWith("{");
  } finally {
    await coord.close();
    await nc.close();
    await nats.stop();
  }
}, 60_000);

test("a stored body that inflates past its bound is refused, not allocated; its revision reads as unreadable and the rest still list", async () => {
  const bomb = new Uint8Array(gzipSync(new Uint8Array(MAX_INFLATED_REVISION_BYTES + 1)));
  expect(() => decodeRevisionBody(bomb)).toThrow();
  const clock = new FakeClock(0);
  const coord = new MemoryCoordination({ clock, log: silentLogger });
  const c = coord.node();
  const revisions = new CompanyRevisions(c.slot("config"), c.slot("status"), "a", clock, silentLogger);
  await revisions.activate(acme);
  const bad = "b".repeat(64);
  await c.slot("config").create(`revision.${bad}`, bomb);
  await c.slot("config").create(`revision.${"c".repeat(64)}`, new TextEncoder().encode("not json"));
  await expect(revisions.read(bad)).rejects.toBeInstanceOf(RevisionUnreadable);
  const listed = await revisions.list();
  expect(listed.map((r) => r.name).sort()).toEqual(["(unreadable by this build)", "(unreadable by this build)", "Acme"]);
  expect(listed.find((r) => r.name === "Acme")!.active).toBe(true);
});
