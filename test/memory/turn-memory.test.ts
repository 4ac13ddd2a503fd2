// Memory in the turn, on the real turn engine with the default company's scripted provider:
// the turn's rows are on the changelog before its completion is recorded, the prompt
// carries the memory, memory_note / memory_search work on the seat's own rows, the holder's
// reflection pass keeps what was learned, and onboarding runs once per seat fleet-wide.
import { Database } from "bun:sqlite";
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { systemClock } from "../../src/clock.ts";
import { MemoryCoordination } from "../../src/coord/index.ts";
import type { KvSlot } from "../../src/coord/contract.ts";
import { memoryLogger } from "../../src/log.ts";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { CompletionLedger } from "../../src/agent/ledger.ts";
import { TurnMemory } from "../../src/agent/memory.ts";
import { ReflectDispatcher } from "../../src/agent/reflect.ts";
import { buildProviders } from "../../src/agent/providers/index.ts";
import type { CompletionRequest, Provider } from "../../src/agent/providers/contract.ts";
import type { Trigger } from "../../src/org/trigger.ts";
import { TurnEngine } from "../../src/agent/turn.ts";
import type { TurnTranscript } from "../../src/agent/transcript.ts";
import { encodeLearningDue, learningMsgId, type LearningDue } from "../../src/memory/learning-due.ts";
import { planLearning } from "../../src/memory/learning-plan.ts";
import { mailboxSubject } from "../../src/queue/topics.ts";
import type { EpisodeRow } from "../../src/memory/records.ts";
import { MemoryChangelog } from "../../src/memory/changelog.ts";
import { ONBOARDING_STEP } from "../../src/memory/onboarding.ts";
import { MemoryStore } from "../../src/memory/store.ts";
import { HYDRATE_RETRY_MS, MemorySync } from "../../src/memory/sync.ts";
import { buildOrg } from "../../src/org/org.ts";
import { ensureSeatMailboxes } from "../../src/queue/mailboxes.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { LocalEstate, mentionTrigger, rootCompany, taskTrigger } from "../agent/support.ts";

const company = rootCompany();
const org = buildOrg(company);
const { log } = memoryLogger("warn");
const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** One node's agent engine with memory, over a changelog and coordination shared by a test. */
function node(name: string, shared: { changelog: MemoryChangelog; coord: MemoryCoordination; estate: LocalEstate; queue: MemoryQueue }, provider?: Provider) {
  const dir = mkdtempSync(join(tmpdir(), `crewlet-turnmem-${name}-`));
  const db = new Database(join(dir, "node.db"), { create: true, strict: true });
  db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
  cleanup.push(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const store = new MemoryStore(db, systemClock);
  const sync = new MemorySync({ store, changelog: shared.changelog, clock: systemClock, log });
  const c = shared.coord.node({});
  const scripted = buildProviders(company.providers.llm, systemClock);
  const providerFor = (seat: { llm?: string | null }) => provider ?? scripted.get(seat.llm ?? "");
  const memory = new TurnMemory({ store, sync, estate: shared.estate, queue: shared.queue, claims: c.slot("claims"), node_id: name, clock: systemClock, log });
  const ledgerSlot = c.slot("ledger");
  const events = new MemoryEventSink();
  const kept: TurnTranscript[] = [];
  const engine = new TurnEngine({
    transcripts: { keep: (t) => void kept.push(t), costOf: () => null, modelOf: () => "scripted" },
    org: () => org,
    node_id: name,
    clock: systemClock,
    log,
    estate: shared.estate,
    queue: shared.queue,
    providerFor,
    ledger: new CompletionLedger(ledgerSlot, systemClock, log),
    memory,
    events,
  });
  const reflect = new ReflectDispatcher({ queue: shared.queue, store, sync, org: () => org, providerFor, clock: systemClock, log });
  cleanup.push(() => reflect.detachAll());
  return { store, sync, engine, reflect, ledgerSlot, events, kept };
}

async function shared() {
  const estate = new LocalEstate(company);
  const queue = new MemoryQueue({ clock: systemClock, log });
  await queue.ensureStreams();
  await ensureSeatMailboxes(queue, ["ceo", "cto", "pm", "engineer"], systemClock, log);
  cleanup.push(async () => {
    estate.close();
    await queue.close();
  });
  return { changelog: new MemoryChangelog(), coord: new MemoryCoordination({ clock: systemClock, log }), estate, queue };
}

const owned = () => true;

/** A provider that answers "done" and keeps every request it was sent. */
function capturing(): { seen: CompletionRequest[]; capture: Provider } {
  const seen: CompletionRequest[] = [];
  const capture: Provider = {
    name: "capture",
    async complete(req) {
      seen.push(req);
      return { text: "done", toolCalls: [], usage: { input_tokens: 0, output_tokens: 0 } };
    },
  };
  return { seen, capture };
}

async function waitFor(what: string, pred: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(10);
  }
}

