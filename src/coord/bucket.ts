// One bucket of the coordination store, as the lease algorithm and the slots see it: a KV
// slot plus the few things a lease needs beyond get/put — the entry a revision wrote (for
// its store timestamp), the bucket's last write (for the gate's view), and the store's
// clock. JetStream KV (kv.ts) and the in-memory twin (local.ts) both implement it, so the
// lease algorithm in leases.ts is written once and runs on both.
import type { KvEntry, KvSlot, KvWatch } from "./contract.ts";
import type { StoreFaults, StoreOp, StoreOpKind } from "./faults.ts";

/** Keys here are wire keys (already encoded); slot() users go through encodedSlot. */
export interface Bucket extends KvSlot {
  /** Age limit of every value, ms; 0 = none. */
  readonly max_age_ms: number;
  /** The entry `revision` wrote under `key` (put, delete or purge), or null if it is gone. */
  at(key: string, revision: number): Promise<KvEntry | null>;
  /** Sequence of the bucket's last write still held, 0 when it holds nothing. */
  lastRevision(): Promise<number>;
  /** The store's clock, ms: the timestamp the store gives a write made now. */
  now(): Promise<number>;
}

/** Every call passes the faults first; a lost answer is decided after the store answered. */
export function withFaults(inner: Bucket, faults: StoreFaults): Bucket {
  const run = async <T>(kind: StoreOpKind, key: string | undefined, fn: () => Promise<T>): Promise<T> => {
    const op: StoreOp = { bucket: inner.bucket, kind, key };
    await faults.before(op);
    const out = await fn();
    faults.after(op);
    return out;
  };
  return {
    bucket: inner.bucket,
    max_age_ms: inner.max_age_ms,
    get: (key) => run("get", key, () => inner.get(key)),
    at: (key, revision) => run("at", key, () => inner.at(key, revision)),
    create: (key, value) => run("create", key, () => inner.create(key, value)),
    update: (key, value, revision) => run("update", key, () => inner.update(key, value, revision)),
    put: (key, value) => run("put", key, () => inner.put(key, value)),
    delete: (key, revision) => run("delete", key, () => inner.delete(key, revision)),
    purge: (key, revision) => run("purge", key, () => inner.purge(key, revision)),
    keys: (filter) => run("keys", filter, () => inner.keys(filter)),
    removals: (filter) => run("entries", filter, () => inner.removals(filter)),
    purgeRemoval: (key, revision) => run("purge", key, () => inner.purgeRemoval(key, revision)),
    entries: (filter) => run("entries", filter, () => inner.entries(filter)),
    watch: (onEntry, opts): Promise<KvWatch> => run("watch", opts?.key, () => inner.watch(onEntry, opts)),
    lastRevision: () => run("last_revision", undefined, () => inner.lastRevision()),
    now: () => run("now", undefined, () => inner.now()),
  };
}

// ---- keys -------------------------------------------------------------------------------

/** What a KV key token may hold as-is (the server's rule, minus `=`, our escape). */
const PLAIN = /^[-/\w]$/;

function escapeToken(token: string): string {
  let out = "";
  for (const ch of token) {
    if (PLAIN.test(ch)) {
      out += ch;
      continue;
    }
    for (const byte of new TextEncoder().encode(ch)) out += "=" + byte.toString(16).toUpperCase().padStart(2, "0");
  }
  return out;
}

