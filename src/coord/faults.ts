// Fault injection for the coordination store, the same on both backends: an unreachable
// store, a write that lands while its caller hears nothing back (a lost answer), a write
// that never lands, a compare-and-set refused with nothing in its way (what a new stream
// leader that has not applied the last write yet answers), and a slow store. Tests and the seat-host simulation drive it; a node
// in production builds none. Faults sit between the lease algorithm and the bucket, so the
// in-memory twin and JetStream KV fail in exactly the same places.
import type { Clock } from "../clock.ts";
import { CasConflict, StoreUnavailable } from "./contract.ts";

export const WRITE_KINDS = ["create", "update", "put", "delete", "purge"] as const;
export const READ_KINDS = ["get", "at", "keys", "entries", "watch", "last_revision", "now"] as const;
export type StoreOpKind = (typeof WRITE_KINDS)[number] | (typeof READ_KINDS)[number];

export interface StoreOp {
  bucket: string;
  kind: StoreOpKind;
  key?: string;
}

export type OpMatch = (op: StoreOp) => boolean;

export function isWrite(op: StoreOp): boolean {
  return (WRITE_KINDS as readonly string[]).includes(op.kind);
}

/** Matches writes to one bucket (optionally one key). */
export function writeTo(bucket: string, key?: string): OpMatch {
  return (op) => isWrite(op) && op.bucket === bucket && (key === undefined || op.key === key);
}

interface Rule {
  match: OpMatch;
  remaining: number;
}

/** Bound on queued one-shot rules: a test that arms more than this has lost track of them. */
const MAX_RULES = 64;

export class StoreFaults {
  /** Every call fails with StoreUnavailable before reaching the store. */
  unreachable = false;
  /** Added before every call, on the injected clock. */
  slow_ms = 0;
  /** Runs before every call (after `unreachable`): lets a test act between two writes. */
  onOp: ((op: StoreOp) => Promise<void> | void) | null = null;
  private readonly failing: Rule[] = [];
  private readonly losing: Rule[] = [];
  private readonly refusing: Rule[] = [];

  constructor(private readonly clock: Clock) {}

  /** The next `times` matching calls fail without reaching the store. */
  failNext(match: OpMatch, times = 1): void {
    this.arm(this.failing, match, times);
  }

  /** The next `times` matching writes land, and their callers see StoreUnavailable. */
  loseNextAnswer(match: OpMatch, times = 1): void {
    this.arm(this.losing, match, times);
  }

  /** The next `times` matching writes are refused as compare-and-set conflicts without
   *  reaching the store, whatever the key holds. */
  conflictNext(match: OpMatch, times = 1): void {
    this.arm(this.refusing, match, times);
  }

  clear(): void {
    this.unreachable = false;
    this.slow_ms = 0;
    this.onOp = null;
    this.failing.length = 0;
    this.losing.length = 0;
    this.refusing.length = 0;
  }

  async before(op: StoreOp): Promise<void> {
    if (this.unreachable) throw new StoreUnavailable(`store unreachable (injected) at ${op.kind} ${op.bucket}`);
    if (this.onOp) await this.onOp(op);
    if (this.slow_ms > 0) await this.clock.sleep(this.slow_ms);
    if (this.unreachable) throw new StoreUnavailable(`store unreachable (injected) at ${op.kind} ${op.bucket}`);
    if (take(this.failing, op)) throw new StoreUnavailable(`${op.kind} ${op.bucket}/${op.key ?? ""} failed (injected)`);
    if (take(this.refusing, op)) throw new CasConflict(op.key ?? "", null);
  }

  /** Called after the store answered: a lost answer turns success into an error. */
  after(op: StoreOp): void {
    if (take(this.losing, op)) throw new StoreUnavailable(`answer to ${op.kind} ${op.bucket}/${op.key ?? ""} lost (injected)`);
  }

  private arm(rules: Rule[], match: OpMatch, times: number): void {
    if (this.failing.length + this.losing.length + this.refusing.length >= MAX_RULES) throw new Error(`more than ${MAX_RULES} fault rules armed`);
    rules.push({ match, remaining: times });
  }
}

function take(rules: Rule[], op: StoreOp): boolean {
  const i = rules.findIndex((r) => r.match(op));
  if (i < 0) return false;
  const rule = rules[i]!;
  rule.remaining -= 1;
  if (rule.remaining <= 0) rules.splice(i, 1);
  return true;
}