describe("memory in the turn", () => {
  test("a turn's memory rows are on the changelog before its completion is recorded", async () => {
    const s = await shared();
    const A = node("a", s);
    // The ledger's own write checks what the changelog already holds for the seat.
    const seenAtRecord: string[][] = [];
    const realCreate = A.ledgerSlot.create.bind(A.ledgerSlot);
    const realPut = A.ledgerSlot.put.bind(A.ledgerSlot);
    const probe = async () => seenAtRecord.push((await s.changelog.replay("ceo")).records.map((r) => r.table).sort());
    (A.ledgerSlot as KvSlot).create = async (k, v) => (await probe(), realCreate(k, v));
    (A.ledgerSlot as KvSlot).put = async (k, v) => (await probe(), realPut(k, v));
    const msg = await s.estate.post("general", "founder", "@ceo hello there");
    const r = await A.engine.run({ seat: "ceo", epoch: 1, fence: owned, triggers: [mentionTrigger("ceo", "general", msg, "hello there")] });
    expect(r.settle).toBe("ack");
    expect(seenAtRecord.length).toBeGreaterThan(0);
    expect(seenAtRecord[0]).toEqual(expect.arrayContaining(["conversations", "counterparties", "episodes"]));
    const ep = A.store.recentEpisodes("ceo", 5);
    expect(ep).toHaveLength(1);
    expect(ep[0]).toMatchObject({ turn_id: r.turn_id, counterparty: "founder", outcome: "completed" });
    expect(A.store.counterparty("ceo", "founder")!.interactions).toBe(1);
    expect(A.store.pending("ceo")).toEqual([]);
  });

  test("the prompt carries the diary, this work's episodes and the counterparty note, within the budget", async () => {
    const s = await shared();
    const { seen, capture } = capturing();
    const A = node("a", s, capture);
    A.store.writeDiary({ handle: "cto", content: "The motor supplier ships on Thursdays", source: "note", turn_id: null, work_key: null });
    A.store.setCounterpartyNote("cto", "ceo", "wants dates, not estimates");
    const created = await s.estate.write("tracker", { op: "work.create", project: "ENG", reporter: "ceo", type: "task", title: "Pick a motor", body: "", status: "todo", priority: "none", assignee: "cto", parent: null, labels: [], due: null });
    const key = (created as unknown as { outcome: { key: string } }).outcome.key;
    await A.engine.run({ seat: "cto", epoch: 1, fence: owned, triggers: [taskTrigger("cto", key, "Pick a motor")] });
    // The second turn on the same work sees the first one's episode.
    await A.engine.run({ seat: "cto", epoch: 1, fence: owned, triggers: [{ ...taskTrigger("cto", key, "Pick a motor, again"), event_id: `again:${key}` }] });
    const opening = (seen[1]!.messages[0] as { content: string }).content;
    expect(opening).toContain("The motor supplier ships on Thursdays");
    expect(opening).toContain("About ceo: wants dates, not estimates");
    expect(opening).toContain("Earlier on this work:");
    expect(seen[1]!.facts!.vars.diary).toBe("The motor supplier ships on Thursdays");
    expect(seen[1]!.tools.map((t) => t.name)).toEqual(expect.arrayContaining(["memory_note", "memory_search"]));
  });

  test("a tool call touching a work item fills the episode's work_items; the item's next wake, through another conversation, recalls that episode", async () => {
    const s = await shared();
    const seen: CompletionRequest[] = [];
    const scripted = buildProviders(company.providers.llm, systemClock);
    const recording: Provider = {
      name: "recording",
      async complete(req) {
        seen.push(req);
        return scripted.get(org.seat("ceo")!.llm ?? "")!.complete(req);
      },
    };
    const A = node("a", s, recording);
    // In #general, ceo's plan creates ENG-1 (for cto) and OPS-1 (for pm) with work_create.
    const msg = await s.estate.post("general", "founder", "@ceo we need a plan for the Q3 launch");
    const first = await A.engine.run({ seat: "ceo", epoch: 1, fence: owned, triggers: [mentionTrigger("ceo", "general", msg, "@ceo we need a plan for the Q3 launch")] });
    expect(first.outcome).toBe("completed");
    const [episode] = A.store.recentEpisodes("ceo", 5);
    expect(episode).toMatchObject({ turn_id: first.turn_id, conversation: `chat:general:${msg}`, work_items: ["ENG-1", "OPS-1"] });
    // ENG-1 comes back to ceo on the item's own conversation (a comment on it), not the chat thread.
    const comment: Trigger = {
      type: "task_comment",
      event_id: "comment:ENG-1:c1",
      seat: "ceo",
      conversation: "work:ENG-1",
      from: "cto",
      text: "cto commented on ENG-1 (Technical plan): which motor?",
      refs: { work_key: "ENG-1" },
      created_at: 3_000,
    };
    const second = await A.engine.run({ seat: "ceo", epoch: 1, fence: owned, triggers: [comment] });
    expect(second.outcome).toBe("completed");
    const opening = (seen.at(-1)!.messages[0] as { content: string }).content;
    expect(opening).toContain("Earlier on this work:");
    expect(opening).toContain(`[completed] ${episode!.summary.replace(/\s+/g, " ").trim().slice(0, 40)}`);
    // The comment's turn lists the item that woke it first, then those its tools made: the
    // next wake on ENG-1 finds both turns.
    expect(A.store.recentEpisodes("ceo", 5)[0]).toMatchObject({ turn_id: second.turn_id, work_items: ["ENG-1", "ENG-2", "OPS-2"] });
    expect(A.store.episodesForWorkItem("ceo", "ENG-1", 5).map((e) => e.turn_id)).toEqual([second.turn_id!, first.turn_id!]);
    // A wake on an item ceo never touched recalls nothing of ENG-1.
    const other = await A.engine.run({ seat: "ceo", epoch: 1, fence: owned, triggers: [{ ...comment, event_id: "comment:ENG-9:c1", conversation: "work:ENG-9", refs: { work_key: "ENG-9" }, text: "about ENG-9" }] });
    expect(other.outcome).toBe("completed");
    expect((seen.at(-1)!.messages[0] as { content: string }).content).not.toContain("Earlier on this work:");
  });

  test("memory_note keeps a note once; memory_search finds it; a note over the byte limit names its field", async () => {
    const s = await shared();
    const A = node("a", s);
    const [note, search] = A.engine.toolsFor("pm").filter((t) => t.name.startsWith("memory_"));
    const ctx = { seat: "pm", epoch: 1, turn_id: "t-1", signal: new AbortController().signal };
    const first = await note!.call({ content: "Ops reviews plans on Mondays" }, ctx);
    const again = await note!.call({ content: "Ops reviews plans on Mondays" }, ctx);
    expect(JSON.parse(first.content)).toMatchObject({ kept: true, already_there: false });
    expect(JSON.parse(again.content)).toMatchObject({ already_there: true });
    expect(A.store.counts("pm").diary).toBe(1);
    const hits = JSON.parse((await search!.call({ query: "when are plans reviewed? mondays" }, ctx)).content).hits;
    expect(hits[0]).toMatchObject({ kind: "diary", text: "Ops reviews plans on Mondays" });
    // Another seat's search never sees pm's diary.
    expect(JSON.parse((await search!.call({ query: "mondays" }, { ...ctx, seat: "cto" })).content).hits).toEqual([]);
    const big = await note!.call({ content: "x".repeat(3000) }, ctx);
    expect(big.is_error).toBe(true);
    expect(big.content).toContain("content");
    expect(big.content).toContain("bytes");
  });

  test("after a turn, the holder's reflection pass writes the diary and the counterparty note (scripted rule)", async () => {
    const s = await shared();
    const A = node("a", s);
    await A.reflect.attach("ceo");
    const msg = await s.estate.post("general", "founder", "@ceo we ship the robot in March");
    await A.engine.run({ seat: "ceo", epoch: 1, fence: owned, triggers: [mentionTrigger("ceo", "general", msg, "we ship the robot in March")] });
    await waitFor("the reflection's note", () => A.store.recentDiary("ceo", 5).some((d) => d.source === "reflection" && d.content.includes("we ship the robot in March")));
    await waitFor("the counterparty note", () => (A.store.counterparty("ceo", "founder")?.note ?? "").includes("we ship the robot in March"));
    // The reflection's rows were flushed too.
    await waitFor("the reflection flushed", () => A.store.pending("ceo").length === 0);
    // …and the next turn can quote the diary (the default company's rule).
    const q = await s.estate.post("general", "founder", "@ceo what do you remember?");
    const r = await A.engine.run({ seat: "ceo", epoch: 1, fence: owned, triggers: [mentionTrigger("ceo", "general", q, "what do you remember?")] });
    expect(r.final_text).toContain("we ship the robot in March");
  });

  test("onboarding runs once per seat across nodes: the claim is fleet-wide, the marker travels", async () => {
    const s = await shared();
    const A = node("a", s);
    const B = node("b", s);
    const m1 = await s.estate.post("eng", "founder", "@cto hi");
    await A.engine.run({ seat: "cto", epoch: 1, fence: owned, triggers: [mentionTrigger("cto", "eng", m1, "hi")] });
    expect(A.store.hasOnboarding("cto", ONBOARDING_STEP)).toBe(true);
    expect(A.store.view("cto", 5).onboarding[0]!.detail).toContain('space "Engineering"');
    // B never hydrated (the marker is not there) but the claim is taken: B does not run it.
    const m2 = await s.estate.post("eng", "founder", "@cto hi again");
    await B.engine.run({ seat: "cto", epoch: 2, fence: owned, triggers: [mentionTrigger("cto", "eng", m2, "hi again")] });
    expect(B.store.hasOnboarding("cto", ONBOARDING_STEP)).toBe(false);
    // Hydrated, B has A's marker.
    await B.sync.hydrate("cto");
    expect(B.store.hasOnboarding("cto", ONBOARDING_STEP)).toBe(true);
  });

  test("a reflection wake published while the seat is between holders waits for the next one", async () => {
    const s = await shared();
    const A = node("a", s);
    // A ran the turn but no node has the reflection subject attached (the seat is moving).
    const msg = await s.estate.post("general", "founder", "@pm the budget is 40k");
    await A.engine.run({ seat: "pm", epoch: 1, fence: owned, triggers: [mentionTrigger("pm", "general", msg, "the budget is 40k")] });
    await Bun.sleep(50);
    const B = node("b", s);
    await B.sync.hydrate("pm");
    expect(B.store.recentDiary("pm", 5)).toEqual([]);
    await B.reflect.attach("pm");
    await waitFor("the waiting wake's reflection on the next holder", () => B.store.recentDiary("pm", 5).some((d) => d.source === "reflection" && d.content.includes("the budget is 40k")));
    // …and not on the node that ran the turn.
    expect(A.store.recentDiary("pm", 5)).toEqual([]);
  });

  test("a hydration that cannot read the changelog throws (the acquire hook refuses the seat) and leaves no state", async () => {
    const s = await shared();
    const A = node("a", s);
    const { log: seen, sink } = memoryLogger("debug");
    const sync = new MemorySync({ store: A.store, changelog: s.changelog, clock: systemClock, log: seen });
    s.changelog.failReplays = true;
    await expect(sync.hydrate("cto")).rejects.toThrow("memory could not be hydrated");
    expect(sync.state("cto")).toBeNull();
    // It asked again (an election's "no responders" passes) before refusing.
    expect(sink.events("memory_hydrate_retry")).toHaveLength(HYDRATE_RETRY_MS.length);
    expect(sink.events("memory_hydrate_failed")).toHaveLength(1);
    s.changelog.failReplays = false;
    await sync.hydrate("cto");
    expect(sync.state("cto")).toBe("ready");
  });
});

