// The estate router (Scaling Out § "How a request reaches the estate"): every tracker,
// knowledge and chat call goes through here. This node's own copy answers when it is a
// data node in service; otherwise the data nodes are asked over request/reply — the last
// one that answered first, then an order that spreads askers, nodes silent in the last
// 30 s last — each request carrying this node's write floor. Nobody answering is an error
// that says so, with what each node said.
import type { NatsConnection } from "nats";
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import type { EstateCopy } from "./copy.ts";
import { domainOfQuery, querySchema, type QueryName, type QueryOf, type Results } from "./queries.ts";
import { checkRecord, makeRecord, type BodyOf, type StateRecord } from "./records.ts";
import { recordLimitBytes } from "./statelog.ts";
import type { Outcome } from "./apply.ts";
import { answerSchema, decodeJson, encodeJson, rpcSubject, zeroFloor, type Answer, type Floor, type RpcRequest, type WriteAnswer } from "./rpc.ts";
import type { Domain } from "./schema.ts";

/** A read waits this long on one data node before the next is asked (ARCHITECTURE: router read 10 s). */
export const READ_TIMEOUT_MS = 10_000;
/**
 * A write waits this long on one data node (router write 60 s): long enough to ride out a
 * stream leader election (~4 s) and a slow apply, after which the write may have run and is
 * asked of the next node only under the same operation id.
 */
export const WRITE_TIMEOUT_MS = 60_000;
/** A node that did not answer is asked last for this long (the spec's thirty seconds). */
export const SILENT_FOR_MS = 30_000;

export type WriteOutcome =
  | { status: "applied"; domain: Domain; op_id: string; position: number; outcome: Outcome; node: string }
  | { status: "pending"; domain: Domain; op_id: string; position: number; node: string }
  | { status: "unknown"; domain: Domain; op_id: string; error: string };

/** Nobody could answer: says which nodes were asked and what each said. */
export class EstateUnavailable extends Error {
  constructor(
    readonly what: string,
    readonly said: Record<string, string>,
  ) {
    const parts = Object.entries(said).map(([n, s]) => `${n}: ${s}`);
    super(`no data node answered ${what}${parts.length ? ` (${parts.join("; ")})` : " (no data nodes known)"}`);
    this.name = "EstateUnavailable";
  }
}

/**
 * A query or record this build itself refuses (a caller's fault, not an estate fault):
 * nothing was published. `field` names the body field at fault when one is; `too_large`
 * says the record is over one log message.
 */
export class EstateInvalid extends Error {
  constructor(
    message: string,
    readonly field?: string,
    readonly code: "invalid_record" | "too_large" = "invalid_record",
  ) {
    super(message);
    this.name = "EstateInvalid";
  }
}

