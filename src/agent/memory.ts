// The seat's memory in the turn (src/memory holds the rows, the changelog and the pure
// recall/reflection code; this is the agent engine's side of it):
//   - recall: before the model is called, the seat's newest diary, its episodes for the
//     work at hand and its note on whoever woke it, inside MEMORY_PROMPT_TOKENS; the first
//     turn of a seat runs its onboarding step once, fleet-wide;
//   - the tools memory_note and memory_search (inputs derived from the row schemas);
//   - at the turn's end, its episode, counterparty and conversation rows are written and
//     published BEFORE the completion is recorded, so a crash after the record loses none;
//   - once recorded, a reflection_due wake on the seat's own reflection subject.
import type { Clock } from "../clock.ts";
import type { KvSlot } from "../coord/contract.ts";
import type { Logger } from "../log.ts";
import { claimOnboarding, ONBOARDING_STEP } from "../memory/onboarding.ts";
import { memoryBlock, RECALL_DIARY_NOTES, RECALL_EPISODES } from "../memory/recall.ts";
import { MemoryNoteInput, MemorySearchInput, MEMORY_SEARCH_MAX_RESULTS, MAX_SUMMARY_BYTES, MAX_WORK_ITEMS, MAX_NOTE_BYTES, MemoryRowInvalid } from "../memory/records.ts";
import { cutBytes, encodeReflectionDue, reflectionMsgId } from "../memory/reflection.ts";
import { pickSkills, type PromptSkill } from "../memory/skill-pick.ts";
import type { MemoryStore } from "../memory/store.ts";
import type { MemorySync } from "../memory/sync.ts";
import type { Org, Seat } from "../org/org.ts";
import type { Trigger } from "../org/trigger.ts";
import { mailboxSubject } from "../queue/topics.ts";
import { defineTool, ok, type Tool } from "./tools/contract.ts";
import { searchMemory, type MemorySearchDeps } from "./memory-search.ts";
import type { Embedder } from "./providers/embeddings.ts";
import type { EstatePort, PublishPort } from "./tools/estate-port.ts";

/** Pages of a unit's space the onboarding step reads the titles of. */
export const ONBOARDING_PAGES = 20;

export interface TurnMemoryFacts {
  seat: string;
  turn_id: string;
  work_key: string | null;
  trigger_ids: string[];
  conversation: string;
  /** Who woke the turn (the last trigger's sender), unless the seat itself. */
  counterparty: string | null;
  outcome: string;
  summary: string;
  work_items: string[];
  /** What woke it, in words. */
  asked: string;
}

export interface Recalled {
  /** Added to the turn's opening message; null when there is nothing to say. */
  block: string | null;
  /** For the scripted provider's templates: {{diary}} (newest note), {{memory}} (the block),
   *  {{skills}} (the names of the skills carried, comma-separated). */
  vars: Record<string, string>;
  /** The skills the prompt carries (the transcript names them). */
  skills: { id: string; name: string; kind: PromptSkill["kind"] }[];
}

/** What the turn engine asks of the seat's memory (absent: a turn with no memory). */
export interface TurnMemoryPort {
  recall(r: { seat: Seat; org: Org; triggers: readonly Trigger[] }): Promise<Recalled>;
  tools(): readonly Tool[];
  turnEnded(t: TurnMemoryFacts): Promise<void>;
  turnRecorded(t: TurnMemoryFacts): Promise<void>;
}

export interface TurnMemoryOptions {
  store: MemoryStore;
  sync: MemorySync;
  estate: EstatePort;
  queue: PublishPort;
  /** crewlet_claims: the onboarding step's fleet-wide single-flight. Null: no onboarding. */
  claims: KvSlot | null;
  node_id: string;
  /** This node's tool skills (the skills source's registry); absent: none. */
  toolSkills?: () => readonly PromptSkill[];
  clock: Clock;
  log: Logger;
  /** The embeddings endpoint of the company in force (memory_search blends vectors), or null. */
  embedder?: () => Embedder | null;
}