describe("skills in the turn", () => {
  const refund = (i: number): EpisodeRow => ({
    id: `e${i}`,
    handle: "cto",
    work_key: `wk-${i}`,
    turn_id: `t${i}`,
    trigger_ids: [],
    conversation: "c",
    counterparty: "ceo",
    outcome: "completed",
    summary: `Refund the invoice for customer ${["acme", "globex", "initech"][i]}: checked the payment first`,
    work_items: [],
    created_at: Date.now() - 1_000 + i,
  });

  test("a learning wake is written by the seat's holder; the next prompt that fits carries the skill and the transcript names it", async () => {
    const s = await shared();
    const { seen, capture } = capturing();
    const A = node("a", s, capture);
    for (const i of [0, 1, 2]) A.store.writeEpisode(refund(i));
    const [plan] = planLearning({ now_ms: Date.now(), seats: [{ handle: "cto", episodes: A.store.allEpisodes("cto"), skills: [], versions: new Map() }], peers: {} });
    const due: LearningDue = { type: "learning_due", seat: "cto", skills: plan!.skills, compact_before: null, at: Date.now() };
    await A.reflect.attach("cto");
    await s.queue.publish(mailboxSubject("cto", "reflect"), encodeLearningDue(due), { msgId: learningMsgId(due) });
    await waitFor("the skill", () => A.store.skills("cto").length === 1);
    const skill = A.store.skills("cto")[0]!;
    expect(skill).toMatchObject({ state: "active", uses: 0, origin: "clustered" });
    // Written by the holder, so its flush carries it (the next holder hydrates it).
    await waitFor("the flush", () => A.store.pending("cto").length === 0);
    expect((await s.changelog.replay("cto")).records.filter((r) => r.table === "skills" || r.table === "skill_versions")).toHaveLength(2);

    const msg = await s.estate.post("general", "ceo", "@cto please refund the invoice for hooli");
    await A.engine.run({ seat: "cto", epoch: 1, fence: owned, triggers: [mentionTrigger("cto", "general", msg, "please refund the invoice for hooli", "ceo")] });
    const turns = () => seen.filter((r) => r.facts?.trigger_type !== "reflection");
    const opening = (turns().at(-1)!.messages[0] as { content: string }).content;
    expect(skill.name).toBe("invoice, refund");
    expect(opening).toContain(`[skill: ${skill.name}]`);
    expect(opening).toContain("Refund the invoice for customer acme");
    expect(turns().at(-1)!.facts!.vars.skills).toBe(skill.name);
    expect(A.kept.at(-1)!.skills).toEqual([{ id: skill.id, name: skill.name, kind: "learned" }]);
    expect(A.store.skill("cto", skill.id)).toMatchObject({ uses: 1 });

    // A trigger about something else carries no skill; an archived skill is never carried.
    const other = await s.estate.post("general", "ceo", "@cto how is the motor order going");
    await A.engine.run({ seat: "cto", epoch: 1, fence: owned, triggers: [mentionTrigger("cto", "general", other, "how is the motor order going", "ceo")] });
    expect((turns().at(-1)!.messages[0] as { content: string }).content).not.toContain("[skill:");
    expect(A.kept.at(-1)!.skills).toEqual([]);
    A.store.putSkill({ ...A.store.skill("cto", skill.id)!, state: "archived" });
    const again = await s.estate.post("general", "ceo", "@cto refund another invoice");
    await A.engine.run({ seat: "cto", epoch: 1, fence: owned, triggers: [mentionTrigger("cto", "general", again, "refund another invoice", "ceo")] });
    expect((turns().at(-1)!.messages[0] as { content: string }).content).not.toContain("[skill:");
  });

  test("a learning wake carrying another seat's rows is refused whole; the next wake on the subject still applies (compaction)", async () => {
    const s = await shared();
    const A = node("a", s);
    for (const i of [0, 1, 2]) A.store.writeEpisode(refund(i));
    A.store.writeEpisode({ ...refund(0), id: "old", handle: "pm", work_key: "wk-old", created_at: 5 });
    const [plan] = planLearning({ now_ms: Date.now(), seats: [{ handle: "cto", episodes: A.store.allEpisodes("cto"), skills: [], versions: new Map() }], peers: {} });
    // cto's skill rows in a wake for pm, with a compaction that must not happen either.
    const bad: LearningDue = { type: "learning_due", seat: "pm", skills: plan!.skills, compact_before: 10, at: Date.now() };
    await A.reflect.attach("pm");
    await s.queue.publish(mailboxSubject("pm", "reflect"), encodeLearningDue(bad));
    const good: LearningDue = { type: "learning_due", seat: "pm", skills: [], compact_before: 10, at: Date.now() };
    await s.queue.publish(mailboxSubject("pm", "reflect"), encodeLearningDue(good));
    await waitFor("the compaction", () => A.store.counts("pm").episodes === 0);
    expect(A.store.skills("pm")).toEqual([]);
    expect(A.store.skills("cto")).toEqual([]);
    expect(A.store.counts("cto").episodes).toBe(3);
  });
});
