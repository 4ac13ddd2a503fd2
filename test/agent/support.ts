// Test support for the agent engine: a real estate copy's rows and queries (estate.db in
// a temp dir, records applied by the estate's own applyRecord, reads answered by its own
// runQuery) behind the agent's EstatePort — no NATS state log in between, which the
// estate's own tests cover. Plus the root company and a trigger maker.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { applyRecord } from "../../src/estate/apply.ts";
import { openEstateDb } from "../../src/estate/migrate.ts";
import { parseMentions } from "../../src/estate/mentions.ts";
import { querySchema, runQuery, type QueryName, type QueryOf, type Results } from "../../src/estate/queries.ts";
import { checkRecord, makeRecord, type BodyOf, type StateRecord } from "../../src/estate/records.ts";
import { EstateInvalid, type WriteOutcome } from "../../src/estate/router.ts";
import { seedRecords } from "../../src/estate/seed.ts";
import type { Domain } from "../../src/estate/schema.ts";
import type { Company } from "../../src/config/company.ts";
import { loadConfigFile } from "../../src/config/load.ts";
import type { EstatePort } from "../../src/agent/tools/estate-port.ts";
import type { Trigger } from "../../src/org/trigger.ts";

export function rootCompany(): Company {
  return loadConfigFile("crewlet.yaml", {}).config.company!;
}

export class LocalEstate implements EstatePort {
  readonly dir = mkdtempSync(join(tmpdir(), "crewlet-agent-estate-"));
  private readonly opened = openEstateDb(join(this.dir, "estate.db"));
  private position = 0;
  /** Every write body, in order (what the agent did). */
  readonly writes: { domain: Domain; body: unknown }[] = [];
  /** Runs before each write; throwing makes the write fail as the router's would. */
  beforeWrite: ((domain: Domain, body: unknown) => void) | null = null;
  /** After a write applied: true makes its caller hear "unknown" (a lost answer). */
  loseAnswer: ((domain: Domain, body: unknown) => boolean) | null = null;
  /** Before a write: true makes it never land, its caller hearing "unknown" (a member cut off mid-write). */
  dropWrite: ((domain: Domain, body: unknown) => boolean) | null = null;

  constructor(company: Company) {
    for (const r of seedRecords(company, "test")) applyRecord(this.opened.db, r, ++this.position);
  }

  async read<K extends QueryName>(input: QueryOf<K>): Promise<Results[K]> {
    const q = querySchema.parse(input);
    return runQuery(this.opened.db, this.opened.sqlite, q) as Results[K];
  }

  async write<D extends Domain>(domain: D, body: BodyOf<D>, opts: { op_id?: string } = {}): Promise<WriteOutcome> {
    this.beforeWrite?.(domain, body);
    // The router's record gate, so the agent is refused here exactly as on a real node.
    const checked = checkRecord(makeRecord(domain, body, Date.now(), "test", opts.op_id) as StateRecord);
    if (!checked.ok) throw new EstateInvalid(checked.message, checked.field, checked.code);
    const record = checked.record;
    if (this.dropWrite?.(domain, body)) return { status: "unknown", op_id: record.op_id, error: "the chat log did not answer: TIMEOUT (injected, not applied)" } as WriteOutcome;
    const position = ++this.position;
    const outcome = applyRecord(this.opened.db, record, position);
    this.writes.push({ domain, body });
    if (this.loseAnswer?.(domain, body)) return { status: "unknown", op_id: record.op_id, error: "the chat log did not answer: TIMEOUT (injected)" } as WriteOutcome;
    return { status: "applied", domain, op_id: record.op_id, position, outcome, node: "test" };
  }

  /** A person posts in chat (what the API would do). */
  async post(channel: string, author: string, body: string, thread_parent: string | null = null): Promise<string> {
    const out = await this.write("chat", { op: "chat.post", channel, author, body, thread_parent, mentions: parseMentions(body), dm: null });
    if (out.status !== "applied" || !out.outcome.ok) throw new Error(`post failed: ${JSON.stringify(out)}`);
    return out.outcome.message_id as string;
  }

  async thread(channel: string, root: string) {
    const page = await this.read({ q: "chat.messages", channel, limit: 500 });
    return page.messages.filter((m) => m.id === root || m.thread_parent === root);
  }

  close(): void {
    this.opened.sqlite.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

let n = 0;
export function mentionTrigger(seat: string, channel: string, message_id: string, text: string, from = "founder"): Trigger {
  n += 1;
  return {
    type: "chat_mention",
    event_id: `chat:${message_id}:${seat}`,
    seat,
    conversation: `chat:${channel}:${message_id}`,
    from,
    text,
    refs: { channel, message_id },
    created_at: 1_000 + n,
  };
}

export function taskTrigger(seat: string, work_key: string, text: string, from = "ceo"): Trigger {
  return {
    type: "task_assigned",
    event_id: `task:${work_key}:${seat}`,
    seat,
    conversation: `work:${work_key}`,
    from,
    text,
    refs: { work_key },
    created_at: 2_000,
  };
}

/** A DM to `seat` (as wakes.ts derives it: chat_direct, the DM's message as the thread). */
export function directTrigger(seat: string, channel: string, message_id: string, text: string, from = "founder"): Trigger {
  return { ...mentionTrigger(seat, channel, message_id, text, from), type: "chat_direct" };
}

/** Somebody else's comment on a task `seat` is assigned (wakes.ts: task_comment). */
export function commentTrigger(seat: string, work_key: string, comment_id: string, text: string, from = "founder"): Trigger {
  return {
    type: "task_comment",
    event_id: `comment:${comment_id}:${seat}`,
    seat,
    conversation: `work:${work_key}`,
    from,
    text,
    refs: { work_key, comment_id },
    created_at: 3_000,
  };
}

/** Compile-time proof the real router is an EstatePort as it stands (tsc checks this). */
export function routerIsAnEstatePort(r: import("../../src/estate/router.ts").EstateRouter): EstatePort {
  return r;
}
/** …and the real queue a PublishPort. */
export function queueIsAPublishPort(q: import("../../src/queue/contract.ts").Queue): import("../../src/agent/tools/estate-port.ts").PublishPort {
  return q;
}