export class TurnMemory implements TurnMemoryPort {
  private readonly toolList: Tool[];

  constructor(private readonly o: TurnMemoryOptions) {
    this.toolList = memoryTools({ store: o.store, embedder: o.embedder ?? (() => null), log: o.log });
  }

  tools(): readonly Tool[] {
    return this.toolList;
  }

  async recall(r: { seat: Seat; org: Org; triggers: readonly Trigger[] }): Promise<Recalled> {
    const handle = r.seat.handle;
    await this.onboard(r.seat, r.org);
    const last = r.triggers[r.triggers.length - 1]!;
    const counterparty = last.from !== handle ? last.from : null;
    const diary = this.o.store.recentDiary(handle, RECALL_DIARY_NOTES);
    // "This work" is the work item the trigger names (a tracker key such as "ENG-1", not the
    // ledger's work_key hash): every episode that touched it, whichever conversation it came
    // through. No work item, or none of its episodes here: this conversation's earlier turns.
    const item = r.triggers.map((t) => t.refs.work_key).filter((k): k is string => k !== undefined).at(-1);
    const episodes = item !== undefined ? this.o.store.episodesForWorkItem(handle, item, RECALL_EPISODES) : [];
    const onThisWork = episodes.length === 0 ? this.o.store.episodesInConversation(handle, last.conversation, RECALL_EPISODES) : episodes;
    const block = memoryBlock({
      diary,
      episodes: onThisWork,
      counterparty: counterparty ? this.o.store.counterparty(handle, counterparty) : null,
      onboarding: this.o.store.view(handle, 1).onboarding,
    });
    const skills = this.skillsFor(handle, r.triggers);
    const joined = [skills.block, block].filter((b): b is string => b !== null).join("\n\n");
    return {
      block: joined === "" ? null : joined,
      vars: { diary: diary[0]?.content ?? "", memory: block ?? "", skills: skills.picked.map((s) => s.name).join(", ") },
      skills: skills.picked.map((s) => ({ id: s.id, name: s.name, kind: s.kind })),
    };
  }

  /** The skills that fit the triggers: the seat's learned ones and this node's tool skills.
   *  A learned skill carried counts one use (the lifecycle's clock, and promotion's proof). */
  private skillsFor(handle: string, triggers: readonly Trigger[]) {
    const learned: PromptSkill[] = this.o.store
      .liveSkills(handle)
      .map(({ skill: k, body }) => ({ id: k.id, name: k.name, kind: "learned", terms: k.terms, body, state: k.state === "stale" ? "stale" : "active", uses: k.uses }));
    const pick = pickSkills(triggers.map((t) => t.text).join("\n"), [...learned, ...(this.o.toolSkills?.() ?? [])]);
    const used = pick.picked.filter((s) => s.kind === "learned").map((s) => s.id);
    if (used.length > 0) this.o.store.markSkillsUsed(handle, used);
    return pick;
  }

  /** The seat's onboarding step, once per seat: marker here → done; else claim, run, mark. */
  private async onboard(seat: Seat, org: Org): Promise<void> {
    const handle = seat.handle;
    if (!this.o.claims || this.o.store.hasOnboarding(handle, ONBOARDING_STEP)) return;
    let won: boolean;
    try {
      won = await claimOnboarding(this.o.claims, handle, ONBOARDING_STEP, this.o.node_id, this.o.clock.now());
    } catch (err) {
      this.o.log.warn("memory_onboarding_claim_failed", { seat: handle, error: err as Error });
      return;
    }
    if (!won) return;
    const found: string[] = [];
    for (const unitId of seat.units) {
      const space = org.unit(unitId)?.space;
      if (!space) continue;
      try {
        const pages = await this.o.estate.read({ q: "pages.list", container: space, limit: ONBOARDING_PAGES });
        found.push(`space "${space}": ${pages.length === 0 ? "no pages yet" : pages.map((p) => p.title).join(", ")}`);
      } catch (err) {
        found.push(`space "${space}": unreadable (${(err as Error).message})`);
      }
    }
    const detail = cutBytes(found.length === 0 ? "no unit knowledge space to read" : `read ${found.join("; ")}`, MAX_NOTE_BYTES);
    // The marker's detail is what the turn is shown (recall's "Onboarding done" line).
    this.o.store.markOnboarding(handle, ONBOARDING_STEP, detail);
    this.o.log.info("memory_onboarded", { seat: handle, step: ONBOARDING_STEP, spaces: found.length });
  }

