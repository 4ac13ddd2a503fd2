// Reads of a seat's memory are answered by the seat's holder (spec: "A read is answered by
// the holder"). Every node that ever held a seat keeps a copy, but only the holder keeps it
// current, so a screen is never answered from whichever node served the request:
//   - this node holds the seat (its incarnation is the lease's owner) → its own store;
//   - a peer holds it → one request to that holder on `crewlet.memory.read.{node}` with a
//     2 s budget; silence, or a holder still hydrating the seat, is "unavailable", never empty;
//   - nobody holds it → empty, naming no holder (a copy of unknown age is not its memory).
// The overview (every seat) lists the leases once and sends ONE request per holding node
// naming all of its seats — the number of requests is the number of holders, not seats.
// Every node answers for the seats it holds, leaf nodes (no API) included.
import { z } from "zod";
import type { Logger } from "../log.ts";
import type { Queue } from "../queue/contract.ts";
import { HandleSchema } from "../queue/topics.ts";
import { MEMORY_TABLES, type MemoryTable } from "../memory/records.ts";
import type { MemoryStore, SeatMemoryView } from "../memory/store.ts";
import type { MemorySync } from "../memory/sync.ts";
import type { TranscriptSummary, TurnTranscript } from "./transcript.ts";
import { TRANSCRIPT_PAGE_MAX, type TranscriptPage, type TranscriptStore } from "./transcripts.ts";

/** The holder has this long to answer (ARCHITECTURE.md: scatter budget 2 s). */
export const MEMORY_READ_BUDGET_MS = 2_000;
/** Rows of each kind one seat's read returns at most: a screen's page, well under a message. */
export const MEMORY_READ_MAX_LIMIT = 100;
export const MEMORY_READ_DEFAULT_LIMIT = 20;
/** Seats one request may name: a company far larger than any we run. */
const MAX_SEATS_PER_REQUEST = 2_000;

export const memoryReadSubject = (node: string): string => {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(node)) throw new Error(`invalid node id ${JSON.stringify(node)}`);
  return `crewlet.memory.read.${node}`;
};

const ReadRequest = z.strictObject({
  /** The holding incarnation the asker read from the lease: a restarted node is another. */
  owner: z.string().min(1).max(200),
  handles: z.array(HandleSchema).min(1).max(MAX_SEATS_PER_REQUEST),
  /** Full view of each seat (one seat's screen) or its summary (the overview); a page of
   * its turn transcripts, or one transcript (src/agent/transcripts.ts); the tools the
   * holder offers it (its MCP servers run there, so only the holder knows their tools). */
  mode: z.enum(["view", "summary", "turns", "turn", "tools"]),
  limit: z.number().int().min(1).max(MEMORY_READ_MAX_LIMIT),
  /** turns: the page older than this cursor. */
  before: z.number().int().nonnegative().nullable().optional(),
  /** turn: which one. */
  turn_id: z.string().min(1).max(200).optional(),
});
type ReadRequest = z.infer<typeof ReadRequest>;

export interface SeatSummary {
  counts: Record<MemoryTable, number>;
  newest_note: string | null;
  newest_episode_at: number | null;
}

type SeatAnswer = { state: "ok"; view?: SeatMemoryView; summary?: SeatSummary; turns?: TranscriptPage; turn?: TurnTranscript | null; tools?: string[] } | { state: "hydrating" } | { state: "not_held" };

const ReadAnswer = z.object({
  node: z.string(),
  owner: z.string(),
  seats: z.record(z.string(), z.object({ state: z.enum(["ok", "hydrating", "not_held"]), view: z.any().optional(), summary: z.any().optional(), turns: z.any().optional(), turn: z.any().optional(), tools: z.array(z.string()).optional() })),
});

export interface LeaseFact {
  handle: string;
  node: string;
  owner: string;
  epoch: number;
}

export interface HolderFacts {
  node_id: string;
  /** This process's incarnation (the lease owner it writes). */
  owner: string;
  /** Seats established here. */
  held(): readonly string[];
  /** Every live seat lease, read now. */
  leases(): Promise<LeaseFact[]>;
}

export type MemoryReadState = "ok" | "no_holder" | "unavailable";

export interface SeatMemoryAnswer {
  handle: string;
  state: MemoryReadState;
  holder: { node: string; epoch: number } | null;
  /** Why it is unavailable, in words. */
  reason?: string;
  memory: SeatMemoryView | null;
}

export interface OverviewAnswer {
  seats: { handle: string; state: MemoryReadState; holder: { node: string; epoch: number } | null; reason?: string; summary: SeatSummary | null }[];
  coverage: { asked: string[]; answered: string[]; silent: string[] };
}

export function emptyCounts(): Record<MemoryTable, number> {
  return Object.fromEntries(MEMORY_TABLES.map((t) => [t, 0])) as Record<MemoryTable, number>;
}

export function emptyView(): SeatMemoryView {
  return { diary: [], episodes: [], counterparties: [], onboarding: [], conversations: [], skills: [], counts: emptyCounts() };
}

