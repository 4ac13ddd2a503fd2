// One company for the whole fleet: revisions behind a CAS activation pointer whose KV
// revision is the epoch, followed by every node in epoch order.
import { expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { companySchema } from "../../src/config/company.ts";
import { MemoryCoordination } from "../../src/coord/index.ts";
import { memoryLogger } from "../../src/log.ts";
import { APPLY_POLL_MS, CompanyRevisions, companyDigest, RevisionFollower, type ActiveRevision } from "../../src/node/company-revisions.ts";

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