function unescapeToken(token: string): string {
  if (!token.includes("=")) return token;
  const bytes: number[] = [];
  for (let i = 0; i < token.length; i++) {
    if (token[i] === "=") {
      bytes.push(parseInt(token.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(token.charCodeAt(i));
    }
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}

/**
 * A slot key on the wire: `.` keeps separating tokens (so `*` and `>` filters work), and
 * every other character KV keys refuse is escaped, so callers may key on any string.
 */
export function encodeSlotKey(key: string, wildcards = false): string {
  if (key.length === 0) throw new Error("invalid key: empty");
  const tokens = key.split(".");
  return tokens
    .map((t, i) => {
      if (t.length === 0) throw new Error(`invalid key ${JSON.stringify(key)}: empty token`);
      if (wildcards && (t === "*" || (t === ">" && i === tokens.length - 1))) return t;
      return escapeToken(t);
    })
    .join(".");
}

export function decodeSlotKey(wire: string): string {
  return wire.split(".").map(unescapeToken).join(".");
}

/**
 * A lease key on the wire: `seat:alice` → `seat.alice`. The kind before the first `:` is
 * one token and the rest another, so `seat.>` selects every seat lease and a handle with a
 * dot in it stays one key.
 */
export function encodeLeaseKey(key: string): string {
  const colon = key.indexOf(":");
  if (colon <= 0 || colon === key.length - 1) throw new Error(`invalid lease key ${JSON.stringify(key)}: want kind:name`);
  return `${escapeToken(key.slice(0, colon))}.${escapeToken(key.slice(colon + 1))}`;
}

export function decodeLeaseKey(wire: string): string | null {
  const dot = wire.indexOf(".");
  if (dot <= 0 || wire.indexOf(".", dot + 1) >= 0) return null;
  return `${unescapeToken(wire.slice(0, dot))}:${unescapeToken(wire.slice(dot + 1))}`;
}

/** The wire filter that covers every lease key starting with prefix. */
export function leaseFilter(prefix: string): string {
  const colon = prefix.indexOf(":");
  if (colon > 0) return `${escapeToken(prefix.slice(0, colon))}.>`;
  return ">";
}

/** True when a wire subject-style filter (`*`, `>`) selects key. */
export function filterMatches(filter: string, key: string): boolean {
  const f = filter.split(".");
  const k = key.split(".");
  for (let i = 0; i < f.length; i++) {
    if (f[i] === ">") return k.length > i;
    if (i >= k.length) return false;
    if (f[i] !== "*" && f[i] !== k[i]) return false;
  }
  return f.length === k.length;
}

const WIRE_KEY = /^[-/=.\w]+$/;
const WIRE_FILTER = /^[-/=.>*\w]+$/;

/** The server's own key rule, applied by both backends so they refuse the same keys. */
export function validateWireKey(key: string, filter = false): void {
  const ok = (filter ? WIRE_FILTER : WIRE_KEY).test(key) && !key.startsWith(".") && !key.endsWith(".") && !key.includes("..");
  if (!ok) throw new Error(`invalid key: ${JSON.stringify(key)}`);
}

/** The slot callers see: any string as a key, encoded on the way in and decoded on the way out. */
export function encodedSlot(inner: Bucket): KvSlot {
  const out = (e: KvEntry): KvEntry => ({ ...e, key: decodeSlotKey(e.key) });
  return {
    bucket: inner.bucket,
    get: async (key) => {
      const e = await inner.get(encodeSlotKey(key));
      return e && out(e);
    },
    create: (key, value) => inner.create(encodeSlotKey(key), value),
    update: (key, value, revision) => inner.update(encodeSlotKey(key), value, revision),
    put: (key, value) => inner.put(encodeSlotKey(key), value),
    delete: (key, revision) => inner.delete(encodeSlotKey(key), revision),
    purge: (key, revision) => inner.purge(encodeSlotKey(key), revision),
    keys: async (filter) => (await inner.keys(filter === undefined ? undefined : encodeSlotKey(filter, true))).map(decodeSlotKey),
    entries: async (filter) => (await inner.entries(filter === undefined ? undefined : encodeSlotKey(filter, true))).map(out),
    removals: async (filter) => (await inner.removals(filter === undefined ? undefined : encodeSlotKey(filter, true))).map(out),
    purgeRemoval: (key, revision) => inner.purgeRemoval(encodeSlotKey(key), revision),
    watch: (onEntry, opts) =>
      inner.watch((e) => onEntry(out(e)), { ...opts, key: opts?.key === undefined ? undefined : encodeSlotKey(opts.key, true) }),
  };
}