export interface MemoryReadsOptions {
  store: MemoryStore;
  sync: MemorySync;
  queue: Queue;
  holder: HolderFacts;
  log: Logger;
  budget_ms?: number;
  /** This node's turn transcripts (absent: every turns read answers an empty page). */
  transcripts?: TranscriptStore | null;
  /** The tool names this node offers a seat it holds (absent: an empty list). */
  tools?: (handle: string) => string[];
}

export interface SeatTurnsAnswer {
  handle: string;
  state: MemoryReadState;
  holder: { node: string; epoch: number } | null;
  reason?: string;
  turns: TranscriptSummary[];
  next: number | null;
}

export interface SeatTurnAnswer {
  handle: string;
  state: MemoryReadState;
  holder: { node: string; epoch: number } | null;
  reason?: string;
  /** Null when the holder keeps no transcript of that id. */
  turn: TurnTranscript | null;
}

export class MemoryReads {
  private serving: { stop(): void } | null = null;

  constructor(private readonly o: MemoryReadsOptions) {}

  /** Answers this node's read subject (every node, whatever its roles). */
  async serve(): Promise<void> {
    this.serving = await this.o.queue.serve(memoryReadSubject(this.o.holder.node_id), async (req) => {
      let parsed: ReadRequest;
      try {
        parsed = ReadRequest.parse(JSON.parse(new TextDecoder().decode(req.data)));
      } catch (err) {
        this.o.log.warn("memory_read_request_invalid", { error: (err as Error).message });
        return null;
      }
      return new TextEncoder().encode(JSON.stringify(this.answerLocally(parsed)));
    });
  }

  stop(): void {
    this.serving?.stop();
    this.serving = null;
  }

  private seatAnswer(handle: string, owner: string, mode: ReadRequest["mode"], limit: number, extra?: Pick<ReadRequest, "before" | "turn_id">): SeatAnswer {
    if (this.o.sync.state(handle) === "hydrating") return { state: "hydrating" };
    if (owner !== this.o.holder.owner || !this.o.holder.held().includes(handle) || this.o.sync.state(handle) !== "ready") return { state: "not_held" };
    if (mode === "turns") return { state: "ok", turns: this.o.transcripts?.list(handle, Math.min(limit, TRANSCRIPT_PAGE_MAX), extra?.before ?? null) ?? { turns: [], next: null } };
    if (mode === "tools") return { state: "ok", tools: this.o.tools?.(handle) ?? [] };
    if (mode === "turn") return { state: "ok", turn: (extra?.turn_id && this.o.transcripts?.get(handle, extra.turn_id)) || null };
    return mode === "view" ? { state: "ok", view: this.o.store.view(handle, limit) } : { state: "ok", summary: this.summary(handle) };
  }

  private answerLocally(req: ReadRequest) {
    const seats: Record<string, SeatAnswer> = {};
    for (const h of req.handles) seats[h] = this.seatAnswer(h, req.owner, req.mode, req.limit, req);
    return { node: this.o.holder.node_id, owner: this.o.holder.owner, seats };
  }

  private summary(handle: string): SeatSummary {
    const s = this.o.store;
    return { counts: s.counts(handle), newest_note: s.newestNote(handle), newest_episode_at: s.newestEpisodeAt(handle) };
  }

  /** Asks a holder about some of its seats; null when it did not answer within the budget. */
  private async ask(node: string, req: ReadRequest): Promise<Record<string, SeatAnswer> | null> {
    const answers = await this.o.queue.scatter(memoryReadSubject(node), new TextEncoder().encode(JSON.stringify(req)), { responders: 1, budget_ms: this.o.budget_ms ?? MEMORY_READ_BUDGET_MS });
    if (answers.length === 0) return null;
    try {
      const a = ReadAnswer.parse(JSON.parse(new TextDecoder().decode(answers[0]!.data)));
      return a.seats as Record<string, SeatAnswer>;
    } catch (err) {
      this.o.log.warn("memory_read_answer_invalid", { node, error: (err as Error).message });
      return null;
    }
  }

  /** One seat's memory, answered by its holder. */
  async seat(handle: string, limit = MEMORY_READ_DEFAULT_LIMIT): Promise<SeatMemoryAnswer> {
    const lim = Math.max(1, Math.min(limit, MEMORY_READ_MAX_LIMIT));
    const lease = (await this.o.holder.leases()).find((l) => l.handle === handle);
    if (!lease) return { handle, state: "no_holder", holder: null, reason: "no node holds this seat", memory: emptyView() };
    const holder = { node: lease.node, epoch: lease.epoch };
    const req: ReadRequest = { owner: lease.owner, handles: [handle], mode: "view", limit: lim };
    const seats = lease.owner === this.o.holder.owner ? this.answerLocally(req).seats : await this.ask(lease.node, req);
    return resolveSeat(handle, holder, seats, (a) => a.view ?? null);
  }