function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * The order to ask data nodes in. Pure. The last answerer first (its copy holds this
 * node's writes), then the rest rotated by a hash of the asker's id so askers spread across
 * the data nodes, with any node silent within SILENT_FOR_MS moved to the end.
 */
export function askOrder(o: { nodes: readonly string[]; self: string; last: string | null; silentAt: ReadonlyMap<string, number>; now_ms: number }): string[] {
  const nodes = [...new Set(o.nodes)].filter((n) => n !== o.self).sort();
  if (nodes.length === 0) return [];
  const k = hash32(o.self) % nodes.length;
  const spread = [...nodes.slice(k), ...nodes.slice(0, k)];
  const isSilent = (n: string) => {
    const at = o.silentAt.get(n);
    return at !== undefined && o.now_ms - at < SILENT_FOR_MS;
  };
  const speaking = spread.filter((n) => !isSilent(n));
  const silent = spread.filter(isSilent);
  if (o.last !== null && speaking.includes(o.last)) {
    return [o.last, ...speaking.filter((n) => n !== o.last), ...silent];
  }
  return [...speaking, ...silent];
}

export interface RouterOptions {
  nc: NatsConnection;
  nodeId: string;
  /** This node's copy when it is a data node; null on a node that holds no data. */
  copy: EstateCopy | null;
  /** The data nodes the fleet's presence names (the lead reads live presence leases). */
  dataNodes: () => readonly string[] | Promise<readonly string[]>;
  clock: Clock;
  log: Logger;
  read_timeout_ms?: number;
  write_timeout_ms?: number;
}

type Said = Record<string, string>;

/** Searches are best effort (Scaling Out: "a search is best effort"): never an error for want of an answerer. */
export function isSearch(q: QueryName): boolean {
  return q === "pages.search" || q === "work.search" || q === "chat.search";
}

export class EstateRouter {
  /** This node's last write position per domain: the floor every answerer must have applied. */
  private floor: Floor = zeroFloor();
  private last: string | null = null;
  private silentAt = new Map<string, number>();

  constructor(private readonly o: RouterOptions) {}

  get nodeId(): string {
    return this.o.nodeId;
  }
  /** A copy of this node's write floor. */
  get writeFloor(): Floor {
    return { ...this.floor };
  }

  /**
   * Answers a query from this node's copy or a data node's. Every answerer must have applied
   * this node's own writes; `atLeast` raises that floor for this read (a reader that saw a
   * record on the log, at its position, and wants it in the answer: the copy waits for its
   * applier rather than the reader polling).
   */
  async read<K extends QueryName>(input: QueryOf<K>, opts: { atLeast?: Partial<Floor> } = {}): Promise<Results[K]> {
    const parsed = querySchema.safeParse(input);
    if (!parsed.success) throw new EstateInvalid(`query ${input.q}: ${parsed.error.issues[0]?.message ?? "invalid"}`);
    const query = parsed.data;
    const domain = domainOfQuery(query.q);
    const floor: Floor = { ...this.floor };
    for (const [d, p] of Object.entries(opts.atLeast ?? {}) as [keyof Floor, number][]) if (p > floor[d]) floor[d] = p;
    const said: Said = {};
    const copy = this.o.copy;
    if (copy && copy.inService(domain)) {
      try {
        const a = await copy.read(query, floor);
        if (a.status === "ok") return a.result as Results[K];
        said[this.o.nodeId] = describe(a);
      } catch (err) {
        // This node's copy could not answer (closed under a stop): the peers can.
        said[this.o.nodeId] = `could not answer here: ${(err as Error).message}`;
      }
    } else if (copy) {
      said[this.o.nodeId] = `out_of_service: ${copy.outOfServiceReason(domain) ?? "?"}`;
    }
    for (const node of await this.order()) {
      const a = await this.ask(node, { kind: "read", query, floor }, this.o.read_timeout_ms ?? READ_TIMEOUT_MS);
      if ("failed" in a) {
        said[node] = a.failed;
        continue;
      }
      if (a.status === "ok") {
        this.last = node;
        return a.result as Results[K];
      }
      // This build parsed the query already: a peer refusing a search is an older build
      // that has no such index, which costs the answer that peer, never the search.
      if (a.status === "invalid" && !isSearch(query.q)) throw new EstateInvalid(a.message);
      said[node] = describe(a);
    }
    // A search is best effort: nobody answering is "could not be searched", not an error.
    if (isSearch(query.q)) return { hits: [], searched: false } as unknown as Results[K];
    throw new EstateUnavailable(`${query.q}`, said);
  }

  /**
   * Builds a record for `body` and writes it (see writeRecord). `op_id`, when given (an
   * Idempotency-Key's), names the write: a retry under it, on any node, is the same write.
   */
  write<D extends Domain>(domain: D, body: BodyOf<D>, opts: { op_id?: string | undefined } = {}): Promise<WriteOutcome> {
    return this.writeRecord(makeRecord(domain, body, this.o.clock.now(), this.o.nodeId, opts.op_id));
  }

  /**
   * Writes a record: on this node's copy when it is in service, else through the data
   * nodes. A write that may have run (a node went quiet after it was asked, or its log did
   * not answer) is only ever retried under the same operation id, which the log and every
   * copy's ledger apply once.
   */
  async writeRecord(record: StateRecord): Promise<WriteOutcome> {
    // Every write needs the broker (the log, or a data node over it). A connection that is
    // down now sends nothing: say so at once (503), rather than time out into "unknown".
    const down = connectionDown(this.o.nc);
    if (down !== null) throw new EstateUnavailable(`write ${record.op_id}`, { [this.o.nodeId]: down });
    // The record gate, here too: a node holding no data refuses what no copy could apply
    // before asking anyone (each executor's log append checks again).
    const checked = checkRecord(record, recordLimitBytes(this.o.nc));
    if (!checked.ok) throw new EstateInvalid(checked.message, checked.field, checked.code);
    const domain = record.domain;
    const said: Said = {};
    let mayHaveRun: string | null = null;
    const copy = this.o.copy;
    if (copy && copy.inService(domain)) {
      let a: WriteAnswer;
      try {
        a = await copy.writeRecord(record);
      } catch (err) {
        // This node's copy failed mid-write (closed under a stop): it may have appended, so
        // the peers are asked under the same op id, which the log and ledgers apply once.
        a = { status: "unknown", error: `could not answer here: ${(err as Error).message}` };
      }
      if (a.status === "invalid") throw new EstateInvalid(a.message, a.field, a.code);
      const done = this.settle(record, a, this.o.nodeId);
      if (done) return done;
      if (a.status === "unknown") mayHaveRun = a.error;
      said[this.o.nodeId] = describe(a);
    } else if (copy) {
      said[this.o.nodeId] = `out_of_service: ${copy.outOfServiceReason(domain) ?? "?"}`;
    }
    for (const node of await this.order()) {
      const a = await this.ask(node, { kind: "write", record, floor: this.floor }, this.o.write_timeout_ms ?? WRITE_TIMEOUT_MS);
      if ("failed" in a) {
        said[node] = a.failed;
        if (a.mayHaveRun) mayHaveRun = a.failed;
        continue;
      }
      if (a.status === "invalid") throw new EstateInvalid(a.message, a.field, a.code);
      const done = this.settle(record, a, node);
      if (done) {
        this.last = node;
        return done;
      }
      if (a.status === "unknown") mayHaveRun = a.error;
      said[node] = describe(a);
    }
    if (mayHaveRun !== null) {
      return { status: "unknown", domain, op_id: record.op_id, error: new EstateUnavailable(`write ${record.op_id}`, said).message };
    }
    throw new EstateUnavailable(`write ${record.op_id}`, said);
  }

  private settle(record: StateRecord, a: Answer, node: string): WriteOutcome | null {
    const base = { domain: record.domain, op_id: record.op_id, node };
    if (a.status === "applied") {
      this.raiseFloor(record.domain, a.position);
      return { status: "applied", ...base, position: a.position, outcome: a.outcome as Outcome };
    }
    if (a.status === "pending") {
      this.raiseFloor(record.domain, a.position);
      return { status: "pending", ...base, position: a.position };
    }
    return null;
  }

  private raiseFloor(domain: Domain, position: number): void {
    if (position > this.floor[domain]) this.floor[domain] = position;
  }

  private async order(): Promise<string[]> {
    let nodes: readonly string[] = [];
    try {
      nodes = await this.o.dataNodes();
    } catch (err) {
      this.o.log.warn("estate_data_nodes_unreadable", { error: (err as Error).message });
    }
    return askOrder({ nodes, self: this.o.nodeId, last: this.last, silentAt: this.silentAt, now_ms: this.o.clock.now() });
  }

  private async ask(node: string, req: RpcRequest, timeout_ms: number): Promise<Answer | { failed: string; mayHaveRun: boolean }> {
    let reply;
    try {
      reply = await this.o.nc.request(rpcSubject(node), encodeJson(req), { timeout: timeout_ms, noMux: false });
    } catch (err) {
      const code = (err as { code?: string }).code;
      this.silentAt.set(node, this.o.clock.now());
      if (this.last === node) this.last = null;
      // No responders: nothing received the request, so nothing ran. Anything else (a
      // timeout, a dropped connection) may have reached the node.
      if (code === "503") return { failed: "not reachable (no responders)", mayHaveRun: false };
      // This node's own connection closing or closed: the request never left.
      if (code === "CONNECTION_CLOSED" || code === "CONNECTION_DRAINING") return { failed: `not asked: this node's broker connection is ${code === "CONNECTION_CLOSED" ? "closed" : "draining"}`, mayHaveRun: false };
      return { failed: `no answer in ${timeout_ms} ms (${code ?? (err as Error).message})`, mayHaveRun: req.kind === "write" };
    }
    this.silentAt.delete(node);
    let parsed;
    try {
      parsed = answerSchema.safeParse(decodeJson(reply.data));
    } catch {
      return { failed: "answered something that is not JSON", mayHaveRun: req.kind === "write" };
    }
    if (!parsed.success) return { failed: `answered out of protocol: ${parsed.error.issues[0]?.message}`, mayHaveRun: req.kind === "write" };
    return parsed.data;
  }
}

/**
 * Why this node's NATS connection cannot carry a request right now, or null when it can:
 * closed, draining, or between a disconnect and the reconnect (the client's protocol
 * layer says whether it is connected; a connection object without one is taken as up).
 */
export function connectionDown(nc: NatsConnection): string | null {
  if (nc.isClosed()) return "this node's broker connection is closed";
  if (nc.isDraining()) return "this node's broker connection is draining (the node is stopping)";
  const connected = (nc as unknown as { protocol?: { connected?: unknown } }).protocol?.connected;
  if (connected === false) return "this node's broker connection is down (reconnecting)";
  return null;
}

function describe(a: Answer): string {
  switch (a.status) {
    case "out_of_service":
      return `out_of_service: ${a.reason}`;
    case "behind":
      return `behind: applied ${a.applied}, floor ${a.floor}`;
    case "unknown":
      return `unknown: ${a.error}`;
    case "invalid":
      return `invalid: ${a.message}`;
    default:
      return a.status;
  }
}