  async turnEnded(t: TurnMemoryFacts): Promise<void> {
    const s = this.o.store;
    // The counterparty first: a re-run of work whose episode is already here is not counted.
    if (t.counterparty) s.touchCounterparty(t.seat, t.counterparty, t.work_key);
    s.writeEpisode({
      id: t.turn_id,
      handle: t.seat,
      work_key: t.work_key,
      turn_id: t.turn_id,
      trigger_ids: t.trigger_ids.slice(0, 64),
      conversation: t.conversation,
      counterparty: t.counterparty,
      outcome: t.outcome,
      summary: cutBytes(t.summary, MAX_SUMMARY_BYTES),
      work_items: t.work_items.slice(0, MAX_WORK_ITEMS),
      created_at: this.o.clock.now(),
    });
    s.touchConversation(t.seat, t.conversation, t.turn_id, t.trigger_ids.slice(0, 64));
    // Published before the completion is recorded. A failure is logged and left to the
    // cycle: the turn's effects shipped, and its completion must be recorded regardless.
    await this.o.sync.flushQuietly(t.seat, "turn");
  }

  async turnRecorded(t: TurnMemoryFacts): Promise<void> {
    try {
      await this.o.queue.publish(
        mailboxSubject(t.seat, "reflect"),
        encodeReflectionDue({
          type: "reflection_due",
          seat: t.seat,
          turn_id: t.turn_id,
          work_key: t.work_key,
          conversation: cutBytes(t.conversation, 512),
          counterparty: t.counterparty ? cutBytes(t.counterparty, 200) : null,
          outcome: t.outcome,
          summary: cutBytes(t.summary, MAX_SUMMARY_BYTES),
          asked: cutBytes(t.asked, MAX_NOTE_BYTES),
          at: this.o.clock.now(),
        }),
        { msgId: reflectionMsgId(t.turn_id) },
      );
    } catch (err) {
      // A lost wake is a lost reflection, not a lost turn: the episode is already kept.
      this.o.log.warn("memory_reflection_wake_failed", { seat: t.seat, turn_id: t.turn_id, error: err as Error });
    }
  }
}

/** memory_note and memory_search: the seat's own memory, nothing outside the engine. */
export function memoryTools(deps: MemorySearchDeps): Tool[] {
  const { store } = deps;
  const own = { readOnly: false, openWorld: false, estateWrite: false };
  return [
    defineTool({
      name: "memory_note",
      description: "Keep a short note in your own diary (facts, preferences, decisions you will want in later turns). Identical notes are kept once.",
      input: MemoryNoteInput,
      annotations: own,
      run: async (a, ctx) => {
        try {
          const r = store.writeDiary({ handle: ctx.seat, content: a.content, source: "note", turn_id: ctx.turn_id, work_key: null });
          return ok({ kept: true, id: r.id, already_there: !r.inserted });
        } catch (err) {
          if (err instanceof MemoryRowInvalid) return { content: err.message, is_error: true, reached: false };
          throw err;
        }
      },
    }),
    defineTool({
      name: "memory_search",
      description: "Search your own diary and the summaries of your earlier turns.",
      input: MemorySearchInput,
      annotations: { readOnly: true, openWorld: false, estateWrite: false },
      run: async (a, ctx) => ok(await searchMemory(deps, ctx.seat, a.query, a.limit ?? MEMORY_SEARCH_MAX_RESULTS, ctx.signal)),
    }),
  ];
}