  /** A page of one seat's turn transcripts (summaries, newest first), answered by its holder. */
  async turns(handle: string, limit: number, before: number | null): Promise<SeatTurnsAnswer> {
    const got = await this.askOne(handle, { mode: "turns", limit: Math.max(1, Math.min(limit, TRANSCRIPT_PAGE_MAX)), before }, (a) => a.turns ?? null);
    const page = got.memory ?? { turns: [], next: null };
    return { handle, state: got.state, holder: got.holder, ...(got.reason ? { reason: got.reason } : {}), turns: page.turns, next: page.next };
  }

  /** One turn's transcript, answered by the seat's holder. */
  async turn(handle: string, turn_id: string): Promise<SeatTurnAnswer> {
    const got = await this.askOne(handle, { mode: "turn", limit: 1, turn_id }, (a) => a.turn ?? null);
    return { handle, state: got.state, holder: got.holder, ...(got.reason ? { reason: got.reason } : {}), turn: got.memory ?? null };
  }

  /** The tools a seat's holder offers it (builtins, integrations, its MCP servers' tools). */
  async tools(handle: string): Promise<{ state: MemoryReadState; holder: { node: string; epoch: number } | null; reason?: string; tools: string[] | null }> {
    const got = await this.askOne(handle, { mode: "tools", limit: 1 }, (a) => a.tools ?? null);
    return { state: got.state, holder: got.holder, ...(got.reason ? { reason: got.reason } : {}), tools: got.memory ?? null };
  }

  private async askOne<T>(handle: string, q: Pick<ReadRequest, "mode" | "limit" | "before" | "turn_id">, pick: (a: Extract<SeatAnswer, { state: "ok" }>) => T | null) {
    const lease = (await this.o.holder.leases()).find((l) => l.handle === handle);
    if (!lease) return { state: "no_holder" as const, holder: null, reason: "no node holds this seat", memory: null as T | null };
    const holder = { node: lease.node, epoch: lease.epoch };
    const req: ReadRequest = { owner: lease.owner, handles: [handle], ...q };
    const seats = lease.owner === this.o.holder.owner ? this.answerLocally(req).seats : await this.ask(lease.node, req);
    return resolveSeat(handle, holder, seats, pick);
  }

  /** Every seat's summary: one request per holding node, not one per seat. */
  async overview(handles: readonly string[]): Promise<OverviewAnswer> {
    const leases = new Map((await this.o.holder.leases()).map((l) => [l.handle, l]));
    const byOwner = new Map<string, { node: string; handles: string[] }>();
    for (const h of handles) {
      const l = leases.get(h);
      if (!l) continue;
      const g = byOwner.get(l.owner) ?? { node: l.node, handles: [] };
      g.handles.push(h);
      byOwner.set(l.owner, g);
    }
    const coverage = { asked: [] as string[], answered: [] as string[], silent: [] as string[] };
    const answers = new Map<string, Record<string, SeatAnswer> | null>();
    await Promise.all(
      [...byOwner.entries()].map(async ([owner, g]) => {
        const req: ReadRequest = { owner, handles: g.handles, mode: "summary", limit: 1 };
        if (owner === this.o.holder.owner) {
          answers.set(owner, this.answerLocally(req).seats);
          return;
        }
        coverage.asked.push(g.node);
        const got = await this.ask(g.node, req);
        (got ? coverage.answered : coverage.silent).push(g.node);
        answers.set(owner, got);
      }),
    );
    const seats = handles.map((h) => {
      const l = leases.get(h);
      if (!l) return { handle: h, state: "no_holder" as const, holder: null, reason: "no node holds this seat", summary: { counts: emptyCounts(), newest_note: null, newest_episode_at: null } };
      const r = resolveSeat(h, { node: l.node, epoch: l.epoch }, answers.get(l.owner) ?? null, (a) => a.summary ?? null);
      return { handle: h, state: r.state, holder: r.holder, ...(r.reason ? { reason: r.reason } : {}), summary: r.memory };
    });
    for (const k of ["asked", "answered", "silent"] as const) coverage[k].sort();
    return { seats, coverage };
  }
}

function resolveSeat<T>(
  handle: string,
  holder: { node: string; epoch: number },
  seats: Record<string, SeatAnswer> | null,
  pick: (a: Extract<SeatAnswer, { state: "ok" }>) => T | null,
): { handle: string; state: MemoryReadState; holder: { node: string; epoch: number }; reason?: string; memory: T | null } {
  if (seats === null) return { handle, state: "unavailable", holder, reason: `holder ${holder.node} did not answer within ${MEMORY_READ_BUDGET_MS / 1000} s`, memory: null };
  const a = seats[handle];
  if (!a) return { handle, state: "unavailable", holder, reason: `holder ${holder.node} did not answer for this seat`, memory: null };
  if (a.state === "hydrating") return { handle, state: "unavailable", holder, reason: `holder ${holder.node} is still hydrating this seat's memory`, memory: null };
  if (a.state === "not_held") return { handle, state: "unavailable", holder, reason: `holder ${holder.node} does not hold this seat under the lease read (it is moving)`, memory: null };
  return { handle, state: "ok", holder, memory: pick(a) };
}
