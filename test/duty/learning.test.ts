// The learning duty's tick on the in-memory twins (changelog, queue) and a FakeClock: it
// reads every agent seat's memory from the changelog, wakes the seats with something to
// learn on their reflection subject (a content-derived message id), sends an unchanged
// decision again only after LEARNING_RESEND_MS, and a successor duty decides the same rows.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { buildOrg } from "../../src/org/org.ts";
import { LEARNING_RESEND_MS, LearningDuty, unitPeers } from "../../src/duty/learning.ts";
import type { DutyContext } from "../../src/duty/runner.ts";
import { memoryLogger } from "../../src/log.ts";
import { MemoryChangelog } from "../../src/memory/changelog.ts";
import { decodeLearningDue, type LearningDue } from "../../src/memory/learning-due.ts";
import type { EpisodeRow } from "../../src/memory/records.ts";
import { ensureSeatMailboxes } from "../../src/queue/mailboxes.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { mailbox } from "../../src/queue/topics.ts";
import { ack } from "../../src/queue/contract.ts";
import { rootCompany } from "../agent/support.ts";

const org = buildOrg(rootCompany());
const ctx: DutyContext = { epoch: 1, signal: new AbortController().signal, beat: () => undefined };

async function setup() {
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const { log } = memoryLogger("warn", clock);
  const changelog = new MemoryChangelog();
  const queue = new MemoryQueue({ clock, log });
  await queue.ensureStreams();
  const handles = org.agentSeats().map((s) => s.handle);
  await ensureSeatMailboxes(queue, handles, clock, log);
  const woken: { seat: string; due: LearningDue; msgId: string | undefined }[] = [];
  for (const h of handles) {
    const mb = mailbox(h, "reflect");
    await queue.attach(mb.subject, mb.group, async (d) => {
      const dec = decodeLearningDue(d.data);
      if (dec.ok) woken.push({ seat: h, due: dec.due, msgId: d.msgId });
      return ack();
    });
  }
  const duty = () => new LearningDuty({ changelog, queue, org: () => org, clock, log });
  const episodes = (handle: string, n: number) =>
    changelog.publish(
      Array.from({ length: n }, (_, i): { table: "episodes"; row: EpisodeRow } => ({
        table: "episodes",
        row: { id: `e${i}`, handle, work_key: `wk${i}`, turn_id: `t${i}`, trigger_ids: [], conversation: "c", counterparty: null, outcome: "completed", summary: `Refund the invoice for customer ${i}`, work_items: [], created_at: clock.now() - 1_000 + i },
      })),
    );
  const settle = async () => {
    for (let i = 0; i < 20; i++) await clock.advance(1);
  };
  return { clock, duty, episodes, woken, settle, changelog };
}

describe("the learning duty's tick", () => {
  test("wakes only the seats with something to learn, on their reflection subject", async () => {
    const { duty, episodes, woken, settle } = await setup();
    await episodes("cto", 3);
    await episodes("pm", 2); // two are a coincidence
    expect(await duty().tick(ctx)).toBe(`${org.agentSeats().length} seats read, 1 with changes, 1 woken`);
    await settle();
    expect(woken.map((w) => w.seat)).toEqual(["cto"]);
    expect(woken[0]!.due.skills.map((c) => c.skill.name)).toEqual(["invoice, refund"]);
  });

  test("an unchanged decision is not sent every tick; it is sent again after LEARNING_RESEND_MS; a successor decides the same rows", async () => {
    const { clock, duty, episodes, woken, settle } = await setup();
    await episodes("cto", 3);
    const d1 = duty();
    await d1.tick(ctx);
    await d1.tick(ctx);
    await settle();
    expect(woken).toHaveLength(1);
    await clock.advance(LEARNING_RESEND_MS);
    await d1.tick(ctx);
    await settle();
    expect(woken).toHaveLength(2);
    // A successor (a fresh duty) sends once; its wake names the same rows (ids are digests
    // of content, not of when or by whom), so the holder writes nothing twice.
    await duty().tick(ctx);
    await settle();
    expect(woken).toHaveLength(3);
    const rows = (w: (typeof woken)[number]) => w.due.skills.map((c) => [c.skill.id, c.version?.id]);
    expect(rows(woken[2]!)).toEqual(rows(woken[0]!));
  });

  test("a changelog that cannot replay a seat leaves it for the next tick; the tick still ends", async () => {
    const { duty, episodes, woken, settle, changelog } = await setup();
    await episodes("cto", 3);
    changelog.failReplays = true;
    const n = org.agentSeats().length;
    expect(await duty().tick(ctx)).toBe(`0 seats read, 0 with changes, 0 woken, ${n} unread`);
    changelog.failReplays = false;
    expect(await duty().tick(ctx)).toBe(`${n} seats read, 1 with changes, 1 woken`);
    await settle();
    expect(woken.map((w) => w.seat)).toEqual(["cto"]);
  });

  test("promotion reaches the agents sharing a unit", () => {
    const peers = unitPeers(org);
    for (const [h, ps] of Object.entries(peers)) {
      for (const p of ps) expect(org.agentSeat(p)!.units.some((u) => org.agentSeat(h)!.units.includes(u))).toBe(true);
      expect(ps).not.toContain(h);
    }
  });
});
